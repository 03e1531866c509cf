"""Add Model Folder's check, Qt-free: what a folder holds, which base variants its files fit and
whether it passes the checks, as one value the dialog shows.

``examine_folder`` reads the disk (file names, safetensors headers, the sizes of a model's files;
a mounted network folder can take seconds), so the dialog runs it off the GUI thread, once the
user has chosen a folder, pressed Enter or paused typing. It never raises for the folder: a folder
that cannot be read is one sentence like any other problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import UserFacingError
from app.variants import VARIANTS, get_variant
from app.variants.catalog import quantize_label
from app.variants.folders import FolderInfo, check_folder, inspect_folder, size_label, unreadable

COMPLETE = "Complete: every weight file present and readable."


@dataclass(frozen=True, slots=True)
class FolderCheck:
    """One folder examined for one base variant."""

    folder: str  # as typed (the dialog drops a check of a text it no longer shows)
    holds: str  # one line on what the folder holds; empty when it is not a folder
    bases: tuple[str, ...]  # the base variants to offer: those its files fit, else every one
    detected: bool  # the files tell which variant it is
    base: str | None  # the base variant checked (None: nothing to check against)
    problem: str | None  # one sentence; None when the folder passes

    @property
    def ok(self) -> bool:
        return self.base is not None and self.problem is None

    @property
    def message(self) -> str:
        return COMPLETE if self.ok else self.problem or ""


def describe(info: FolderInfo) -> str:
    """One line on what the folder holds, from its files."""
    if info.family is None:
        if not info.has_transformer:
            return "No model: there is no transformer/ folder"
        return f"{info.layout} layout, {size_label(info.size_bytes)}: no model recognised"
    stored = quantize_label(info.quantize)
    return f"{info.layout}, {info.family.display_name}, {stored}, {size_label(info.size_bytes)}"


def examine_folder(folder: str, base: str | None = None) -> FolderCheck:
    """What ``folder`` holds and its check against ``base`` (kept where its files fit it, else
    the first variant they fit). Reads the disk: call it off the GUI thread."""
    text = folder.strip()
    if not text:
        return FolderCheck(folder, "", (), False, None, "Choose a folder.")
    root = Path(text).expanduser()
    try:
        if not root.is_dir():
            return FolderCheck(folder, "", (), False, None, f"{root} is not a folder.")
        info = inspect_folder(root)
    except OSError as exc:
        return FolderCheck(folder, "", (), False, None, unreadable(root, exc))
    bases = info.candidates or tuple(
        v.id for v in VARIANTS.values() if v.family.folders is not None
    )
    chosen = base if base in bases else bases[0]
    try:
        check_folder(root, get_variant(chosen), info)
    except UserFacingError as exc:
        problem: str | None = str(exc)
    else:
        problem = None
    return FolderCheck(folder, describe(info), bases, info.detected is not None, chosen, problem)
