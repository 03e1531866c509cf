"""The live per-step timeline: one cell per step, coloured by the gate's decision.

It renders rows of ``StepEvent | None`` and owns no logic. The gated pass is the tall row; the
vanilla pass (every step computes, the gate only measures) is the thin row under it. A run from a
picture starts at a later step: the steps strength leaves out come first, hatched grey and
marked "not run (strength)" in both rows (``left_out``); the events' indices count the steps that
run, so step ``index`` sits in cell ``left_out + index``. Hovering a
cell shows rel-L1, predicted and accumulated change and the step time, above the step's preview
image where the run made previews (framed in the decision's colour: a skip shows what it did).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontMetrics,
    QHelpEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QToolTip, QWidget

from app.engine.events import Pass
from app.gate import Decision, StepEvent
from app.gate.fill import REACH
from app.gate.kinds import DEFAULT_GATE, GATE_KINDS, gate_kind
from app.ui.plain_words import fill_step_lines
from app.ui.step_previews import StepThumbnailPopup
from app.ui.theme import (
    DECISION_COLOURS,
    DECISION_HELP,
    DECISION_LABELS,
    NOT_RUN_HELP,
    NOT_RUN_LABEL,
    muted,
    small_font,
)

MIN_GUTTER = 78  # the labels' column at least; wider where a label needs it (``gutter``)
LABEL_GAP = 10  # between a row's label and its first cell
GATED_H = 26
VANILLA_H = 8
ROW_GAP = 7
TICKS_H = 16
TOP = 8
MAX_CELL = 44.0  # short schedules stay compact instead of stretching


def paint_cell(
    painter: QPainter,
    rect: QRectF,
    decision: Decision | None,
    *,
    pending_pen: QColor,
    alpha: int = 255,
    radius: float = 3.0,
) -> None:
    """Draw one step cell: fill by decision plus a shape cue (hatching, cross)."""
    if decision is None:
        painter.setPen(QPen(pending_pen, 1.0, Qt.PenStyle.SolidLine))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), radius, radius)
        return
    colour = QColor(DECISION_COLOURS[decision])
    colour.setAlpha(alpha)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    painter.drawRoundedRect(rect, radius, radius)
    if decision is Decision.forced:
        hatch = QBrush(QColor(255, 255, 255, min(alpha, 150)), Qt.BrushStyle.BDiagPattern)
        painter.setBrush(hatch)
        painter.drawRoundedRect(rect, radius, radius)
    elif decision is Decision.numerical_miss and rect.width() >= 5:
        painter.setPen(QPen(QColor(255, 255, 255, alpha), 1.5))
        inset = rect.adjusted(
            rect.width() * 0.25, rect.height() * 0.25, -rect.width() * 0.25, -rect.height() * 0.25
        )
        painter.drawLine(inset.topLeft(), inset.bottomRight())
        painter.drawLine(inset.topRight(), inset.bottomLeft())


def forecast_mark(step: StepEvent | None) -> bool:
    """Whether a gated cell carries the forecast's mark: a skipped step whose change was
    forecast (not the last computed one reused)."""
    return step is not None and step.fill.get(REACH, 0.0) > 0


def paint_forecast_mark(painter: QPainter, rect: QRectF, alpha: int = 230) -> None:
    """A small white dot in the cell's top right corner."""
    radius = max(1.5, min(rect.width(), rect.height()) * 0.13)
    centre = rect.topRight() + QPointF(-radius * 1.8, radius * 1.8)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(255, 255, 255, alpha))
    painter.drawEllipse(centre, radius, radius)


def paint_not_run(painter: QPainter, rect: QRectF, pen: QColor, *, radius: float = 3.0) -> None:
    """A step strength left out: a dashed outline, lightly hatched (no decision was made)."""
    painter.setPen(QPen(pen, 1.0, Qt.PenStyle.DashLine))
    hatch = QColor(pen)
    hatch.setAlpha(90)
    painter.setBrush(QBrush(hatch, Qt.BrushStyle.FDiagPattern))
    painter.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), radius, radius)


def describe_step(step: StepEvent, which: Pass, left_out: int = 0) -> str:
    """The step's tooltip, in the figures of the gate that decided it (``GateKind.step_lines``);
    a vanilla step in each kind's figures it recorded. Numbered in the whole schedule
    (``left_out`` steps before the first that ran)."""
    gated = which is Pass.gated
    number, total = left_out + step.index + 1, left_out + step.num_steps
    if gated:
        kind = gate_kind(step.gate)
        lines = [f"<b>Step {number} of {total}</b> · {kind.pass_name}"]
        lines.append(f"{DECISION_LABELS[step.decision]}: {DECISION_HELP[step.decision]}")
        lines += kind.step_lines(step, gated)
        lines += fill_step_lines(step)
    else:
        lines = [f"<b>Step {number} of {total}</b> · Vanilla pass"]
        for name, kind in GATE_KINDS.items():
            if name in step.signals:
                lines += kind.step_lines(step, gated)
    lines.append(f"step time: {step.seconds * 1000:.1f} ms")
    return "<br>".join(lines)


