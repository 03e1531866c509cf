"""The failures every layer shares: an expected one the user reads as a sentence, and a cancel.

Qt-free and dependency-free, so the variants (downloads), the engine and the window can all raise
and catch the same classes without importing one another."""

from __future__ import annotations


class UserFacingError(Exception):
    """An expected failure (missing weights, no network, not enough memory...): its message is
    one sentence for the user, shown as is, with no traceback."""


class Cancelled(Exception):
    """Raised inside a run when the user cancelled; reported as ``RunCancelled``, not an error."""


class DownloadCancelled(Cancelled):
    """The user cancelled a download (the engine reports it as a cancel, not a failure)."""
