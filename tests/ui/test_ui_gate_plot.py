"""The gate plot's labels and size (issue #27 items 18, 22, 26): every label inside the plot's
view, none on the data; the legend never breaks inside an item; a readable plot at 1024×700; the
skip curve's axis covers the threshold being previewed; the threshold line follows the pass being
run. Geometry, not pixels: rectangles in scene coordinates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import pytest
from pyqtgraph import ViewBox
from PySide6.QtCore import QLineF, QPointF, QRectF
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.gate import Decision, StepEvent
from app.gate.events import VANILLA
from app.gate.simulator import simulate
from app.ui.analysis import engagement_band
from app.ui.gate_plot import PLOT_MIN_VIEW_HEIGHT, GatePlot, legend_html
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow
from app.variants import get_variant
from tests.fakes.params import teacache_params
from tests.fakes.steps import tea_step

STEPS = 28
# The demo's vanilla trace on its default prompt (rel-L1 per step, the first unmeasured): its
# predicted changes run 0.03-0.16, and skipping begins above 0.0295, as in the walk.
RELS: list[float | None] = [None] + [0.02 + 0.25 * ((i * 37) % 29) / 29 for i in range(1, STEPS)]


def _vanilla() -> tuple[StepEvent, ...]:
    demo = get_variant("demo")
    params = teacache_params(demo, 0.1)
    from app.gate.decision import predict_change

    steps = []
    for i, rel in enumerate(RELS):
        predicted = None if rel is None else predict_change(params, rel)[0]
        steps.append(
            tea_step(i, STEPS, Decision.computed, rel, predicted, None, 0.1, 0.01, gate=VANILLA)
        )
    return tuple(steps)


def _gated(threshold: float) -> tuple[StepEvent, ...]:
    """TeaCache's accumulation on that trace (the simulator's): predictions pile up while below
    the threshold and reset when a step is computed."""
    demo = get_variant("demo")
    verdicts = simulate(teacache_params(demo, threshold), RELS)
    return tuple(
        tea_step(v.index, STEPS, v.decision, v.rel_l1, v.predicted, v.accumulated, threshold, 0.01)
        for v in verdicts
    )


def _shown_plot(qtbot: QtBot, size: tuple[int, int]) -> GatePlot:
    plot = GatePlot()
    qtbot.addWidget(plot)
    plot.resize(*size)
    plot.show()
    qtbot.waitExposed(plot)
    return plot


def _settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def _view_box(widget: object) -> ViewBox:
    item = widget.getPlotItem()  # type: ignore[attr-defined]
    assert item is not None
    return item.getViewBox()


def _view_rect(plot: GatePlot) -> QRectF:
    return _view_box(plot.plot).sceneBoundingRect()


def _label_rect(line: object) -> QRectF:
    label = line.label  # type: ignore[attr-defined]
    return label.mapRectToScene(label.boundingRect())


def _data_points(plot: GatePlot) -> list[QPointF]:
    box = _view_box(plot.plot)
    points = []
    for item in (plot.vanilla_curve, plot.gated_curve):
        xs, ys = item.getData()
        if xs is None or ys is None:
            continue
        points += [
            box.mapViewToScene(QPointF(float(x), float(y))) for x, y in zip(xs, ys, strict=True)
        ]
    return points


def _data_segments(plot: GatePlot) -> list[QLineF]:
    """The lines drawn between each curve's consecutive dots, in scene coordinates."""
    box = _view_box(plot.plot)
    segments = []
    for item in (plot.vanilla_curve, plot.gated_curve):
        xs, ys = item.getData()
        if xs is None or ys is None:
            continue
        dots = [
            box.mapViewToScene(QPointF(float(x), float(y))) for x, y in zip(xs, ys, strict=True)
        ]
        segments += [QLineF(a, b) for a, b in pairwise(dots)]
    return segments


def _crosses(rect: QRectF, segment: QLineF) -> bool:
    """Whether a drawn line passes through the rectangle: an end inside, or an edge cut."""
    if rect.contains(segment.p1()) or rect.contains(segment.p2()):
        return True
    corners = (rect.topLeft(), rect.topRight(), rect.bottomRight(), rect.bottomLeft())
    edges = [QLineF(a, b) for a, b in zip(corners, (*corners[1:], corners[0]), strict=True)]
    bounded = QLineF.IntersectionType.BoundedIntersection
    return any(segment.intersects(edge)[0] == bounded for edge in edges)


def _check_labels(plot: GatePlot, *, off_data: bool) -> None:
    view = _view_rect(plot)
    points = _data_points(plot)
    assert points
    lines = [("onset", plot.onset_line), ("threshold", plot.threshold_line)]
    if plot.preview_line.isVisible():
        lines.append(("preview", plot.preview_line))
    rects = []
    for name, line in lines:
        assert line.label.isVisible(), name
        rect = _label_rect(line)
        rects.append(rect)
        assert view.contains(rect), (name, rect, view)
        if off_data:
            on_data = [p for p in points if rect.contains(p)]
            assert on_data == [], (name, rect, on_data)
            # The turn-4 walk: no dot under "t = 0.1", but the line from step 26 to 27 ran
            # through it (and at 1024×700 the one from step 12 to 13 through "t = 0.15").
            crossed = [seg for seg in _data_segments(plot) if _crosses(rect, seg)]
            assert crossed == [], (name, rect, crossed)
    assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1 :])
    assert plot.onset_line.label.toPlainText().startswith("skipping begins above 0.")


