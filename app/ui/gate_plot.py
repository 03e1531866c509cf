"""The gate plot: what the gate compared with the threshold, step by step.

Left: the accumulated predicted change of the TeaCache pass per step (dots coloured by decision)
and the vanilla pass's predicted change per step, against the threshold line, with the band of
thresholds where skipping begins (from ``engagement``/``skip_curve`` on the vanilla trace). On a
distilled schedule the band sits far above any sensible threshold, which is the whole explanation.
Right: simulated skips against the threshold on the same trace. A run from a picture starts at a
later step: the steps strength leaves out are a grey band at the left, "not run (strength)", and
the run's steps are drawn at their place in the whole schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from numbers import Real

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.gate import Decision, StepEvent
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.ui.analysis import EngagementBand
from app.ui.theme import (
    BAND_COLOUR,
    DECISION_COLOURS,
    NOT_RUN_LABEL,
    THRESHOLD_COLOUR,
    muted,
    small_font,
)

pg.setConfigOptions(antialias=True, imageAxisOrder="row-major")


def _colour(hex_code: str, alpha: int = 255) -> QColor:
    colour = QColor(hex_code)
    colour.setAlpha(alpha)
    return colour


PLOT_MIN_HEIGHT = 160
# The data area of each plot (inside its axes) at its smallest, 1024×700 with the longest banner:
# the walk found about 100 px (the skip curve 81 px, under its title) too small to read.
PLOT_MIN_VIEW_HEIGHT = 120
# Where a line's label may sit along it (the fraction of the view's width), the first preferred.
LABEL_POSITIONS = (0.98, 0.02, *(i / 20 for i in range(19, 0, -1)))
# How far a label may stand off its line, in label heights, the nearest first: only where no
# spot touching the line is free of data (the turn-5 walk: every spot along 0.1433 had a dot or
# a line in it, and "t = 0.1433" sat on the least covered one, a line through its text).
LABEL_GAPS = (0.0, 0.5, 1.0, 1.5)
# Pixels of clear space a free spot keeps around its label: the label as drawn can differ from
# the placed rectangle by a fraction of a pixel, and a line grazing a corner still reads as
# touching the text (t = 0.15 at 1280×820 after the walk's runs: 0.02 px into the corner).
LABEL_CLEARANCE = 2.0
_Segment = tuple[float, float, float, float]  # a line between two dots: x0, y0, x1, y1 (pixels)


class GatePlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget(axisItems={"left": NonNegativeAxis("left")})
        self.curve_plot = pg.PlotWidget()
        for widget in (self.plot, self.curve_plot):
            widget.setMenuEnabled(False)
            widget.hideButtons()
            widget.setMouseEnabled(x=False, y=False)
            # Tall enough for the rotated axis title "predicted change" and two tick labels.
            widget.setMinimumHeight(PLOT_MIN_HEIGHT)
        item = _plot_item(self.plot)
        item.setLabel("bottom", "step")
        item.setLabel("left", gate_kind(DEFAULT_GATE).plot.axis_label)
        item.showGrid(x=False, y=True, alpha=0.15)
        curve_item = _plot_item(self.curve_plot)
        curve_item.setLabel("bottom", "threshold")
        # The axis says what the plot is (a title row would take 30 px of a short plot).
        curve_item.setLabel("left", "skips (simulated)")
        curve_item.showGrid(x=False, y=True, alpha=0.15)
        for widget in (self.plot, self.curve_plot):
            # The small font on the axes: their height goes to the data area (1024×700).
            for side in ("left", "bottom"):
                axis = _plot_item(widget).getAxis(side)
                axis.setStyle(tickFont=small_font())
                axis.label.setFont(small_font())

        self.band = pg.LinearRegionItem(
            values=(0.0, 0.0),
            orientation="horizontal",
            movable=False,
            brush=_colour(BAND_COLOUR, 38),
            pen=pg.mkPen(None),
        )
        self.band.setZValue(-20)
        # The steps a run from a picture never runs (``set_data``'s ``left_out``).
        self.not_run = pg.LinearRegionItem(
            values=(0.0, 0.0),
            orientation="vertical",
            movable=False,
            brush=_colour("#9E9E9E", 40),
            pen=pg.mkPen(None),
        )
        self.not_run.setZValue(-30)
        self.not_run_label = pg.TextItem(NOT_RUN_LABEL.lower(), anchor=(0, 0))
        self.not_run_label.setFont(small_font())
        self.onset_line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(_colour(BAND_COLOUR), width=1.2, style=Qt.PenStyle.DashLine),
            label="",  # the kind's words (``GateKind.onset_words``), set with the data
            labelOpts={
                "position": 0.02,
                "color": _colour(BAND_COLOUR),
                "anchors": [(0, 0), (0, 0)],
            },
        )
        self.threshold_line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(_colour(THRESHOLD_COLOUR), width=2),
            label="t = {value:.4g}",  # short: it must find room between the dots
            labelOpts={
                "position": 0.98,
                "color": _colour(THRESHOLD_COLOUR),
                "anchors": [(1, 1), (1, 1)],
            },
        )
        self.preview_line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(_colour(THRESHOLD_COLOUR, 170), width=1.2, style=Qt.PenStyle.DotLine),
            label="new t = {value:.4g}",
            labelOpts={
                "position": 0.6,
                "color": _colour(THRESHOLD_COLOUR),
                "anchors": [(0.5, 1), (0.5, 1)],
            },
        )
        for line in (self.onset_line, self.threshold_line, self.preview_line):
            line.label.setFont(small_font())
        self.vanilla_curve = pg.PlotDataItem(name="vanilla: predicted change per step")
        self.gated_curve = pg.PlotDataItem(name="TeaCache: accumulated")
        self.gated_points = pg.ScatterPlotItem(size=7, pen=pg.mkPen(None))
        for plot_item in (
            self.not_run,
            self.not_run_label,
            self.band,
            self.onset_line,
            self.threshold_line,
            self.preview_line,
            self.vanilla_curve,
            self.gated_curve,
            self.gated_points,
        ):
            item.addItem(plot_item)

        # A count holds from its threshold to the next one: drawn as steps, not slanted lines
        # that read a neighbour's count at the run's threshold (#39).
        self.skip_curve = pg.PlotDataItem(stepMode="left")
        # The shown run's own count at its threshold, on the curve the simulation drew.
        self.run_point = pg.ScatterPlotItem(
            size=8, brush=pg.mkBrush(DECISION_COLOURS[Decision.skipped]), pen=pg.mkPen(None)
        )
        self.curve_threshold = pg.InfiniteLine(
            angle=90, movable=False, pen=pg.mkPen(_colour(THRESHOLD_COLOUR), width=2)
        )
        self.curve_preview = pg.InfiniteLine(
            angle=90,
            movable=False,
            pen=pg.mkPen(_colour(THRESHOLD_COLOUR, 170), width=1.2, style=Qt.PenStyle.DotLine),
        )
        self.curve_onset = pg.InfiniteLine(
            angle=90,
            movable=False,
            pen=pg.mkPen(_colour(BAND_COLOUR), width=1.2, style=Qt.PenStyle.DashLine),
        )
        for plot_item in (
            self.skip_curve,
            self.run_point,
            self.curve_threshold,
            self.curve_preview,
            self.curve_onset,
        ):
            curve_item.addItem(plot_item)

        for widget in (self.plot, self.curve_plot):
            for name in ("left", "bottom"):
                _plot_item(widget).getAxis(name).enableAutoSIPrefix(False)
        self.legend = QLabel()
        self.legend.setFont(small_font(self.legend.font()))
        self.legend.setWordWrap(True)
        plots = QHBoxLayout()
        plots.setContentsMargins(0, 0, 0, 0)
        plots.setSpacing(8)
        plots.addWidget(self.plot, 3)
        plots.addWidget(self.curve_plot, 2)
        # A caveat about the gate's calibration for this run (e.g. a LoRA it was not fitted on).
        self.note = QLabel()
        self.note.setObjectName("GateNote")
        self.note.setFont(small_font(self.note.font()))
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.legend)
        layout.addWidget(self.note)
        layout.addLayout(plots, 1)
        self._threshold = 0.0
        self._left_out = 0
        self._gate = DEFAULT_GATE
        self._legend_colours: tuple[str, str] | None = None
        self._band: EngagementBand | None = None
        self._apply_palette()
        # The labels move off the data and inside the view whenever either changes size.
        self._y_top, self._onset = 0.2, None
        _plot_item(self.plot).getViewBox().sigResized.connect(self._on_resized)
        self.set_data((), (), 0.1, None)

    def sizeHint(self) -> QSize:
        return QSize(720, 230)

    def _on_resized(self, *_args: object) -> None:
        self._fit_y()
        self._place_labels()

    def set_note(self, text: str) -> None:
        """Show ``text`` above the plots; empty hides it."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_data(
        self,
        gated: Sequence[StepEvent | None],
        vanilla: Sequence[StepEvent | None],
        threshold: float,
        band: EngagementBand | None,
        preview: float | None = None,
        *,
        gate: str | None = None,
        left_out: int = 0,
    ) -> None:
        """``threshold`` is the run's; ``preview`` the slider's, drawn dotted when it differs.
        ``gate`` names the rule whose terms the plot draws (default: the gated steps' own).
        ``left_out``: the first steps a run from a picture never ran (drawn as a grey band; the
        steps that ran sit after them)."""
        self._threshold = threshold
        self._left_out = left_out = max(0, left_out)
        show_preview = preview is not None and abs(preview - threshold) > 1e-9
        self.preview_line.setVisible(show_preview)
        self.curve_preview.setVisible(show_preview)
        if preview is not None and show_preview:
            self.preview_line.setValue(preview)
            self.curve_preview.setValue(preview)
        self._band = band
        if gate is None:
            gate = next((s.gate for s in gated if s is not None), DEFAULT_GATE)
        kind = gate_kind(gate)
        if gate != self._gate:
            self._gate = gate
            _plot_item(self.plot).setLabel("left", kind.plot.axis_label)
            if self._legend_colours is not None:
                self.legend.setText(legend_html(*self._legend_colours, gate=gate))
        vx, vy = _series(vanilla, kind.plot_value, left_out)
        gx, gy = _series(gated, lambda step: step.accumulated, left_out)
        self.vanilla_curve.setData(vx, vy)
        self.gated_curve.setData(gx, gy)
        brushes = [
            pg.mkBrush(DECISION_COLOURS[s.decision])
            for s in gated
            if s is not None and s.accumulated is not None
        ]
        self.gated_points.setData(x=gx, y=gy, brush=brushes)
        self.threshold_line.setValue(threshold)
        self.curve_threshold.setValue(threshold)

        onset = band.onset if band is not None else None
        visible_onset = onset is not None and onset < 1.0
        self.onset_line.setVisible(visible_onset)
        self.band.setVisible(visible_onset)
        self.curve_onset.setVisible(visible_onset)
        if band is not None and onset is not None and visible_onset:
            top = band.saturation if band.saturation and band.saturation > onset else onset * 1.5
            self.band.setRegion((onset, min(1.0, top)))
            self.onset_line.label.setFormat(kind.onset_words(onset))
            self.onset_line.setValue(onset)
            self.curve_onset.setValue(onset)
        if band is not None and band.curve:
            curve = band.curve_through(threshold, preview if show_preview else None)
            self.skip_curve.setData([t for t, _ in curve], [k for _, k in curve])
        else:
            self.skip_curve.setData([], [])
        finished = bool(gated) and all(s is not None for s in gated)
        skipped = 0
        if finished and band is not None and len(gated) == band.steps:
            skipped = sum(1 for s in gated if s is not None and s.decision is Decision.skipped)
            self.run_point.setData([threshold], [skipped])
        else:
            self.run_point.setData([], [])

        ran = max(len(gated), len(vanilla))
        steps = max(left_out + ran, 1)
        self.not_run.setVisible(left_out > 0 and ran > 0)
        self.not_run_label.setVisible(left_out > 0 and ran > 0)
        self.not_run.setRegion((0.5, left_out + 0.5))
        values = [threshold, *(v for v in vy), *(v for v in gy)]
        if preview is not None and show_preview:
            values.append(preview)
        if visible_onset and onset is not None:
            values.append(onset * 1.15)
        finite = [v for v in values if v is not None and np.isfinite(v)]
        top = max(finite) if finite else 0.2
        _plot_item(self.plot).getViewBox().setXRange(0.5, steps + 0.5, padding=0)
        spacing = _nice_spacing(steps, 12)
        _plot_item(self.plot).getAxis("bottom").setTickSpacing(spacing, spacing)
        self._y_top = max(0.05, top * 1.12)
        self._onset = onset if visible_onset else None
        self._fit_y()
        self.not_run_label.setPos(0.6, self._y_top)
        if band is not None and band.curve:
            # The curve's axis covers the run's and the previewed threshold (the session draws
            # the curve far enough for both).
            right = max(band.curve[-1][0], threshold, preview if show_preview and preview else 0.0)
            _plot_item(self.curve_plot).getViewBox().setXRange(0.0, right, padding=0.02)
            _plot_item(self.curve_plot).getViewBox().setYRange(
                0, max(1, band.max_skips, skipped) * 1.1, padding=0
            )
            spacing = _nice_spacing(max(1, band.max_skips, skipped), 5)
            _plot_item(self.curve_plot).getAxis("left").setTickSpacing(spacing, spacing)
        else:
            _plot_item(self.curve_plot).getViewBox().setXRange(
                0.0, max(0.2, threshold * 2), padding=0.02
            )
            _plot_item(self.curve_plot).getViewBox().setYRange(0, 1, padding=0)
        self._place_labels()

    def _fit_y(self) -> None:
        """The y range: 0 to above the data, and below 0 room for the onset's label under its
        line (no prediction lies below the onset, so there it covers no data; the walk found it
        cut in half by the x axis once the range grew). Values below 0 have no tick label."""
        box = _plot_item(self.plot).getViewBox()
        top, onset, threshold = self._y_top, self._onset, self._threshold
        bottom = 0.0
        height = box.sceneBoundingRect().height()
        room = self.onset_line.label.boundingRect().height() + 4  # pixels beside a line
        if height > 2 * room:
            for _ in range(3):  # each bound moves the other's scale a little: settle both
                if onset is not None:
                    # (onset - bottom) / (top - bottom) * height >= room, solved for bottom.
                    bottom = min(0.0, (onset * height - room * top) / (height - room))
                # The same above the threshold line, for its label (few points lie above it).
                top = max(top, (threshold * height - room * bottom) / (height - room))
        box.setYRange(bottom, top, padding=0)

    def _place_labels(self) -> None:
        """Each line's label where it is inside the data area and covers the fewest data
        points (and no label placed before it): along the line at ``LABEL_POSITIONS``, above it
        or below. The walk found "skipping begins" cut by the x axis at large thresholds and the
        threshold's label on the dots. Arithmetic on rectangles (the labels keep their pixel
        size): the plot redraws during a run, and this must cost nothing there."""
        box = _plot_item(self.plot).getViewBox()
        view = box.sceneBoundingRect()
        if view.width() <= 1 or view.height() <= 1:
            return
        points: list[QPointF] = []  # the dots
        lines: list[_Segment] = []  # the lines drawn between them (a lighter cost)
        for item in (self.vanilla_curve, self.gated_curve):
            xs, ys = item.getData()
            if xs is None or ys is None:
                continue
            dots = [
                box.mapViewToScene(QPointF(float(x), float(y))) for x, y in zip(xs, ys, strict=True)
            ]
            points += dots
            lines += [(a.x(), a.y(), b.x(), b.y()) for a, b in pairwise(dots)]
        taken: list[QRectF] = []
        for line in (self.threshold_line, self.onset_line, self.preview_line):
            if not line.isVisible():
                continue
            label = line.label
            size = label.boundingRect().size()  # pixels: the label is drawn upright, unscaled
            value = line.value()  # a number here (a numpy float32 from a MagCache table, too)
            if not isinstance(value, Real):
                continue
            y = box.mapViewToScene(QPointF(0.0, float(value))).y()
            best: tuple[tuple[int, int, int, int], float, tuple[float, float], QRectF] | None = None
            for level, gap in enumerate(LABEL_GAPS):
                if best is not None and best[0][:2] == (0, 0):
                    break  # a free spot nearer the line was found
                for order, position in enumerate(LABEL_POSITIONS):
                    x = view.left() + position * view.width()
                    # The anchor's height on the label: 1 + gap above the line, -gap below it.
                    for side in (1.0 + gap, -gap):
                        rect = QRectF(
                            x - position * size.width(), y - side * size.height(), size.width(),
                            size.height(),
                        )  # fmt: skip
                        outside = 0 if view.contains(rect) else 1
                        room = rect.adjusted(
                            -LABEL_CLEARANCE, -LABEL_CLEARANCE, LABEL_CLEARANCE, LABEL_CLEARANCE
                        )
                        covered = 10 * sum(room.contains(p) for p in points)
                        sides = (room.left(), room.top(), room.right(), room.bottom())
                        covered += sum(_crosses(sides, segment) for segment in lines)
                        covered += 1000 * sum(rect.intersects(other) for other in taken)
                        score = (outside, covered, level, order)
                        if best is None or score < best[0]:
                            best = (score, position, (position, side), rect)
            if best is not None:
                _, position, anchor, rect = best
                label.anchors = [anchor, anchor]
                label.setPosition(position)
                taken.append(rect)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        palette = self.palette()
        background = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.WindowText)
        secondary = muted(self)
        for widget in (self.plot, self.curve_plot):
            widget.setBackground(background)
            plot_item = _plot_item(widget)
            for name in ("left", "bottom"):
                axis = plot_item.getAxis(name)
                axis.setPen(pg.mkPen(secondary))
                axis.setTextPen(pg.mkPen(text))
            plot_item.titleLabel.setAttr("color", text.name())
        label_fill = QColor(background)
        label_fill.setAlpha(210)
        for line in (self.threshold_line, self.onset_line, self.preview_line):
            line.label.fill = pg.mkBrush(label_fill)
            line.label.update()
        self.vanilla_curve.setPen(pg.mkPen(secondary, width=1.2))
        self.vanilla_curve.setSymbol("o")
        self.vanilla_curve.setSymbolSize(4)
        self.vanilla_curve.setSymbolBrush(secondary)
        self.vanilla_curve.setSymbolPen(None)
        self.gated_curve.setPen(pg.mkPen(text, width=1.4))
        self.skip_curve.setPen(pg.mkPen(_colour(DECISION_COLOURS[Decision.skipped]), width=2))
        self.not_run_label.setColor(secondary)
        self._legend_colours = (text.name(), secondary.name())
        self.legend.setText(legend_html(text.name(), secondary.name(), gate=self._gate))


