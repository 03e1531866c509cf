"""Number boxes that say their allowed range when a typed value falls outside it.

A ``QSpinBox`` refuses a keystroke that leaves its range (a seed of 99999999999999999999 stops
growing) and puts the previous value back when an unfinished one is left (guidance 0); both
silently. ``RangeSpinBox`` and ``RangeDoubleSpinBox`` behave the same and emit ``out_of_range``
with one short sentence on the allowed range; ``RangeNote`` is the inline label that shows it
until the value next changes.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox, QWidget

from app.ui.theme import small_font

Validated = tuple[QValidator.State, str, int]  # what QAbstractSpinBox.validate returns


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", "").replace("\u202f", "").replace(" ", ""))
    except ValueError:
        return None


def _figure(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


class _RangeWatch:
    """What both boxes share: a refused keystroke is said at once; an unfinished value outside
    the range (typed, so Qt will put the previous value back) is said when editing ends."""

    def __init__(self, box: RangeSpinBox | RangeDoubleSpinBox) -> None:
        self.box = box
        self.pending = ""
        box.lineEdit().textEdited.connect(self._edited)  # the user's typing, never a revert
        box.editingFinished.connect(self._finished)

    def sentence(self, typed: str) -> str:
        low, high = _figure(self.box.minimum()), _figure(self.box.maximum())
        return f"{self.box.name} must be between {low} and {high}; {typed.strip()} is outside it."

    def outside(self, text: str) -> bool:
        value = _number(text)
        return value is not None and not self.box.minimum() <= value <= self.box.maximum()

    def validated(self, text: str, result: Validated) -> Validated:
        if result[0] == QValidator.State.Invalid and self.outside(text):
            self.box.out_of_range.emit(self.sentence(text))  # the keystroke is refused
        return result

    def _edited(self, text: str) -> None:
        self.pending = self.sentence(text) if self.outside(text) else ""

    def _finished(self) -> None:
        if self.pending:
            self.box.out_of_range.emit(self.pending)
            self.pending = ""


class RangeSpinBox(QSpinBox):
    out_of_range = Signal(str)  # one sentence on the allowed range

    def __init__(self, name: str, low: int, high: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self._watch = _RangeWatch(self)
        self.setRange(low, high)

    def validate(self, text: str, pos: int) -> Validated:
        return self._watch.validated(text, super().validate(text, pos))


class RangeDoubleSpinBox(QDoubleSpinBox):
    out_of_range = Signal(str)  # one sentence on the allowed range

    def __init__(self, name: str, low: float, high: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self._watch = _RangeWatch(self)
        self.setRange(low, high)

    def validate(self, text: str, pos: int) -> Validated:
        return self._watch.validated(text, super().validate(text, pos))


class RangeNote(QLabel):
    """The inline note under the boxes: the last refusal, until one of them changes value."""

    def __init__(self, *boxes: RangeSpinBox | RangeDoubleSpinBox) -> None:
        super().__init__()
        self.setObjectName("InputProblem")
        self.setWordWrap(True)
        self.setFont(small_font(self.font()))
        self.setStyleSheet("color: #b26a00;")
        self.hide()
        for box in boxes:
            box.out_of_range.connect(self.say)
            box.valueChanged.connect(lambda *_: self.say(""))

    def say(self, text: str) -> None:
        self.setText(text)
        self.setVisible(bool(text))
