"""Number boxes that say their allowed range when a typed value falls outside it.

Qt's number boxes refuse a keystroke that leaves their range (5 typed as the threshold) and put the
previous value back when an unfinished one is left (guidance 0); both silently.
``RangeDoubleSpinBox`` behaves the same and emits ``out_of_range`` with one short sentence on the
allowed range; ``RangeNote`` is the inline label that shows it until the value next changes.
``RangeWholeNumberBox`` (the seed) holds whole numbers past QSpinBox's 32 bits and refuses an
out-of-range value whole instead of keeping the digits that fit.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QDoubleSpinBox, QLabel, QWidget

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

    def __init__(self, box: RangeDoubleSpinBox) -> None:
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


class RangeDoubleSpinBox(QDoubleSpinBox):
    out_of_range = Signal(str)  # one sentence on the allowed range

    def __init__(self, name: str, low: float, high: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self._watch = _RangeWatch(self)
        self.setRange(low, high)

    def validate(self, text: str, pos: int) -> Validated:
        return self._watch.validated(text, super().validate(text, pos))


class RangeWholeNumberBox(RangeDoubleSpinBox):
    """A whole number past QSpinBox's 32-bit signed range (a QDoubleSpinBox without decimals:
    exact up to 2**53), committed on Enter or focus-out. A typed value outside the range stays on
    screen and is said at once; when editing ends Qt puts back the value the box held before the
    edit (nothing was committed while typing), so a refused value is never cut to the digits that
    fit (3000000000 in a 0–2147483647 box used to become 300000000). ``valueChanged`` carries a
    float; ``int()`` it."""

    def __init__(self, name: str, low: int, high: int, parent: QWidget | None = None) -> None:
        if high > 2**53:
            raise ValueError(f"{high} is past what a double holds exactly")
        super().__init__(name, low, high, parent)
        self.setDecimals(0)
        self.setRange(low, high)
        self.setKeyboardTracking(False)

    def validate(self, text: str, pos: int) -> Validated:
        state, text, pos = super().validate(text, pos)
        if state == QValidator.State.Invalid and self._watch.outside(text):
            return QValidator.State.Intermediate, text, pos  # shown, said, refused at the end
        return state, text, pos


class RangeNote(QLabel):
    """The inline note under the boxes: the last refusal, until one of them changes value."""

    def __init__(self, *boxes: RangeDoubleSpinBox) -> None:
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
