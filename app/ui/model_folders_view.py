"""File ▸ Add Model Folder… and Remove Model Folder: pick a local folder (an ``mflux-save`` output
or a Hugging Face snapshot), see what it holds and whether it passes the checks, say which base
variant it is where its files cannot tell, and list it in the picker under its family."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.errors import UserFacingError
from app.ui.session import Session
from app.variants import VARIANTS, get_variant
from app.variants.catalog import quantize_label
from app.variants.folders import FolderInfo, check_folder, inspect_folder, size_label


def describe(info: FolderInfo) -> str:
    """One line on what the folder holds, from its files."""
    if info.family is None:
        return f"{info.layout} layout, {size_label(info.size_bytes)}: no model recognised"
    stored = quantize_label(info.quantize)
    return f"{info.layout}, {info.family.display_name}, {stored}, {size_label(info.size_bytes)}"


class AddModelFolderDialog(QDialog):
    """Folder, what it holds, which base variant (detected, or chosen), the check's result."""

    def __init__(self, parent: QWidget | None = None, folder: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Add Model Folder")
        self.setMinimumWidth(520)
        self.path = QLineEdit(folder)
        self.path.setPlaceholderText("a folder made by mflux-save, or a Hugging Face snapshot")
        browse = QPushButton("Choose…")
        browse.clicked.connect(self._browse)
        self.holds = QLabel()
        self.holds.setWordWrap(True)
        self.base = QComboBox()
        self.check_result = QLabel()
        self.check_result.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Add")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Folder", row)
        form.addRow("Holds", self.holds)
        form.addRow("Base variant", self.base)
        form.addRow("Check", self.check_result)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        self.path.textChanged.connect(self._inspect)
        self.base.currentIndexChanged.connect(self._check)
        self._inspect()

    def base_variant(self) -> str | None:
        data = self.base.currentData()
        return data if isinstance(data, str) else None

    def folder(self) -> str:
        return self.path.text().strip()

    def _browse(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Model folder", self.folder())
        if chosen:
            self.path.setText(chosen)

    def _inspect(self) -> None:
        folder = self.folder()
        self.base.blockSignals(True)
        self.base.clear()
        if folder and Path(folder).expanduser().is_dir():
            info = inspect_folder(folder)
            self.holds.setText(describe(info))
            ids = info.candidates or tuple(v.id for v in VARIANTS.values() if not v.embedded)
            for variant_id in ids:
                self.base.addItem(get_variant(variant_id).display_name, variant_id)
            detected = " (read from its files)" if info.detected else ""
            self.base.setToolTip(
                "The variant these weights are a copy of" + detected
                if detected
                else "Its files fit more than one variant: choose which one it is"
            )
        else:
            self.holds.setText("")
        self.base.blockSignals(False)
        self._check()

    def _check(self) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        folder, base = self.folder(), self.base_variant()
        if not folder:
            self.check_result.setText("Choose a folder.")
            ok.setEnabled(False)
            return
        if base is None:
            self.check_result.setText(f"{Path(folder).expanduser()} is not a folder.")
            ok.setEnabled(False)
            return
        try:
            check_folder(folder, get_variant(base))
        except UserFacingError as exc:
            self.check_result.setText(str(exc))
            self.check_result.setStyleSheet("color: #c62828;")
            ok.setEnabled(False)
            return
        self.check_result.setText("Complete: every weight file present and readable.")
        self.check_result.setStyleSheet("")
        ok.setEnabled(True)


class ModelFolderActions(QObject):
    """The two File menu actions; ``changed`` rebuilds the picker and the banners."""

    def __init__(self, window: QWidget, session: Session, changed: Callable[[], None]) -> None:
        super().__init__(window)
        self.window = window
        self.session = session
        self.changed = changed
        self.add_action = QAction("Add Model Folder…", window)
        self.add_action.triggered.connect(self.add)
        self.remove_action = QAction("Remove Model Folder", window)
        self.remove_action.triggered.connect(self.remove_current)
        self.remove_action.setToolTip("Forget the selected model folder (its files stay)")

    def install(self, menu: QMenu) -> None:
        menu.addAction(self.add_action)
        menu.addAction(self.remove_action)
        menu.aboutToShow.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        self.remove_action.setEnabled(self.session.form.variant.model_path is not None)

    def add(self) -> None:
        dialog = AddModelFolderDialog(self.window)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        added = self.add_folder(dialog.folder(), dialog.base_variant())
        if added is None:
            self.changed()  # the banner with the check's sentence

    def add_folder(self, folder: str, base_variant: str | None) -> str | None:
        """Remember the folder, list it in the picker, then select it."""
        variant_id = self.session.add_model_folder(folder, base_variant)
        if variant_id is not None:
            self.changed()  # the picker lists it before the form selects it
            self.session.select_variant(variant_id)
        return variant_id

    def remove_current(self) -> None:
        if self.session.remove_model_folder(self.session.form.variant_id):
            self.changed()
