"""File ▸ Add Model Folder… / Remove Model Folder, Qt-free: what the two actions do
(``ModelFolders``), and the dialog's check: what a folder holds, which base variants its files fit
and whether it passes the checks, as one value the dialog shows.

``examine_folder`` reads the disk (file names, safetensors headers, the sizes of a model's files;
a mounted network folder can take seconds), so the dialog runs it off the GUI thread, once the
user has chosen a folder, pressed Enter or paused typing. It never raises for the folder: a folder
that cannot be read is one sentence like any other problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import UserFacingError
from app.ui.analysis import Notice, NoticeKind
from app.variants import VARIANTS, get_variant
from app.variants.catalog import quantize_label
from app.variants.folders import FolderInfo, check_folder, inspect_folder, size_label, unreadable

if TYPE_CHECKING:
    from app.ui.form_model import FormModel
    from app.ui.notices_model import Notices
    from app.ui.session import Session

COMPLETE = "Complete: every weight file present and readable."
MODEL_FOLDER_NOTICE = "model-folder"


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


class ModelFolders:
    """The File menu's model folder actions: a refused folder is one banner (``Notices``), a
    folder is selected and forgotten through the session (refused while a run goes)."""

    def __init__(self, form: FormModel, session: Session, notices: Notices) -> None:
        self.form = form
        self.session = session
        self.notices = notices

    def add_model_folder(self, folder: str | Path, base_variant: str | None) -> str | None:
        """Check and remember a local model folder; its variant id (for ``select_variant`` once
        the picker lists it), or None with the check's sentence in a banner."""
        from app.variants.folders import add_model_folder

        try:
            entry = add_model_folder(folder, base_variant)
        except UserFacingError as exc:
            self._folder_notice(str(exc))
            return None
        except OSError as exc:  # the list of folders could not be written
            self._folder_notice(f"could not remember {folder}: {exc.strerror or exc}")
            return None
        self.notices.dismiss(MODEL_FOLDER_NOTICE)
        return entry.variant_id

    def select(self, variant_id: str) -> bool:
        """Select a folder just added, once the picker lists it (refused while a run goes)."""
        return self.session.select_variant(variant_id)

    def remove_model_folder(self, variant_id: str) -> bool:
        """Forget a model folder (its files stay); the form falls back to its base variant."""
        from app.variants.folders import model_folders, remove_model_folder

        folder = next((f for f in model_folders() if f.variant_id == variant_id), None)
        if folder is None or self.session.busy:
            return False
        if self.form.variant_id == variant_id:
            self.session.select_variant(folder.base_variant)
        return remove_model_folder(variant_id)

    def _folder_notice(self, message: str) -> None:
        title = "Cannot add the model folder"
        self.notices.put(Notice(NoticeKind.error, title, message, key=MODEL_FOLDER_NOTICE))
