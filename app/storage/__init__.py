"""Qt-free persistence: run history (images + metadata) and typed user settings."""
