"""Browse saved runs: reopen one into the window, export a side-by-side PNG, reveal, delete."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.report import label_head
from app.gate.fill import get_fill
from app.gate.kinds import gate_kind
from app.storage.export import export_entry, export_name, lora_captions
from app.storage.history import HistoryEntry, HistoryStore, friendly_time
from app.ui.plain_words import similarity_words
from app.ui.theme import mute, small_font

log = logging.getLogger(__name__)
THUMB = 72


def to_qimage(array: np.ndarray) -> QImage:
    """A QImage that owns its pixels (copied), from uint8 RGB."""
    rgb = np.ascontiguousarray(array[..., :3], dtype=np.uint8)
    h, w = rgb.shape[:2]
    return QImage(rgb.data, w, h, rgb.strides[0], QImage.Format.Format_RGB888).copy()


def entry_summary(entry: HistoryEntry) -> str:
    request = entry.request
    parts = [request.variant_id, f"seed {request.seed}", f"{request.steps} steps"]
    parts += lora_captions(request.loras)
    if request.images and request.strength is not None:
        parts.append(f"from {request.images[0].name} at strength {request.strength:g}")
    if entry.comparison is not None:  # a threshold comparison (``is_comparison``)
        rows = entry.comparison.get("entries", [])
        count = len(rows) if isinstance(rows, list) else 0
        parts.insert(0, f"Comparison of {count} thresholds")
        return " · ".join(parts)
    # the gate that ran: two gates' rows tell apart
    parts.append(f"{gate_kind(request.gate).label} t={request.threshold:.4g}")
    try:
        report = entry.report
    except (OSError, ValueError) as exc:
        log.warning("history entry %s: %s", entry.id, exc)
        return " · ".join([*parts, "its figures cannot be read"])
    parts.append(
        f"{report.gated.skipped} of {request.active_steps} skipped, "
        f"{get_fill(request.fill).caption}"
    )
    if report.ssim is not None:  # the Similarity card's words, the figures beside them
        words = similarity_words(report.ssim, report.local_diff_value)
        figures = f"SSIM {report.ssim:.3f}"
        if report.ssimulacra2 is not None:
            figures += f", SSIMULACRA2 {report.ssimulacra2:.0f}"
        if report.local_diff_value is not None:
            figures += f", local difference {report.local_diff_value:.3f}"
        parts.append(f"{words} ({figures})")
    if entry.speedup is not None:  # the label's first clause; the row's tooltip has all of it
        head = label_head(entry.speedup_label)
        parts.append(f"{entry.speedup:.2f}× {head}" if head else f"{entry.speedup:.2f}×")
    return " · ".join(parts)


def entry_export_name(entry: HistoryEntry) -> str:
    """The export's default file name: the window's scheme (``<gate>-<variant>-s<seed>.png``),
    not the entry's internal id."""
    request = entry.request
    return export_name(request.gate, request.variant_id, request.seed)