class NonNegativeAxis(pg.AxisItem):
    """A y axis whose range may start below 0 (room for a label) without labelling it."""

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        strings = super().tickStrings(values, scale, spacing)
        return [
            text if value >= -1e-12 else "" for value, text in zip(values, strings, strict=True)
        ]


def _plot_item(widget: pg.PlotWidget) -> pg.PlotItem:
    item = widget.getPlotItem()
    assert item is not None  # a PlotWidget always has one
    return item


def legend_html(text: str, secondary: str, *, gate: str = DEFAULT_GATE) -> str:
    def swatch(colour: str, glyph: str) -> str:
        return f'<span style="color:{colour}; font-weight:700">{glyph}</span>'

    join = "&#8288;"  # a word joiner: no line break between a swatch's glyphs
    dots = join.join(
        swatch(DECISION_COLOURS[d], "●")
        for d in (Decision.computed, Decision.skipped, Decision.numerical_miss)
    )
    plot = gate_kind(gate).plot
    vanilla, gated = plot.vanilla_legend, plot.gated_legend

    def whole(words: str) -> str:  # an item never breaks across lines (nor from its swatch)
        return words.replace(" ", "&nbsp;")

    items = [
        f"{swatch(secondary, f'—{join}•')}&nbsp;{whole(f'vanilla: {vanilla}')}",
        f"{swatch(text, '—')}{join}{dots}&nbsp;{whole(f'{gated} (dot = decision)')}",
        f"{swatch(THRESHOLD_COLOUR, '━')}&nbsp;threshold&nbsp;(t)",
        f"{swatch(BAND_COLOUR, '▬')}&nbsp;"
        + whole("band where skipping begins (first skip → most skips)"),
    ]
    return "&nbsp;&nbsp; ".join(items)  # the lines break between items only