class StepTimeline(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._gated: tuple[StepEvent | None, ...] = ()
        self._vanilla: tuple[StepEvent | None, ...] = ()
        self._resumed_from: int | None = None
        self._vanilla_cached = False
        self._left_out = 0  # the first steps a run from a picture never runs
        self._strength: float | None = None
        self.gate_name = gate_kind(
            DEFAULT_GATE
        ).label  # the gated row's label: the gate that ran it
        self._active: Pass | None = None
        self._previews: dict[Pass, tuple[np.ndarray | None, ...]] = {}
        self.thumbnail_popup = StepThumbnailPopup(self)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(self.sizeHint().height())
        self.setAccessibleName("Step timeline")

    # -- data
    def set_rows(
        self,
        gated: Sequence[StepEvent | None],
        vanilla: Sequence[StepEvent | None],
        *,
        resumed_from: int | None = None,
        vanilla_cached: bool = False,
        active: Pass | None = None,
        left_out: int = 0,
        strength: float | None = None,
    ) -> None:
        self._gated = tuple(gated)
        self._vanilla = tuple(vanilla)
        self._resumed_from = resumed_from
        self._vanilla_cached = vanilla_cached
        self._active = active
        self._left_out = max(0, left_out)
        self._strength = strength
        self.setAccessibleDescription(self.pattern())
        self.update()

    def set_previews(
        self, gated: Sequence[np.ndarray | None], vanilla: Sequence[np.ndarray | None]
    ) -> None:
        """Each step's preview image (None where none arrived), shown on hover."""
        self._previews = {Pass.gated: tuple(gated), Pass.vanilla: tuple(vanilla)}
        if not any(a is not None for row in self._previews.values() for a in row):
            self.thumbnail_popup.hide()

    def preview_at(self, pos: QPoint) -> np.ndarray | None:
        found = self.hit(pos)
        if found is None:
            return None
        which, cell = found
        index = cell - self._left_out
        row = self._previews.get(which, ())
        return row[index] if 0 <= index < len(row) else None

    @property
    def left_out(self) -> int:
        return self._left_out

    @property
    def gated(self) -> tuple[StepEvent | None, ...]:
        return self._gated

    @property
    def vanilla(self) -> tuple[StepEvent | None, ...]:
        return self._vanilla

    def pattern(self) -> str:
        """The gated row as letters (C/F/S/N, '·' for a step not done yet)."""
        return "".join("·" if s is None else s.decision.letter for s in self._gated)

    def filled(self) -> int:
        return sum(s is not None for s in self._gated)

    # -- geometry
    def sizeHint(self) -> QSize:
        return QSize(600, TOP + GATED_H + ROW_GAP + VANILLA_H + 4 + TICKS_H + 2)

    def minimumSizeHint(self) -> QSize:
        return QSize(240, self.sizeHint().height())

    def _count(self) -> int:
        """Cells: the steps strength left out, then the steps that ran (or will)."""
        ran = max(len(self._gated), len(self._vanilla))
        return self._left_out + ran if ran else 0

    def row_labels(self) -> tuple[str, ...]:
        """Every label the rows can carry: each gate kind's (the gated row's), vanilla's."""
        return (*(kind.label for kind in GATE_KINDS.values()), self.gate_name, "Vanilla ↺")

    def gutter(self) -> int:
        """The labels' column: the widest row label in the timeline's font and the gap, so each
        shows whole ("First-block probe" lost "First" in a fixed 78 px) and the cells do not move
        when the gate changes."""
        metrics = QFontMetrics(small_font(self.font()))
        widest = max(metrics.horizontalAdvance(label) for label in self.row_labels())
        return max(MIN_GUTTER, widest + LABEL_GAP + 2)

    def label_rect(self, which: Pass) -> QRectF:
        """Where a row's label is drawn, right-aligned against its first cell."""
        width = self.gutter() - LABEL_GAP
        if which is Pass.gated:
            return QRectF(0, TOP, width, GATED_H)
        return QRectF(0, TOP + GATED_H + ROW_GAP - 4, width, VANILLA_H + 8)

    def _cell_width(self) -> float:
        n = self._count()
        return min(MAX_CELL, (self.width() - self.gutter() - 6) / n) if n else 0.0

    def cell_rect(self, which: Pass, index: int) -> QRectF:
        w = self._cell_width()
        gap = 2.0 if w >= 7 else (1.0 if w >= 3 else 0.0)
        x = self.gutter() + index * w
        if which is Pass.gated:
            return QRectF(x, TOP, max(1.0, w - gap), GATED_H)
        return QRectF(x, TOP + GATED_H + ROW_GAP, max(1.0, w - gap), VANILLA_H)

    def hit(self, pos: QPoint) -> tuple[Pass, int] | None:
        n = self._count()
        w = self._cell_width()
        gutter = self.gutter()
        if not n or w <= 0 or pos.x() < gutter:
            return None
        index = int((pos.x() - gutter) // w)
        if not 0 <= index < n:
            return None
        y = pos.y()
        if TOP - 2 <= y <= TOP + GATED_H + ROW_GAP // 2:
            return Pass.gated, index
        if TOP + GATED_H + ROW_GAP // 2 < y <= TOP + GATED_H + ROW_GAP + VANILLA_H + 4:
            return Pass.vanilla, index
        return None

    # -- painting
    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        secondary = muted(self)
        pending = palette.color(QPalette.ColorRole.Mid)
        font = small_font(self.font())
        painter.setFont(font)

        painter.setPen(palette.color(QPalette.ColorRole.WindowText))
        painter.drawText(
            self.label_rect(Pass.gated),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            self.gate_name,
        )
        painter.setPen(secondary)
        vanilla_label = "Vanilla ↺" if self._vanilla_cached else "Vanilla"
        painter.drawText(
            self.label_rect(Pass.vanilla),
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
            vanilla_label,
        )

        n = self._count()
        if not n:
            gutter = self.gutter()
            painter.drawText(
                QRectF(gutter, TOP, self.width() - gutter, GATED_H),
                Qt.AlignmentFlag.AlignVCenter,
                "Press Generate to watch each step.",
            )
            return
        cell_w = self._cell_width()
        radius = 3.0 if cell_w >= 8 else 1.0
        next_gated = self._next_index(self._gated) if self._active is Pass.gated else None
        next_vanilla = self._next_index(self._vanilla) if self._active is Pass.vanilla else None
        letter_font = small_font(self.font())
        letter_font.setPointSizeF(max(7.0, min(letter_font.pointSizeF(), cell_w * 0.55)))
        first = self._left_out
        for i in range(first):
            paint_not_run(painter, self.cell_rect(Pass.gated, i), pending, radius=radius)
            if self._vanilla:
                paint_not_run(
                    painter, self.cell_rect(Pass.vanilla, i), pending, radius=min(radius, 2.0)
                )
        for i, step in enumerate(self._gated):
            rect = self.cell_rect(Pass.gated, first + i)
            paint_cell(
                painter, rect, step.decision if step else None, pending_pen=pending, radius=radius
            )
            if forecast_mark(step) and cell_w >= 6:
                paint_forecast_mark(painter, rect)
            if step is not None and cell_w >= 16:
                painter.setFont(letter_font)
                painter.setPen(QColor(255, 255, 255, 230))
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, step.decision.letter)
            if i == next_gated:
                self._paint_cursor(painter, rect, palette)
        alpha = 120 if self._vanilla_cached else 255
        for i, step in enumerate(self._vanilla):
            rect = self.cell_rect(Pass.vanilla, first + i)
            paint_cell(
                painter,
                rect,
                step.decision if step else None,
                pending_pen=pending,
                alpha=alpha,
                radius=min(radius, 2.0),
            )
            if i == next_vanilla:
                self._paint_cursor(painter, rect, palette)
        if self._resumed_from:
            end = min(self._resumed_from, len(self._gated)) - 1  # steps replayed from vanilla
            if end >= 0:
                left = self.cell_rect(Pass.gated, first).left()
                right = self.cell_rect(Pass.gated, first + end).right()
                painter.setPen(QPen(secondary, 2.0))
                painter.drawLine(int(left), TOP - 4, int(right), TOP - 4)

        painter.setFont(font)
        painter.setPen(secondary)
        ticks_y = TOP + GATED_H + ROW_GAP + VANILLA_H + 4
        for i in self._tick_indices(n, cell_w):
            rect = self.cell_rect(Pass.gated, i)
            painter.drawText(
                QRectF(rect.center().x() - 20, ticks_y, 40, TICKS_H),
                Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                str(i + 1),
            )

    def _paint_cursor(self, painter: QPainter, rect: QRectF, palette: QPalette) -> None:
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), 2.0))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 2.0, 2.0)

    @staticmethod
    def _next_index(row: tuple[StepEvent | None, ...]) -> int | None:
        return next((i for i, s in enumerate(row) if s is None), None)

    @staticmethod
    def _tick_indices(n: int, cell_w: float) -> list[int]:
        stride = 1
        for candidate in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500):
            stride = candidate
            if candidate * cell_w >= 28:
                break
        ticks = [0] + [i - 1 for i in range(stride, n + 1, stride)]
        if n - 1 not in ticks and (n - 1 - ticks[-1]) * cell_w >= 24:
            ticks.append(n - 1)
        return sorted(set(ticks))

    # -- tooltips
    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Leave:
            self.thumbnail_popup.hide()
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            text = self.tooltip_at(event.pos())
            image = self.preview_at(event.pos())
            if text and image is not None:
                QToolTip.hideText()
                self.thumbnail_popup.show_step(
                    image, text, self._decision_at(event.pos()), event.globalPos()
                )
                return True
            self.thumbnail_popup.hide()
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().event(event)

    def _decision_at(self, pos: QPoint) -> Decision | None:
        found = self.hit(pos)
        if found is None:
            return None
        which, cell = found
        index = cell - self._left_out
        row = self._gated if which is Pass.gated else self._vanilla
        step = row[index] if 0 <= index < len(row) else None
        return None if step is None else step.decision

    def tooltip_at(self, pos: QPoint) -> str | None:
        found = self.hit(pos)
        if found is None:
            return None
        which, cell = found
        if cell < self._left_out:
            strength = "" if self._strength is None else f" {self._strength:g}"
            return (
                f"<b>Step {cell + 1}</b>: {NOT_RUN_LABEL.lower()}<br>Strength{strength} starts "
                f"from the picture at step {self._left_out + 1}: the first {self._left_out} "
                "steps run in neither pass."
            )
        index = cell - self._left_out
        row = self._gated if which is Pass.gated else self._vanilla
        step = row[index] if index < len(row) else None
        if step is None:
            name = self.gate_name if which is Pass.gated else "Vanilla"
            return f"Step {cell + 1}: not run yet ({name} pass)"
        text = describe_step(step, which, self._left_out)
        if which is Pass.gated and self._resumed_from and index < self._resumed_from:
            text += "<br><i>replayed from the cached vanilla trajectory</i>"
        if which is Pass.vanilla and self._vanilla_cached:
            text += "<br><i>vanilla reused from the cache</i>"
        return text


