from __future__ import annotations


class UserError(Exception):
    """Bad input or an expected failure: reported as one line on stderr, no traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
