"""The comparison view on the scriptable fake engine behind the real engine thread: entries fill
in as they finish, clicking one makes it the current threshold, cancel keeps what finished, the
comparison lands in the history as one entry and reopens, and bad lists get one sentence."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.engine.events import RunFinished, RunWarning
from app.storage.comparisons import is_comparison, load_comparison
from app.ui.history_view import entry_summary
from app.ui.job_slot import JobStatus
from app.ui.threshold_compare_view import CELL_MIN, ThresholdCompareDialog, best_columns
from tests.fakes.engine import FakeEngine, FakeScript, StepGate

THRESHOLDS = "0.3, 0.05, 0.2, 0.1"  # out of order on purpose: the view sorts them
STEPS = 10
# The fake's batch takes well under a second; the bound is for a 2-core machine shared by many
# (load average 16 measured while these tests ran), where 15 s once ran out.
FINISH_MS = 60_000


def _dialog(window: object) -> ThresholdCompareDialog:
    win = window  # MainWindow; kept loose for the factory's return type
    win.form.select_variant("demo")  # type: ignore[attr-defined]
    win.form.steps = STEPS  # type: ignore[attr-defined]
    dialog = win.show_comparison()  # type: ignore[attr-defined]
    dialog.resize(1280, 820)
    return dialog


def _filled(dialog: ThresholdCompareDialog) -> int:
    return sum(cell.has_image for cell in dialog.cells[1:])


def test_entries_fill_in_as_they_finish_and_a_click_makes_one_current(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = FakeEngine(FakeScript(step_seconds=0.002))  # times > 0: a speedup and its label
    window = make_window(engine)
    dialog = _dialog(window)
    fills: list[int] = []
    window.comparer.listeners.append(lambda: fills.append(_filled(dialog)))

    dialog.thresholds.setText(THRESHOLDS)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.status is JobStatus.finished, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=FINISH_MS)

    steps = [n for i, n in enumerate(fills) if i == 0 or n != fills[i - 1]]
    assert steps == [0, 1, 2, 3, 4]  # one entry at a time, in order, none at once
    assert [r.threshold for r in engine.requests] == [0.05, 0.1, 0.2, 0.3]
    assert all(r.resume for r in engine.requests)
    titles = [cell.title.text() for cell in dialog.cells]
    assert titles == ["Vanilla (reference)", "t = 0.05", "t = 0.1", "t = 0.2", "t = 0.3"]
    rows = [r for r in window.comparer.rows if r is not None]
    assert max(r.skips or 0 for r in rows) > 0  # the fake's gate engages on this schedule
    stats = dialog.cells[4].stats.text()
    assert f"of {STEPS} skipped" in stats and "SSIM" in stats and "time" in stats
    label = rows[3].speedup_label  # the same label a single run carries: its first clause shown,
    assert label.split(", ")[0] in stats and label  # all of it in the tooltip
    # The speedup's full label, then what the tile's "S2" (its SSIMULACRA2) means.
    tip = dialog.cells[4].stats.toolTip().splitlines()
    assert tip[0] == f"Speedup: {label}" and tip[1].startswith("S2: SSIMULACRA2 ")
    assert "times measured on" in dialog.about.text()
    assert window.run.status is JobStatus.idle  # the main view was not driven by the batch

    # At the smallest window size the cells sit side by side in rows, none overlapping, every
    # image at least the minimum (the grid scrolls before it squeezes one).
    dialog.resize(1024, 700)
    qtbot.waitUntil(lambda: dialog.grid_host.width() <= 1024, timeout=FINISH_MS)
    boxes = [cell.geometry() for cell in dialog.cells]
    assert all(not a.intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(cell.view.width() >= CELL_MIN.width() for cell in dialog.cells)
    assert all(cell.view.height() >= CELL_MIN.height() for cell in dialog.cells)

    # Linked zoom: zooming one image moves every other. Cells in a grid can differ by a screen
    # pixel in size and the aspect lock widens a range by that much: measured 0.08 image pixels
    # on a 30-pixel range; 0.5 still fails an unlinked view (it stays at the 128-pixel fit).
    dialog.cells[2].box.setRange(xRange=(10, 40), yRange=(10, 40), padding=0)
    (x0, x1), (y0, y1) = dialog.cells[2].box.viewRange()
    assert x1 - x0 < 64  # zoomed in (the fit spans the whole image)
    for cell in dialog.cells:
        (a0, a1), (b0, b1) = cell.box.viewRange()
        assert (a0, a1) == (pytest.approx(x0, abs=0.5), pytest.approx(x1, abs=0.5))
        assert (b0, b1) == (pytest.approx(y0, abs=0.5), pytest.approx(y1, abs=0.5))

    # A click on an image makes its threshold the current one and shows its result.
    cell = dialog.cells[3]  # t = 0.2
    viewport = cell.view.viewport()
    centre = QPoint(viewport.width() // 2, viewport.height() // 2)
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=centre)
    qtbot.waitUntil(lambda: window.comparer.picked == 2, timeout=FINISH_MS)
    assert window.form.threshold == pytest.approx(0.2)
    assert window.controls.threshold.value() == pytest.approx(0.2)
    assert window.run.gated_image is rows[2].image
    assert window.run.skips == rows[2].skips
    assert "✓ current" in cell.title.text()
    qtbot.mouseClick(dialog.cells[1].use_button, Qt.MouseButton.LeftButton)
    assert window.form.threshold == pytest.approx(0.05)

    # One history entry, which reopens as a comparison.
    entries = window.history.entries()
    assert len(entries) == 1 and is_comparison(entries[0])
    assert entry_summary(entries[0]).startswith("Comparison of 4 thresholds · demo")
    saved = load_comparison(entries[0])
    assert [r.threshold for r in saved.rows] == [0.05, 0.1, 0.2, 0.3]
    window.comparer.rows = []
    window.comparer.status = JobStatus.idle
    assert window.open_history_entry(entries[0])
    assert window.comparer.status is JobStatus.opened
    assert _filled(dialog) == 4
    assert [r.skips for r in window.comparer.rows if r] == [r.skips for r in rows]


def test_cancel_keeps_the_finished_entries(qtbot: QtBot, make_window: WindowFactory) -> None:
    gate = StepGate()
    engine = FakeEngine(step_gate=gate)
    window = make_window(engine)
    dialog = _dialog(window)
    dialog.thresholds.setText(THRESHOLDS)
    dialog.start()
    comparer = window.comparer

    def first_done() -> bool:  # on the engine's side: its first pass reported its result
        return any(isinstance(e, RunFinished) for e in engine.emitted)

    while not first_done():  # one step at a time, each taken before the next is allowed
        passed = gate.passed
        gate.release(1)
        qtbot.waitUntil(lambda p=passed: gate.passed > p or first_done(), timeout=FINISH_MS)
    # The engine now holds before the second threshold's first computed step.
    qtbot.waitUntil(lambda: comparer.rows[0] is not None, timeout=FINISH_MS)
    assert not window.controls.generate_button.isEnabled()  # the engine is busy comparing
    assert dialog.cancel_button.isEnabled()
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    gate.open()
    qtbot.waitUntil(lambda: comparer.status is JobStatus.cancelled, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: comparer.saved_entry is not None, timeout=FINISH_MS)
    assert sum(r is not None for r in comparer.rows) == 1
    assert _filled(dialog) == 1
    assert "1 of 4 thresholds finished" in dialog.status.text()
    saved = load_comparison(window.history.entries()[0])
    assert len(saved.rows) == 1 and saved.cancelled and len(saved.thresholds) == 4
    assert not window.host.busy and dialog.run_button.isEnabled()
    assert window.controls.generate_button.isEnabled()


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("0.1, 0.2", "Compare 4 to 8 thresholds, got 2 (for example 0.05, 0.1, 0.2, 0.3)."),
        ("0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9", "Compare 4 to 8 thresholds, got 9"),
        ("0.1, 0.2, 1.5, 0.3", "Threshold 1.5 is outside 0 to 1."),
        ("0.1, 0.2, 0.2, 0.3", "Threshold 0.2 appears twice; list each threshold once."),
        ("0.1, 0.2, abc, 0.3", "'abc' is not a number; write thresholds like 0.05, 0.1, 0.2"),
    ],
)
def test_a_bad_list_gets_one_sentence_and_starts_nothing(
    qtbot: QtBot, make_window: WindowFactory, text: str, sentence: str
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    dialog = _dialog(window)
    dialog.thresholds.setText(text)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    assert dialog.error.isVisibleTo(dialog) and dialog.error.text().startswith(sentence)
    assert "\n" not in dialog.error.text() and dialog.error.text().endswith(".")
    assert not window.host.busy and engine.requests == []
    assert window.comparer.status is JobStatus.idle


def test_defaults_follow_the_form(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window(FakeEngine())
    dialog = _dialog(window)
    window.form.threshold = 0.2
    qtbot.mouseClick(dialog.defaults_button, Qt.MouseButton.LeftButton)
    values = [float(v) for v in dialog.thresholds.text().split(",")]
    assert 4 <= len(values) <= 8 and 0.2 in values and len(set(values)) == len(values)


def test_defaults_follow_the_forms_gate(qtbot: QtBot, make_window: WindowFactory) -> None:
    from app.engine.comparison import default_thresholds
    from app.variants import get_variant

    window = make_window(FakeEngine())
    dialog = _dialog(window)
    qtbot.mouseClick(dialog.defaults_button, Qt.MouseButton.LeftButton)
    teacache = dialog.thresholds.text()
    window.form.select_gate("magcache")
    assert window.form.gate == "magcache"
    qtbot.mouseClick(dialog.defaults_button, Qt.MouseButton.LeftButton)
    values = tuple(float(v) for v in dialog.thresholds.text().split(","))
    # MagCache's own picks (exact from its table): each skips a different number of steps.
    demo = get_variant("demo")
    assert values == default_thresholds(
        demo, STEPS, around=float(window.form.threshold), gate="magcache"
    )
    assert dialog.thresholds.text() != teacache


def test_the_grid_keeps_images_as_large_as_the_window_allows() -> None:
    assert best_columns(7, 1572, 883) == 4  # 1600 × 1000: two rows of square-ish cells
    assert best_columns(7, 996, 570) == 4  # 1024 × 700
    assert best_columns(5, 2400, 400) == 5  # wide and low: one row
    assert best_columns(4, 400, 2000) == 1  # narrow and tall: one column


def test_picking_an_entry_waits_while_a_generate_runs(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """An entry picked during a Generate would overwrite the form and the result mid-run: refused
    with one sentence, nothing changed; once the run ends the same pick goes through."""
    gate = StepGate()
    gate.open()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _dialog(window)
    comparer = window.comparer
    dialog.thresholds.setText(THRESHOLDS)
    dialog.start()
    qtbot.waitUntil(lambda: comparer.status is JobStatus.finished, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: not window.host.busy, timeout=FINISH_MS)

    gate.hold()
    window.form.threshold = 0.15  # not one of the entries
    assert window.session.generate() is not None
    qtbot.waitUntil(lambda: gate.waiting_at is not None, timeout=FINISH_MS)
    assert window.run.busy
    shown = window.run.request
    qtbot.mouseClick(dialog.cells[3].use_button, Qt.MouseButton.LeftButton)  # t = 0.2
    assert comparer.picked is None
    assert comparer.message == "wait for the current run to finish before picking an entry"
    assert dialog.error.isVisibleTo(dialog) and dialog.error.text() == comparer.message
    assert window.form.threshold == pytest.approx(0.15)  # the form the run started from
    assert window.run.request is shown and window.run.busy

    gate.open()
    qtbot.waitUntil(lambda: not window.run.busy, timeout=FINISH_MS)
    qtbot.mouseClick(dialog.cells[3].use_button, Qt.MouseButton.LeftButton)
    assert comparer.picked == 2 and window.form.threshold == pytest.approx(0.2)


def test_an_entry_that_skipped_the_same_steps_names_the_first_such_threshold(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Two patterns alternating over five thresholds: each repeat names the *first* threshold
    with its pattern (0.05 or 0.1), not merely the entry before it."""
    import numpy as np

    from app.storage.comparisons import ComparisonRow

    window = make_window(FakeEngine())
    dialog = _dialog(window)
    comparer = window.comparer
    thresholds = (0.05, 0.1, 0.2, 0.3, 0.4)
    patterns = ("FCSCCCCCCF", "FCSCSCSCCF", "FCSCCCCCCF", "FCSCSCSCCF", "FCSCCCCCCF")
    image = np.zeros((128, 128, 3), np.uint8)
    comparer.base = window.form.request()
    comparer.thresholds = thresholds
    comparer.rows = [
        ComparisonRow(t, image, p.count("S"), STEPS, 0.99, 1.0, 2.0, 2.0, "measured", pattern=p)
        for t, p in zip(thresholds, patterns, strict=True)
    ]
    comparer.status = JobStatus.opened
    dialog.refresh()
    notes = [cell.stats.text().splitlines()[-1] for cell in dialog.cells[1:]]
    assert [n if n.startswith("same steps") else "" for n in notes] == [
        "",
        "",
        "same steps skipped as t = 0.05",
        "same steps skipped as t = 0.1",
        "same steps skipped as t = 0.05",
    ]