class _Swatch(QWidget):
    def __init__(
        self,
        decision: Decision | None,
        parent: QWidget | None = None,
        *,
        forecast: bool = False,
        not_run: bool = False,
    ) -> None:
        super().__init__(parent)
        self._decision = decision
        self._forecast = forecast
        self._not_run = not_run
        self.setFixedSize(14, 14)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pen = self.palette().color(QPalette.ColorRole.Mid)
        rect = QRectF(1, 1, 12, 12)
        if self._not_run:
            paint_not_run(painter, rect, pen)
            return
        paint_cell(painter, rect, self._decision, pending_pen=pen)
        if self._forecast:
            paint_forecast_mark(painter, rect)


class TimelineLegend(QWidget):
    """The timeline's key: every decision with its colour and shape cue."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.labels: dict[Decision | None, QLabel] = {}
        entries: list[tuple[Decision | None, str]] = [
            (d, DECISION_LABELS[d])
            for d in (Decision.computed, Decision.forced, Decision.skipped, Decision.numerical_miss)
        ]
        entries.append((None, "Pending"))
        for decision, text in entries:
            swatch = _Swatch(decision, self)
            label = QLabel(text, self)
            label.setFont(small_font(label.font()))
            label.setToolTip(DECISION_HELP[decision] if decision else "this step has not run yet")
            layout.addWidget(swatch)
            layout.addWidget(label)
            layout.addSpacing(8)
            self.labels[decision] = label
        # The forecast's mark on a skipped step (``app.gate.fill``): shown in the key only once
        # a run shows one (``show_forecast``), so a reusing run's key stays as it was.
        self.forecast_swatch = _Swatch(Decision.skipped, self, forecast=True)
        self.forecast_label = QLabel("Forecast", self)
        self.forecast_label.setFont(small_font(self.forecast_label.font()))
        self.forecast_label.setToolTip(
            "a skipped step that added a forecast of the change, not the last computed one"
        )
        layout.addWidget(self.forecast_swatch)
        layout.addWidget(self.forecast_label)
        self.show_forecast(False)
        # Shown only for a run from a picture (``show_not_run``).
        self.not_run_swatch = _Swatch(None, self, not_run=True)
        self.not_run_label = QLabel(NOT_RUN_LABEL, self)
        self.not_run_label.setFont(small_font(self.not_run_label.font()))
        self.not_run_label.setToolTip(NOT_RUN_HELP)
        layout.addWidget(self.not_run_swatch)
        layout.addWidget(self.not_run_label)
        self.show_not_run(False)
        layout.addStretch(1)

    def show_forecast(self, shown: bool) -> None:
        self.forecast_swatch.setVisible(shown)
        self.forecast_label.setVisible(shown)

    def show_not_run(self, shown: bool) -> None:
        self.not_run_swatch.setVisible(shown)
        self.not_run_label.setVisible(shown)
