"""Where the app keeps user data.

``TEACACHE_STUDIO_HOME`` overrides every location (tests, portable use).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "TeaCache Studio"
APP_AUTHOR = "TeaCache Studio"


def _override() -> Path | None:
    home = os.environ.get("TEACACHE_STUDIO_HOME")
    return Path(home) if home else None


def data_dir() -> Path:
    root = _override()
    return root / "data" if root else Path(platformdirs.user_data_dir(APP_NAME, APP_AUTHOR))


def config_dir() -> Path:
    root = _override()
    return root / "config" if root else Path(platformdirs.user_config_dir(APP_NAME, APP_AUTHOR))


def cache_dir() -> Path:
    root = _override()
    return root / "cache" if root else Path(platformdirs.user_cache_dir(APP_NAME, APP_AUTHOR))


def log_dir() -> Path:
    root = _override()
    return root / "logs" if root else Path(platformdirs.user_log_dir(APP_NAME, APP_AUTHOR))


def history_dir() -> Path:
    return data_dir() / "history"


def settings_file() -> Path:
    return config_dir() / "settings.json"