def test_the_first_defaults_are_each_a_threshold_that_can_skip(make_window: WindowFactory) -> None:
    """#27 item 21: before any run the defaults (demo, 28 steps) began at 0.025, which the
    calibration says cannot skip any step: a tile that teaches nothing."""
    from app.variants import check_schedule

    window = make_window(FakeEngine())
    assert window.form.variant_id == "demo" and window.form.steps == 28
    dialog = window.show_comparison()
    values = [float(v) for v in dialog.thresholds.text().split(",")]
    assert 4 <= len(values) <= 8
    variant = window.form.variant
    assert [check_schedule(variant, 28, t).can_skip for t in values] == [True] * len(values)
    assert float(window.form.threshold) in values


def test_a_tile_flags_one_spot_and_a_reopened_comparison_keeps_its_mark_and_notes(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 21: t=0.99 lost both circles (SSIM 0.837) with no flag on its tile; a comparison
    reopened from the History lost its "✓ current" mark and its note on a threshold that cannot
    skip."""
    from app.ui.plain_words import LOCAL_VISIBLE

    engine = FakeEngine(FakeScript(spot_after_skips=6))
    window = make_window(engine)
    dialog = _dialog(window)
    dialog.thresholds.setText("0.001, 0.1, 0.3, 0.99")  # 0.001: below the calibration's floor
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=FINISH_MS)
    comparer = window.comparer
    rows = [r for r in comparer.rows if r is not None]
    spots = [r.local_diff is not None and r.local_diff > LOCAL_VISIBLE for r in rows]
    assert True in spots and False in spots, [(r.skips, r.local_diff) for r in rows]
    for cell, spot in zip(dialog.cells[1:], spots, strict=True):
        flagged = "one spot differs" in cell.stats.text()
        assert flagged is spot, cell.stats.text()
    note = next(w for w in comparer.warnings if "0.001" in w)
    assert note in dialog.about.text()

    comparer.pick(2)  # t = 0.3
    assert "✓ current" in dialog.cells[3].title.text()
    [entry] = window.history.entries()
    window.form.threshold = 0.5  # the user moves on; later reopens the comparison
    assert window.open_history_entry(entry)
    assert comparer.status is JobStatus.opened
    shown = window.run.request
    assert shown is not None
    current = [i for i, t in enumerate(comparer.thresholds) if t == shown.threshold]
    assert current and comparer.picked == current[0]  # the entry the main window shows
    titles = [cell.title.text() for cell in dialog.cells[1:]]
    assert ["✓ current" in t for t in titles] == [i == current[0] for i in range(len(titles))]
    assert note in comparer.warnings and note in dialog.about.text()
    flagged = ["one spot differs" in cell.stats.text() for cell in dialog.cells[1:]]
    assert flagged == spots  # the flag survives the history


def test_two_different_warnings_of_one_kind_both_reach_the_view_and_the_saved_comparison(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Two passes warn with one kind in other words: both notes are shown, saved and reopened (a
    warning is the same one again only when its words are)."""
    first, second = RunWarning(0, "note", "first words"), RunWarning(0, "note", "other words")
    engine = FakeEngine(scripts=[FakeScript(warnings=(first,)), FakeScript(warnings=(second,))])
    window = make_window(engine)
    dialog = _dialog(window)
    dialog.thresholds.setText(THRESHOLDS)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: not window.host.busy, timeout=FINISH_MS)  # reopening waits for it
    comparer = window.comparer
    assert {"first words", "other words"} <= set(comparer.warnings)
    assert "first words" in dialog.about.text() and "other words" in dialog.about.text()
    [entry] = window.history.entries()
    assert {"first words", "other words"} <= set(entry.warning_messages)
    comparer.warnings = []
    assert window.open_history_entry(entry)
    assert {"first words", "other words"} <= set(comparer.warnings)


