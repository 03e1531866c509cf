"""The gate picker (every registered kind: TeaCache, MagCache, the first-block probe) and its
plain-words hint; the hint text is Qt-free.

A variant without a gate's calibration (a MagCache table, TeaCache numbers) keeps that item
visible but disabled, with the reason as its tooltip (``Variant.gate_unavailable_reason``), so
the choice and how to unlock it are both in view. The first-block probe needs no calibration: it
is enabled on every variant.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QLabel, QVBoxLayout, QWidget

from app.gate.kinds import GATE_KINDS
from app.ui.plain_words import gate_unavailable
from app.ui.theme import mute, small_font
from app.variants import Variant


class GatePicker(QWidget):
    """A combo box of the gates and a muted line saying what the threshold means for the chosen
    one. ``gate_selected`` fires on a user's pick only."""

    gate_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        for gate, kind in GATE_KINDS.items():
            self.combo.addItem(kind.label, gate)
            self.combo.setItemData(
                self.combo.count() - 1, kind.threshold_meaning, Qt.ItemDataRole.ToolTipRole
            )
        self.meaning = QLabel()
        self.meaning.setWordWrap(True)
        self.meaning.setFont(small_font(self.meaning.font()))
        mute(self.meaning)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.combo)
        layout.addWidget(self.meaning)
        self.combo.activated.connect(self._emit_selected)
        self.set_gate(next(iter(GATE_KINDS)))

    def set_gate(self, gate: str) -> None:
        index = self.combo.findData(gate)
        if index >= 0 and index != self.combo.currentIndex():
            self.combo.setCurrentIndex(index)
        kind = GATE_KINDS.get(gate)
        self.meaning.setText(kind.threshold_meaning if kind is not None else "")

    def current_gate(self) -> str:
        return str(self.combo.currentData())

    def set_variant(self, variant: Variant) -> None:
        """Enable the gates the variant has calibrations for; the others say why not."""
        model = self.combo.model()
        assert isinstance(model, QStandardItemModel)
        for row, gate in enumerate(GATE_KINDS):
            item = model.item(row)
            reason = gate_unavailable(variant, gate)
            item.setEnabled(reason is None)
            item.setToolTip(GATE_KINDS[gate].threshold_meaning if reason is None else reason)

    def is_enabled(self, gate: str) -> bool:
        model = self.combo.model()
        assert isinstance(model, QStandardItemModel)
        return model.item(self.combo.findData(gate)).isEnabled()

    def _emit_selected(self, index: int) -> None:
        self.gate_selected.emit(str(self.combo.itemData(index)))
