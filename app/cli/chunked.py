"""What a chunked command (``bench``, ``sweep``, ``calibrate``) says when it stops before its last
chunk: what it kept and where, and that the same command resumes."""

from __future__ import annotations

import sys
from pathlib import Path

RESUME = "rerun the same command to resume"


def interrupted(kept: str, where: Path) -> int:
    """Ctrl+C: one line on stderr; the exit code (130)."""
    print(f"teacache-studio: interrupted; {kept} kept in {where} — {RESUME}", file=sys.stderr)
    return 130


def stopped_early(done: int, total: int, unit: str, where: Path) -> int:
    """``--max-chunks`` reached (a deliberate stop): one line on stderr; the exit code (0)."""
    print(f"stopped after {done} of {total} {unit} (kept in {where}); {RESUME}", file=sys.stderr)
    return 0
