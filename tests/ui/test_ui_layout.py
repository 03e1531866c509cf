"""Issue #16 item 4: the layout holds at 1024×700 and above with the longest banner shown."""

from __future__ import annotations

from itertools import combinations

import pytest
from PySide6.QtCore import QRect, QRectF
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.ui.gate_plot import PLOT_MIN_HEIGHT
from app.ui.images import IMAGES_MIN_HEIGHT
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow

SIZES = ((1024, 700), (1600, 1000))


def _rect(window: MainWindow, widget: QWidget) -> QRect:
    return QRect(widget.mapTo(window, widget.rect().topLeft()), widget.size())


def _settle(qtbot: QtBot, window: MainWindow, size: tuple[int, int]) -> None:
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size)
    for _ in range(3):  # the banner's clamp and the layouts settle over a few passes
        QApplication.processEvents()


def _panels(window: MainWindow) -> dict[str, QWidget]:
    compare, plot = window.compare, window.gate_plot
    cards = (
        compare.ssim_card,
        compare.gated_time_card,
        compare.vanilla_time_card,
        compare.speedup_card,
        compare.skips_card,
    )
    panels: dict[str, QWidget] = {"images": compare.view, "timeline": window.timeline}
    panels |= {f"card {c.caption.text()}": c for c in cards}
    panels |= {"gate plot": plot.plot, "skip curve": plot.curve_plot, "banners": window.banners}
    return panels


def _axis_titles_inside(window: MainWindow) -> list[str]:
    """Axis titles drawn outside their plot widget (cut), as 'plot/axis' names."""
    cut = []
    for name, widget in (
        ("gate plot", window.gate_plot.plot),
        ("curve", window.gate_plot.curve_plot),
    ):
        item = widget.getPlotItem()
        assert item is not None
        view = QRectF(widget.rect())
        for side in ("left", "bottom"):
            axis = item.getAxis(side)
            if not axis.isVisible() or not axis.label.isVisible():
                continue
            # The text item's box includes its document margin; the glyphs lie inside it.
            margin = axis.label.document().documentMargin()
            box = axis.label.boundingRect().adjusted(margin, margin, -margin, -margin)
            label = axis.label.mapRectToScene(box)
            scene = widget.mapFromScene(label).boundingRect()
            if not view.contains(QRectF(scene)):
                cut.append(f"{name}/{side}")
    return cut


@pytest.fixture
def longest_banner(qtbot: QtBot, make_window: WindowFactory) -> MainWindow:
    """demo-turbo at 2 steps after a run: the schedule banner with the most text and a fix."""
    window = make_window()
    window.form.select_variant("demo-turbo")
    window.form.steps = 2
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    banner = window.banners.banner("schedule")
    assert banner is not None and banner.notice.actions
    assert len(banner.message.full_text) > 400
    return window


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_nothing_overlaps_and_no_label_is_clipped(
    qtbot: QtBot, longest_banner: MainWindow, size: tuple[int, int]
) -> None:
    _check_layout(qtbot, longest_banner, size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_layout_holds_without_a_banner(
    qtbot: QtBot, make_window: WindowFactory, size: tuple[int, int]
) -> None:
    window = make_window()
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    assert window.notices.notices() == ()
    _check_layout(qtbot, window, size, banner=False)


def _check_layout(
    qtbot: QtBot, window: MainWindow, size: tuple[int, int], *, banner: bool = True
) -> None:
    _settle(qtbot, window, size)
    panels = _panels(window)
    if not banner:
        assert not window.banners.isVisible()
        del panels["banners"]
    rects = {name: _rect(window, w) for name, w in panels.items()}
    for name, widget in panels.items():
        assert widget.isVisible() and not rects[name].isEmpty(), name
    overlaps = [(a, b) for a, b in combinations(rects, 2) if rects[a].intersects(rects[b])]
    assert overlaps == []
    assert window.compare.view.height() >= IMAGES_MIN_HEIGHT
    assert window.gate_plot.plot.height() >= PLOT_MIN_HEIGHT
    assert window.gate_plot.curve_plot.height() >= PLOT_MIN_HEIGHT
    # Everything fits without scrolling at these sizes: the plots are on screen, whole.
    viewport = window.results_scroll.viewport()
    visible = QRect(viewport.mapTo(window, viewport.rect().topLeft()), viewport.size())
    for name in ("images", "timeline", "gate plot", "skip curve"):
        assert visible.contains(rects[name]), name
    assert _axis_titles_inside(window) == []
    clipped = [
        (b.text(), b.width(), b.sizeHint().width())
        for b in window.findChildren(QAbstractButton)
        if b.isVisible() and b.text() and b.width() < b.sizeHint().width()
    ]
    assert clipped == []
    generate = window.controls.generate_button
    assert generate.fontMetrics().horizontalAdvance(generate.text()) < generate.width()


def test_the_banner_clamps_its_message_and_expands_on_more(
    qtbot: QtBot, longest_banner: MainWindow
) -> None:
    window = longest_banner
    _settle(qtbot, window, (1024, 700))
    banner = window.banners.banner("schedule")
    assert banner is not None
    message = banner.message
    assert message.clamped and message.text().endswith("…")
    assert message.text() != message.full_text
    assert banner.more_button.isVisible()
    collapsed = banner.height()
    banner.more_button.click()
    QApplication.processEvents()
    assert message.text() == message.full_text and banner.more_button.text() == "Less"
    qtbot.waitUntil(lambda: banner.height() > collapsed)
    banner.more_button.click()
    assert message.text() != message.full_text and banner.more_button.text() == "More"


def test_details_show_every_line_once_after_comparison_picks(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 19: Details' last line was cut at the splitter, and after comparison picks the
    first line was drawn twice. After each pick at 1024×700 (the number of lines changes: a
    resumed entry has a Resume line) the figures' label is as tall as its wrapped text, it is
    laid out inside Details and inside the cards' neighbours, and one label holds the text."""
    from tests.fakes.engine import FakeEngine, FakeScript

    window = make_window(FakeEngine(FakeScript(step_seconds=0.001)))
    details = window.results.run_details
    details.set_expanded(True)
    _settle(qtbot, window, (1024, 700))
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    dialog = window.show_comparison()
    dialog.thresholds.setText("0.05, 0.1, 0.2, 0.3")
    dialog.start()
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=60_000)
    dialog.hide()
    for index in (3, 0, 2):
        assert window.comparer.pick(index)
        for _ in range(3):
            QApplication.processEvents()
        figures = details.figures
        text = figures.text()
        assert text.startswith("SSIM against vanilla") and text.count("SSIM against") == 1
        needed = figures.heightForWidth(figures.width())
        assert figures.height() >= needed, (index, figures.height(), needed)
        inside = QRect(details.mapTo(window, details.rect().topLeft()), details.size())
        assert inside.contains(_rect(window, figures)), index
        # Nothing else below the cards draws over the figures.
        for name, widget in _panels(window).items():
            if widget.isVisible() and name != "banners":
                assert not _rect(window, widget).intersects(_rect(window, figures)), name
        holders = [w for w in details.findChildren(QLabel) if "SSIM against" in w.text()]
        assert holders == [figures]
