"""Walk #39 item 7: text cut or run together at a 1024×700 window. The timeline's gated row read
"-block probe" (its label column was a fixed 78 px), the model list's "distilled" badge ran into
a long name ("Qwen-Image 2.1 Turbodistilled": Qt sized the list by the names alone), and the
last line of Details was cut (its height was measured 5 px too wide). Each is held by the
widget's own geometry against its font metrics, offscreen."""

from __future__ import annotations

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui_support import FakeModelStore, WindowFactory, run_to_end

from app.engine.events import Pass
from app.gate.kinds import GATE_KINDS
from app.ui.job_slot import JobStatus
from app.ui.theme import small_font
from app.ui.variant_picker import BADGE_ROLE
from app.ui.window import MainWindow
from app.variants import all_variants
from tests.fakes.engine import FakeEngine

SMALLEST = (1024, 700)


def _settle(qtbot: QtBot, window: MainWindow) -> None:
    window.resize(*SMALLEST)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == SMALLEST)
    for _ in range(3):  # the layouts settle over a few passes
        QApplication.processEvents()


def test_every_timeline_row_label_shows_whole(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window(FakeEngine())
    window.form.select_variant("demo")
    longest = max(GATE_KINDS, key=lambda g: len(GATE_KINDS[g].label))
    window.form.select_gate(longest)
    assert run_to_end(qtbot, window) is JobStatus.finished
    _settle(qtbot, window)
    timeline = window.timeline
    assert timeline.gate_name == GATE_KINDS[longest].label  # "First-block probe"
    metrics = QFontMetrics(small_font(timeline.font()))
    room = timeline.label_rect(Pass.gated).width()
    assert room == timeline.label_rect(Pass.vanilla).width()
    for label in timeline.row_labels():
        assert metrics.horizontalAdvance(label) <= room, label
    first = timeline.cell_rect(Pass.gated, 0)
    assert first.left() >= timeline.label_rect(Pass.gated).right()  # no cell over a label


def test_the_model_list_shows_each_name_and_its_badge_apart(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Every variant not on disk: the longest badges ("distilled · ≈1.5 GB ↓")."""
    missing = {v for v, variant in all_variants().items() if not variant.family.weights_shipped}
    window = make_window(FakeEngine(), store=FakeModelStore(missing=missing))
    _settle(qtbot, window)
    picker = window.controls.variant_picker
    picker.showPopup()
    try:
        QApplication.processEvents()
        view = picker.view()
        room = view.viewport().width()
        model = picker.model()
        rows = [model.index(row, 0) for row in range(model.rowCount())]
        badged = [index for index in rows if index.data(BADGE_ROLE)]
        assert any("distilled · " in index.data(BADGE_ROLE) for index in badged)
        names = view.fontMetrics()
        badges = QFontMetrics(small_font(view.font()))
        for index in badged:
            # The name from the left (the style's text margin, 4 px), the badge right-aligned
            # 10 px from the edge: at least a 12 px gap between them, and no row wider than
            # the list.
            needed = names.horizontalAdvance(index.data()) + 4 + 12
            needed += badges.horizontalAdvance(index.data(BADGE_ROLE)) + 10
            assert needed <= room, (index.data(), index.data(BADGE_ROLE), needed, room)
            assert view.visualRect(index).width() <= room, index.data()
    finally:
        picker.hidePopup()


def test_the_last_line_of_details_shows_at_the_smallest_window(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """A Details line that fits the disclosure's width but not the figures' own (5 px less)."""
    window = make_window(FakeEngine())
    assert run_to_end(qtbot, window) is JobStatus.finished
    details = window.run_details
    details.set_expanded(True)
    _settle(qtbot, window)
    figures = details.figures
    metrics = figures.fontMetrics()
    width, line = 0, ""
    for _ in range(5):  # a new text can add or drop the results' scroll bar: its width moves
        width = figures.width()
        line = "SSIM " * (width // max(1, metrics.horizontalAdvance("SSIM "))) + "x"
        while metrics.horizontalAdvance(line) <= width:
            line += "."  # a few pixels at a time: the line just overflows the figures' width
        details.set_run("a summary", ["first line", line, "the last line"])
        _settle(qtbot, window)
        if figures.width() == width:
            break
    assert figures.width() == width < details.disclosure.width()  # the content's margin
    assert width < metrics.horizontalAdvance(line) <= details.disclosure.width()  # engaged
    assert figures.heightForWidth(figures.width()) <= figures.height()
    assert figures.height() <= details.disclosure.content().maximumHeight()