class HistoryDialog(QDialog):
    open_requested = Signal(object)  # HistoryEntry

    def __init__(self, store: HistoryStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("History")
        self.setModal(False)
        self.resize(720, 520)
        self.store = store
        self.list = QListWidget()
        self.list.setIconSize(QSize(THUMB, THUMB))
        self.list.setSpacing(2)
        # A row wraps to the dialog's width (its date and speedup hid behind a scroll bar).
        self.list.setWordWrap(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.list.setAlternatingRowColors(True)
        self.list.itemDoubleClicked.connect(lambda _item: self.open_selected())
        self.list.currentRowChanged.connect(lambda _row: self._update_buttons())
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setFont(small_font(self.warning.font()))
        mute(self.warning)
        self.export_status = QLabel()  # an export's or Show Folder's outcome
        self.export_status.setWordWrap(True)
        self.export_status.setFont(small_font(self.export_status.font()))
        self.export_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.export_status.hide()
        self.location = QLabel(f"Saved in {store.root}")
        self.location.setFont(small_font(self.location.font()))
        mute(self.location)
        self.location.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.open_button = QPushButton("Open in Window")
        self.open_button.setDefault(True)
        self.export_button = QPushButton("Export Side-by-Side…")
        self.reveal_button = QPushButton("Show Folder")
        self.delete_button = QPushButton("Delete")
        self.refresh_button = QPushButton("Refresh")
        self.open_button.clicked.connect(self.open_selected)
        self.export_button.clicked.connect(lambda: self.export_selected())
        self.reveal_button.clicked.connect(self.reveal_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        self.refresh_button.clicked.connect(self.refresh)

        buttons = QHBoxLayout()
        for button in (self.refresh_button, self.delete_button, self.reveal_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.export_button)
        buttons.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 14, 14, 14)
        layout.setSpacing(8)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.warning)
        layout.addWidget(self.export_status)
        layout.addWidget(self.location)
        layout.addLayout(buttons)
        self.entries: list[HistoryEntry] = []
        self.refresh()

    def refresh(self) -> None:
        self.entries = self.store.entries()
        self.list.clear()
        for entry in self.entries:
            item = QListWidgetItem(
                f"{entry.request.prompt}\n{entry_summary(entry)} · {friendly_time(entry.created)}"
            )
            item.setData(Qt.ItemDataRole.UserRole, entry.id)
            label = entry.speedup_label if entry.speedup is not None else ""
            item.setToolTip(f"{entry.folder}\nSpeedup: {label}" if label else str(entry.folder))
            try:
                gated, _ = entry.load_images()
                pixmap = QPixmap.fromImage(to_qimage(gated)).scaled(
                    THUMB,
                    THUMB,
                    Qt.AspectRatioMode.KeepAspectRatio,
                    Qt.TransformationMode.SmoothTransformation,
                )
                item.setIcon(QIcon(pixmap))
            except (OSError, ValueError) as exc:
                log.warning("history thumbnail for %s failed: %s", entry.id, exc)
            self.list.addItem(item)
        if self.entries:
            self.list.setCurrentRow(0)
        skipped = len(self.store.warnings)
        self.warning.setText(
            f"{skipped} damaged entr{'y was' if skipped == 1 else 'ies were'} skipped: "
            + "; ".join(self.store.warnings[:3])
            if skipped
            else ""
        )
        self.warning.setVisible(bool(skipped))
        if not self.entries:
            self.list.addItem(QListWidgetItem("No saved runs yet: every finished run lands here."))
            self.list.item(0).setFlags(Qt.ItemFlag.NoItemFlags)
        self._update_buttons()

    def selected(self) -> HistoryEntry | None:
        row = self.list.currentRow()
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def open_selected(self) -> None:
        entry = self.selected()
        if entry is not None:
            self.open_requested.emit(entry)

    def export_selected(self, path: Path | None = None) -> Path | None:
        entry = self.selected()
        if entry is None:
            return None
        if path is None:
            suggested = Path.home() / entry_export_name(entry)
            name, _ = QFileDialog.getSaveFileName(
                self, "Export Side-by-Side", str(suggested), "PNG (*.png)"
            )
            if not name:
                return None
            path = Path(name)
        try:
            written = export_entry(entry, path)
        except OSError as exc:
            self.export_status.setText(f"Could not export to {path}: {exc.strerror or exc}")
            self.export_status.show()
            return None
        self.export_status.setText(f"Exported {written}")
        self.export_status.show()
        return written

    def reveal_selected(self) -> None:
        """Open the run's folder in the file manager; where none answers, say so with the path
        (selectable, to copy)."""
        entry = self.selected()
        if entry is not None and not QDesktopServices.openUrl(
            QUrl.fromLocalFile(str(entry.folder))
        ):
            self.export_status.setText(
                f"Could not open a file manager here; the run is saved in {entry.folder}"
            )
            self.export_status.show()

    def delete_selected(self) -> None:
        entry = self.selected()
        if entry is None:
            return
        answer = QMessageBox.question(
            self, "Delete run", f"Delete this run from the history?\n\n{entry.request.prompt}"
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.store.delete(entry)
            self.refresh()

    def _update_buttons(self) -> None:
        has = self.selected() is not None
        for button in (
            self.open_button,
            self.export_button,
            self.reveal_button,
            self.delete_button,
        ):
            button.setEnabled(has)