def _nice_spacing(span: float, max_ticks: int) -> float:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if span / step <= max_ticks:
            return float(step)
    return float(max(1.0, span / max_ticks))


def _series(
    steps: Sequence[StepEvent | None],
    value_of: Callable[[StepEvent], float | None],
    left_out: int = 0,
) -> tuple[list[int], list[float]]:
    """The steps' values at their place in the whole schedule (1-based, after ``left_out``)."""
    xs, ys = [], []
    for step in steps:
        if step is None:
            continue
        value = value_of(step)
        if value is None or not np.isfinite(value):
            continue
        xs.append(left_out + step.index + 1)
        ys.append(float(value))
    return xs, ys


def _crosses(rect: tuple[float, float, float, float], segment: _Segment) -> bool:
    """Whether a line between two dots passes through a label's rectangle (left, top, right,
    bottom): Liang-Barsky clipping after a bounding-box test. Sampling points along the line
    missed a steep one (the turn-4 walk: "t = 0.1" with a line through it)."""
    left, top, right, bottom = rect
    x0, y0, x1, y1 = segment
    if max(x0, x1) < left or min(x0, x1) > right or max(y0, y1) < top or min(y0, y1) > bottom:
        return False  # also false for NaN (an unmeasured step draws no line)
    dx, dy = x1 - x0, y1 - y0
    start, end = 0.0, 1.0
    for p, q in ((-dx, x0 - left), (dx, right - x0), (-dy, y0 - top), (dy, bottom - y0)):
        if p == 0.0:
            if q < 0.0:
                return False
            continue
        t = q / p
        if p < 0.0:
            start = max(start, t)
        else:
            end = min(end, t)
        if start > end:
            return False
    return True
