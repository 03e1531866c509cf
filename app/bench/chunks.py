"""Per-chunk persistence: what finished survives Ctrl-C, and a rerun resumes.

Every long command splits its work into chunks (one (condition, repetition) of a benchmark, one
threshold of a sweep, one prompt of a calibration). Each finished chunk is written at once, as one
JSON file, into a folder beside the command's output. A rerun with the same settings skips the
chunks already there; a rerun with different settings is refused (mixing them would silently
blend two experiments) unless the caller asks for a fresh start.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from app.fileio.jsonio import dumps_json, finite, write_json_atomic

__all__ = ["PLAN_FILE", "ChunkStore", "PlanMismatchError", "finite", "write_json_atomic"]

PLAN_FILE = "plan.json"


class PlanMismatchError(Exception):
    """The folder holds chunks of an experiment with other settings."""


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)


class ChunkStore:
    """A folder of finished chunks for one experiment, identified by its settings."""

    def __init__(self, directory: Path, settings: dict[str, Any], *, fresh: bool = False) -> None:
        self.directory = directory
        self.settings = settings
        self.fingerprint = hashlib.sha256(
            dumps_json(settings, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        plan = directory / PLAN_FILE
        if fresh and directory.exists():
            shutil.rmtree(directory)
        if plan.exists():
            try:
                recorded = json.loads(plan.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                recorded = {}
            if recorded.get("fingerprint") != self.fingerprint:
                raise PlanMismatchError(
                    f"{directory} holds results made with other settings; rerun with the same "
                    "settings to resume, or pass --fresh to discard them"
                )
        else:
            write_json_atomic(plan, {"fingerprint": self.fingerprint, "settings": settings})

    def path(self, key: str) -> Path:
        return self.directory / f"{_safe(key)}.json"

    def done(self, key: str) -> bool:
        return self.load(key) is not None

    def load(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or torn by a crash outside the atomic write: redo it
        return data if isinstance(data, dict) else None

    def save(self, key: str, result: dict[str, Any]) -> None:
        write_json_atomic(self.path(key), result)

    def file(self, name: str) -> Path:
        """A side file (an image, say) that belongs to this experiment's chunks."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory / _safe(name)
