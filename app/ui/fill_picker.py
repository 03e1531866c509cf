"""The fill picker: what a skipped step adds, whichever gate skips it (``app.gate.fill``), as
"On a skipped step: reuse the last change / forecast it" beside the gate."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.gate.fill import DEFAULT_FILL, FILLS

FILL_PROMPT = "On a skipped step:"


def fill_tooltip(name: str) -> str:
    """What the fill adds, as one sentence."""
    fill = FILLS[name]
    text = fill.describe()
    return f"{text[:1].upper()}{text[1:]}."


class FillPicker(QWidget):
    """A label and a combo box of the fills; ``fill_selected`` fires on a user's pick only."""

    fill_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(FILL_PROMPT)
        self.combo = QComboBox()
        for name, fill in FILLS.items():
            self.combo.addItem(fill.choice, name)
            self.combo.setItemData(
                self.combo.count() - 1, fill_tooltip(name), Qt.ItemDataRole.ToolTipRole
            )
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.label)
        layout.addWidget(self.combo, 1)
        self.combo.activated.connect(self._emit_selected)
        self.set_fill(DEFAULT_FILL)

    def set_fill(self, name: str) -> None:
        index = self.combo.findData(name)
        if index >= 0 and index != self.combo.currentIndex():
            self.combo.setCurrentIndex(index)
        self.combo.setToolTip(fill_tooltip(name) if name in FILLS else "")

    def current_fill(self) -> str:
        return str(self.combo.currentData())

    def _emit_selected(self, index: int) -> None:
        self.fill_selected.emit(str(self.combo.itemData(index)))
