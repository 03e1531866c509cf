"""The quantization picker: mflux's levels, each with its estimated peak memory at the chosen
size (an upper bound), the ones that may not fit or cannot load marked, and this machine's memory
beside them."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.hardware import os_name
from app.ui.form_model import FormModel
from app.ui.quantize_model import Fit, QuantizeChoice, memory_label, quantize_choices
from app.ui.theme import mute, small_font

FIT_COLOURS = {Fit.may_not_fit: QColor("#b26a00"), Fit.cannot_load: QColor("#c62828")}


class QuantizeControl(QWidget):
    picked = Signal(object)  # int | None (None: full precision)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        # Long items must not widen the sidebar: the combo elides, its popup shows them whole.
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(12)
        self.combo.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.combo.setToolTip(
            "Quantized weights need less memory and lose a little quality. Estimates of the peak "
            'memory at the chosen size, an upper bound measured with MLX on CUDA: "may not '
            f'fit" can still run ({os_name()} may swap); "cannot load": the weights alone are '
            "too big. mflux quantizes in groups of 64 weights."
        )
        self.machine = QLabel()
        self.machine.setFont(small_font(self.machine.font()))
        mute(self.machine)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.combo)
        layout.addWidget(self.machine)
        self.combo.currentIndexChanged.connect(self._emit)

    def set_choices(
        self, choices: Sequence[QuantizeChoice], current: int | None, machine: str, fixed: bool
    ) -> None:
        """``fixed``: a pre-quantized model folder, whose level cannot change."""
        self.combo.blockSignals(True)
        self.combo.clear()
        for choice in choices:
            self.combo.addItem(choice.label, choice.quantize)
            if choice.fit in FIT_COLOURS:
                index = self.combo.count() - 1
                colour = FIT_COLOURS[choice.fit]
                self.combo.setItemData(index, colour, Qt.ItemDataRole.ForegroundRole)
        index = next((i for i, c in enumerate(choices) if c.quantize == current), -1)
        self.combo.setCurrentIndex(index)
        self.combo.blockSignals(False)
        self.combo.setEnabled(bool(choices) and not fixed)
        self.machine.setText(machine + ("  · saved quantized" if fixed else ""))

    def current(self) -> int | None:
        data = self.combo.currentData()
        return data if isinstance(data, int) else None

    def _emit(self, index: int) -> None:
        if index >= 0:
            self.picked.emit(self.current())


def bind_quantize(control: QuantizeControl, label: QWidget, form: FormModel) -> None:
    """Keep the picker on the form's variant, size and quantization; a pick sets the form's.
    Hidden for the models mflux does not quantize (the demo's shipped weights)."""

    def refresh(*_: object) -> None:
        variant = form.variant
        width, height = form.size
        choices = quantize_choices(variant, (int(width), int(height)), form.memory_bytes)
        control.set_choices(
            choices,
            form.quantize,
            memory_label(form.memory_bytes),
            fixed=variant.stored_quantize is not None,
        )
        control.setVisible(bool(choices))
        label.setVisible(bool(choices))

    def picked(quantize: object) -> None:
        form.quantize = quantize if isinstance(quantize, int) else None

    for signal in (form.variant_loaded, form.size_changed, form.quantize_changed):
        signal.connect(refresh)
    control.picked.connect(picked)
    refresh()