def test_current_marks_the_tile_the_main_window_shows_and_no_other(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Walk #39 item 10: a reopened comparison kept "✓ current" on the tile picked in it after the
    main window had moved on (a Generate at another threshold, another run reopened), so it
    marked a tile whose result was not the one on screen."""
    window = make_window(FakeEngine())
    dialog = _dialog(window)
    dialog.thresholds.setText(THRESHOLDS)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: not window.host.busy, timeout=FINISH_MS)  # reopening waits for it
    comparer = window.comparer
    [entry] = window.history.entries()

    def marked() -> list[bool]:
        return ["✓ current" in cell.title.text() for cell in dialog.cells[1:]]

    assert window.open_history_entry(entry)
    shown = window.run.request
    assert shown is not None
    at = comparer.thresholds.index(shown.threshold)
    assert marked() == [i == at for i in range(4)]
    comparer.pick(2)  # t = 0.2
    assert marked() == [False, False, True, False]

    window.form.threshold = 0.15  # the user moves on and generates
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert comparer.picked is None and marked() == [False] * 4

    run_entry = next(e for e in window.history.entries() if not is_comparison(e))
    assert window.open_history_entry(run_entry)  # another run reopened
    assert comparer.picked is None and marked() == [False] * 4

    assert window.open_history_entry(entry)  # the comparison again: its shown entry
    assert marked() == [i == at for i in range(4)]
