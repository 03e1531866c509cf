"""The demo tools' JSON results: one format (indent 1, final newline) for every committed file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.fileio.jsonio import dumps_json


def write_json(path: Path, data: Any) -> None:
    path.write_text(dumps_json(data, indent=1) + "\n", encoding="utf-8")


def emit_json(data: Any, out: Path | None) -> None:
    """Write ``data`` to ``out`` when given, and print it: the tail of every measuring command."""
    if out is not None:
        write_json(out, data)
    print(dumps_json(data, indent=1))
