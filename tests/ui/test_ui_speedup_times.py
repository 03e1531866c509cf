"""A speedup and the times beside it agree, or it visibly says it is an estimate (issue #39,
finding 2).

The walk found the comparison's tiles and the reopened run's cards showing times whose ratio was
not the speedup beside them: a tile printed its measured time beside a figure re-timed after the
run, and a reopened run's card note began "from history, run at …", which a 1024-px window elides
before the words that say "re-timed estimate".
"""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.engine.report import label_head
from app.ui.images import StatCard
from app.ui.job_slot import JobStatus
from tests.fakes.engine import FakeEngine, FakeScript

TIME = re.compile(r"(\d+(?:\.\d+)?) (ms|s)\b")
SPEEDUP = re.compile(r"(\d+\.\d\d)×")
FINISH_MS = 60_000  # a loaded 2-core machine (tests/ui/test_ui_threshold_compare.py)


def _seconds_range(number: str, unit: str) -> tuple[float, float]:
    """The interval a printed time stands for: half its last digit either side."""
    value = float(number)
    decimals = len(number.split(".")[1]) if "." in number else 0
    half = 0.5 * 10**-decimals
    scale = 0.001 if unit == "ms" else 1.0
    return (value - half) * scale, (value + half) * scale


def _ratio_can_be(speedup: str, vanilla: tuple[str, str], gated: tuple[str, str]) -> bool:
    """Whether the printed times' ratio can round to the printed speedup."""
    v_low, v_high = _seconds_range(*vanilla)
    g_low, g_high = _seconds_range(*gated)
    shown = float(speedup)
    return v_low / g_high <= shown + 0.005 and shown - 0.005 <= v_high / g_low


def _visible(card: StatCard) -> str:
    """What a card's note shows at its width (it elides on the right)."""
    note = card.note
    return note.fontMetrics().elidedText(note.text(), Qt.TextElideMode.ElideRight, note.width())


def test_every_tile_shows_the_two_times_its_speedup_is_the_ratio_of(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = FakeEngine(FakeScript(step_seconds=0.004))  # the later entries re-time vanilla
    window = make_window(engine)
    window.form.select_variant("demo")
    window.form.steps = 10
    dialog = window.show_comparison()
    dialog.thresholds.setText("0.05, 0.1, 0.2, 0.3")
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.status is JobStatus.finished, timeout=FINISH_MS)

    rows = [r for r in window.comparer.rows if r is not None]
    heads = [label_head(r.speedup_label) for r in rows]
    assert any(head.startswith("re-timed") for head in heads)  # the case the walk met
    (vanilla_shown,) = TIME.findall(dialog.cells[0].stats.text())
    for cell, row, head in zip(dialog.cells[1:], rows, heads, strict=True):
        lines = cell.stats.text().splitlines()
        timed = next(line for line in lines if line.startswith("time "))
        gated, vanilla = TIME.findall(timed)
        (speedup,) = SPEEDUP.findall(cell.stats.text())
        assert float(speedup) == round(row.speedup or 0.0, 2)
        assert _ratio_can_be(speedup, vanilla, gated), cell.stats.text()
        assert head in cell.stats.text()  # measured, or which estimate
        if head == "measured":  # the vanilla tile's time is the one it was measured against
            assert vanilla == vanilla_shown


def test_a_reopened_runs_speedup_card_says_first_what_kind_of_figure_it_is(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window(FakeEngine(FakeScript(step_seconds=0.004)))
    window.resize(1024, 700)  # the smallest window the layout is held to
    window.show()
    assert run_to_end(qtbot, window) is JobStatus.finished  # measured
    window.form.threshold = 0.06
    assert run_to_end(qtbot, window) is JobStatus.finished  # vanilla cached: re-timed
    compare = window.compare
    for entry in window.history.entries():  # newest first: the re-timed one, then the measured
        assert window.session.open_entry(entry)
        label = entry.speedup_label
        head = label_head(label)
        card = compare.speedup_card
        qtbot.waitUntil(lambda card=card, label=label: label in card.note.text())
        qtbot.wait(50)  # the cards' widths settle
        shown = _visible(card)
        assert shown.startswith(head[:8]), shown  # "re-timed", "measured": never cut away
        if head == "measured":
            (speedup,) = SPEEDUP.findall(compare.speedup_card.value.text())
            (gated,) = TIME.findall(compare.gated_time_card.value.text())
            (vanilla,) = TIME.findall(compare.vanilla_time_card.value.text())
            assert _ratio_can_be(speedup, vanilla, gated)
    assert {label_head(e.speedup_label)[:8] for e in window.history.entries()} == {
        "measured",
        "re-timed",
    }