@pytest.mark.parametrize("threshold", [0.1, 0.35, 0.99])
@pytest.mark.parametrize("size", [(720, 230), (1200, 300)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_labels_stay_inside_the_view(qtbot: QtBot, threshold: float, size: tuple[int, int]) -> None:
    """The walk: at thresholds 0.35 and 0.99 the "skipping begins" label was cut in half by the x
    axis (a trace whose predictions crowd the threshold: inside, not necessarily off the data)."""
    plot = _shown_plot(qtbot, size)
    vanilla = _vanilla()
    band = engagement_band(get_variant("demo"), threshold, vanilla)
    assert band is not None and band.onset is not None
    plot.set_data(_gated(threshold), vanilla, threshold, band, preview=threshold / 2)
    _settle()
    _check_labels(plot, off_data=False)


@pytest.mark.slow
def test_labels_stay_off_the_demo_runs_data(
    qtbot: QtBot, make_real_window: Callable[[int], MainWindow]
) -> None:
    """The walk's runs on the real demo (seed 42, 28 steps): "threshold 0.1" sat on the dots,
    and at 0.35 and 0.99 "skipping begins" was cut by the x axis. Each label is inside the data
    area and covers no data point, at the default size and at 1024×700."""
    window = make_real_window(28)
    window.form.seed = 42
    for threshold in (0.1, 0.35, 0.99):
        window.form.threshold = threshold
        with qtbot.waitSignal(window.run_ended, timeout=300_000):
            assert window.session.generate() is not None
        assert window.run.status is JobStatus.finished, window.run.error
        for size in ((1280, 820), (1024, 700)):
            window.resize(*size)
            qtbot.waitUntil(lambda s=size: (window.width(), window.height()) == s)
            _settle()
            _check_labels(window.gate_plot, off_data=True)


@pytest.mark.slow
def test_labels_stay_off_the_data_when_no_spot_beside_the_line_is_free(
    qtbot: QtBot, make_real_window: Callable[[int], MainWindow]
) -> None:
    """The turn-5 walk: Details open, seed 42 at 0.1, then the slider dragged to 0.1433 and
    Generate. Every spot touching the line at 0.1433 has a dot or a line in it, and the label took
    the least covered one: the line from step 26 to 27 ran through "t = 0.1433" (1320×860; at
    1280×820 the same). A free spot a little above or below the line is better than one on it."""
    window = make_real_window(28)
    window.form.seed = 42
    window.run_details.set_expanded(True)
    for threshold in (0.1, 0.1433, 0.15):
        window.form.threshold = threshold
        with qtbot.waitSignal(window.run_ended, timeout=300_000):
            assert window.session.generate() is not None
        assert window.run.status is JobStatus.finished, window.run.error
        if threshold == 0.1:
            continue
        for size in ((1320, 860), (1280, 820)):
            window.resize(*size)
            qtbot.waitUntil(lambda s=size: (window.width(), window.height()) == s)
            _settle()
            _check_labels(window.gate_plot, off_data=True)


def test_the_legend_breaks_only_between_its_items(qtbot: QtBot) -> None:
    """At 1024×700 the legend broke "— threshold" across two lines."""
    plot = _shown_plot(qtbot, (600, 260))
    html = legend_html("#000000", "#777777")

    def ideal(fragment: str) -> float:
        doc = QTextDocument()
        doc.setDefaultFont(plot.legend.font())
        doc.setHtml(fragment)
        return doc.idealWidth()

    # An item wider than the line must wrap inside; every narrower width keeps items whole.
    plain = QTextDocument()
    plain.setHtml(html)
    widest = max(ideal(item) for item in plain.toPlainText().split("   ") if item.strip())
    assert widest < 500  # the legend's width at 1024×700 is about 600 px
    for width in range(int(widest) + 12, 1400, 20):
        doc = QTextDocument()
        doc.setDefaultFont(plot.legend.font())
        doc.setHtml(html)
        doc.setTextWidth(width)
        assert doc.size().height() > 0  # lays the text out
        text = doc.toPlainText()
        layout = doc.firstBlock().layout()
        assert layout.lineCount() >= 1
        starts = [layout.lineAt(i).textStart() for i in range(layout.lineCount())]
        glyphs = ("—•", "—", "━", "▬")
        lines = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
        assert all(line.lstrip().startswith(glyphs) for line in lines), (width, lines)


@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_both_plots_have_a_readable_height(
    qtbot: QtBot, make_window: WindowFactory, size: tuple[int, int]
) -> None:
    """At 1024×700 the plots' data areas were about 100 px (the skip curve's 81 px)."""
    window = make_window()
    window.form.select_variant("demo-turbo")
    window.form.steps = 2  # the longest banner
    assert run_to_end(qtbot, window) is JobStatus.finished
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size)
    _settle()
    for widget in (window.gate_plot.plot, window.gate_plot.curve_plot):
        view = _view_box(widget).sceneBoundingRect()
        assert view.height() >= PLOT_MIN_VIEW_HEIGHT, (size, view.height())


def _curve_x_range(plot: GatePlot) -> Sequence[float]:
    return _view_box(plot.curve_plot).viewRange()[0]


def test_the_skip_curve_covers_the_previewed_threshold(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """The walk: after a run at 0.1 the slider moved to 0.35 and the skips-vs-threshold axis
    stopped near 0.15, so the new threshold was not on it until the run ended."""
    window = make_window()
    window.form.threshold = 0.1
    assert run_to_end(qtbot, window) is JobStatus.finished
    window.form.threshold = 0.35
    window.refresh.now("plot")
    low, high = _curve_x_range(window.gate_plot)
    assert low <= 0.35 <= high
    curve = window.gate_plot.skip_curve.getData()[0]
    assert curve is not None and max(curve) >= 0.35  # the curve is drawn there, not only the axis
