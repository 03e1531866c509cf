"""File ▸ Add Model Folder… and Remove Model Folder: pick a local folder (an ``mflux-save`` output
or a Hugging Face snapshot), see what it holds and whether it passes the checks, say which base
variant it is where its files cannot tell, and list it in the picker under its family."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal
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

from app.ui.model_folders_model import FolderCheck, ModelFolders, examine_folder
from app.variants import get_variant

PAUSE_MS = 600  # typing that stops this long is checked


class _CheckRelay(QObject):
    """Carries a finished check from the pool thread to the dialog (a queued signal)."""

    done = Signal(int, object)


class AddModelFolderDialog(QDialog):
    """Folder, what it holds, which base variant (detected, or chosen), the check's result.

    Typing never touches the disk: the folder is examined (``examine_folder``) on a pool thread
    once it is chosen, on Enter, or after a pause in typing; a check of a text no longer in the
    field is dropped. Add stays off until the shown folder has passed. The messages wrap and the
    dialog grows to show them whole."""

    checked = Signal(object)  # FolderCheck, once it is on screen

    def __init__(self, parent: QWidget | None = None, folder: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Add Model Folder")
        self.setMinimumWidth(560)
        self.shown_check: FolderCheck | None = None
        self._fitted_height = -1  # the height _fit_text last set (the user's own is kept)
        self._generation = 0
        self._relay = _CheckRelay(self)
        self._relay.done.connect(self._show_check)
        self._pause = QTimer(self, singleShot=True, interval=PAUSE_MS)
        self._pause.timeout.connect(self.check_now)
        self.path = QLineEdit(folder)
        self.path.setPlaceholderText("a folder made by mflux-save, or a Hugging Face snapshot")
        browse = QPushButton("Choose…")
        browse.setAutoDefault(False)
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
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        form.addRow("Folder", row)
        form.addRow("Holds", self.holds)
        form.addRow("Base variant", self.base)
        form.addRow("Check", self.check_result)
        layout = self._layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        self.path.textChanged.connect(self._typed)
        self.path.returnPressed.connect(self.check_now)
        self.base.activated.connect(self.check_now)
        self._typed()
        if self.folder():
            self.check_now()

    def base_variant(self) -> str | None:
        data = self.base.currentData()
        return data if isinstance(data, str) else None

    def folder(self) -> str:
        return self.path.text().strip()

    def check_now(self) -> None:
        """Examine the folder in the field on the pool thread; its result replaces the shown
        one when it arrives, unless the field changed meanwhile."""
        self._pause.stop()
        self._generation += 1
        generation, folder, base = self._generation, self.path.text(), self.base_variant()
        relay = self._relay
        self.check_result.setText("Checking…")
        self.check_result.setStyleSheet("")

        def run() -> None:
            check = examine_folder(folder, base)
            with contextlib.suppress(RuntimeError):  # the dialog is gone: nobody to tell
                relay.done.emit(generation, check)

        QThreadPool.globalInstance().start(run)

    def _typed(self) -> None:
        """A change in the field: nothing is read from the disk until the user pauses."""
        self._generation += 1  # a check under way is for a text no longer shown
        self._ok().setEnabled(False)
        if not self.folder():
            self._pause.stop()
            self._show(FolderCheck(self.path.text(), "", (), False, None, "Choose a folder."))
            return
        # What is shown belongs to the text before this edit: cleared, not left to mislead.
        self.holds.setText("")
        self.base.clear()
        self.check_result.setText("Checked once you stop typing or press Enter.")
        self.check_result.setStyleSheet("")
        self._pause.start()

    def _browse(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Model folder", self.folder())
        if chosen:
            self.path.setText(chosen)
            self.check_now()

    def _ok(self) -> QPushButton:
        return self.buttons.button(QDialogButtonBox.StandardButton.Ok)

    def _show_check(self, generation: int, check: FolderCheck) -> None:
        if generation == self._generation:
            self._show(check)

    def _show(self, check: FolderCheck) -> None:
        self.shown_check = check
        self.holds.setText(check.holds)
        self.base.blockSignals(True)
        self.base.clear()
        for variant_id in check.bases:
            self.base.addItem(get_variant(variant_id).display_name, variant_id)
        if check.base is not None:
            self.base.setCurrentIndex(check.bases.index(check.base))
        self.base.setToolTip(
            "The variant these weights are a copy of (read from its files)"
            if check.detected
            else "Its files fit more than one variant: choose which one it is"
        )
        self.base.blockSignals(False)
        self.check_result.setText(check.message)
        failed = not check.ok and bool(check.folder.strip())
        self.check_result.setStyleSheet("color: #c62828;" if failed else "")
        self._ok().setEnabled(check.ok)
        self._fit_text()
        self.checked.emit(check)

    def _fit_text(self) -> None:
        """As tall as the wrapped messages need at the dialog's width: a longer message grows
        the dialog instead of being cut after a line and a half, and a shorter one gives the room
        back unless the user made the dialog taller."""
        layout = self._layout
        layout.activate()
        needed = max(layout.totalHeightForWidth(self.width()), layout.totalMinimumSize().height())
        self.setMinimumHeight(needed)
        if self.height() < needed or self.height() == self._fitted_height:
            self.resize(self.width(), needed)
        self._fitted_height = needed

    def done(self, r: int) -> None:  # closing: a check still running is dropped
        self._generation += 1
        self._pause.stop()
        super().done(r)


class ModelFolderActions(QObject):
    """The two File menu actions; ``changed`` rebuilds the picker and the banners."""

    def __init__(self, window: QWidget, folders: ModelFolders, changed: Callable[[], None]) -> None:
        super().__init__(window)
        self.window = window
        self.folders = folders
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
        self.remove_action.setEnabled(self.folders.form.variant.model_path is not None)

    def add(self) -> None:
        dialog = AddModelFolderDialog(self.window)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        added = self.add_folder(dialog.folder(), dialog.base_variant())
        if added is None:
            self.changed()  # the banner with the check's sentence

    def add_folder(self, folder: str, base_variant: str | None) -> str | None:
        """Remember the folder, list it in the picker, then select it."""
        variant_id = self.folders.add_model_folder(folder, base_variant)
        if variant_id is not None:
            self.changed()  # the picker lists it before the form selects it
            self.folders.select(variant_id)
        return variant_id

    def remove_current(self) -> None:
        if self.folders.remove_model_folder(self.folders.form.variant_id):
            self.changed()
