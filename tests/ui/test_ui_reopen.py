"""A run or a comparison reopened from the History comes back as it ran: its gate, that gate's
threshold and the calibration it ran on (every kind in the registry), and the gate plot's band of
where skipping begins drawn from its own vanilla trace, not from the run the session showed last.
Through the window's public reopen path (``MainWindow.open_history_entry``) on the scripted fake
engine, so the history's file format may change under it."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.engine.calibration import Calibrate
from app.engine.jobs import run_job
from app.engine.request import GenerationRequest, make_request
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.gate.kinds import GATE_KINDS, GATES, gate_kind
from app.storage.comparisons import is_comparison
from app.ui.analysis import engagement_band
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow
from app.variants import get_variant
from tests.fakes.engine import FakeEngine

STEPS = 8
CALIBRATED = "demo+mine"  # a user calibration: numbers of its own for every kind that has any
RAN_AT = 0.07  # no kind's default on it, so the reopened threshold is the run's own
MOVED_TO = 0.33
COMPARED = "0.03, 0.07, 0.12, 0.2"
# A comparison on the fake takes well under a second; the bound is for a 2-core machine shared by
# many, where 15 s ran out (as in test_ui_threshold_compare.py).
FINISH_MS = 60_000


def _calibrate() -> None:
    """``demo+mine``, measured on the fake engine by the one job runner (as the window's
    Calibrate This Model… and the command line do)."""
    request = make_request("demo", "a red circle", seed=3, steps=STEPS)
    job = Calibrate(request, "mine", tuple(DEMO_PROMPTS[:4]))
    events: list[object] = []
    run_job(FakeEngine(), 1, job, events.append, threading.Event())
    assert get_variant(CALIBRATED).id == CALIBRATED, events[-1]


def _select(window: MainWindow, gate: str) -> None:
    form = window.form
    form.select_variant(CALIBRATED)
    form.steps = STEPS
    form.select_gate(gate)
    assert form.variant_id == CALIBRATED and form.gate == gate
    form.threshold = RAN_AT


def _move_away(window: MainWindow, gate: str) -> None:
    """The user goes on: another model, another gate, another threshold."""
    form = window.form
    form.select_variant("demo")
    other = next(g for g in GATES if g != gate and form.variant.gate_unavailable_reason(g) is None)
    form.select_gate(other)
    form.threshold = MOVED_TO
    assert (form.variant_id, form.gate, form.threshold) == ("demo", other, MOVED_TO)


def _assert_restored(window: MainWindow, gate: str, ran: GenerationRequest) -> None:
    kind = gate_kind(gate)
    form = window.form
    assert (form.variant_id, form.gate, form.threshold) == (CALIBRATED, gate, ran.threshold)
    assert kind.calibration_of(form.variant) == kind.calibration_of(get_variant(CALIBRATED))
    assert form.request().gate_params() == ran.gate_params()  # what a Generate would run now
    shown = window.run.request
    assert shown is not None
    assert (shown.variant_id, shown.gate, shown.threshold) == (CALIBRATED, gate, ran.threshold)
    assert shown.gate_params() == ran.gate_params()


@pytest.mark.parametrize("gate", list(GATE_KINDS))
def test_a_reopened_run_restores_its_gate_threshold_and_calibration(
    qtbot: QtBot, make_window: WindowFactory, gate: str
) -> None:
    _calibrate()
    window = make_window(FakeEngine())
    _select(window, gate)
    assert run_to_end(qtbot, window) is JobStatus.finished
    ran = window.run.request
    assert ran is not None and ran.gate == gate
    [entry] = window.history.entries()
    _move_away(window, gate)
    assert window.open_history_entry(entry)
    _assert_restored(window, gate, ran)


@pytest.mark.parametrize("gate", list(GATE_KINDS))
def test_a_reopened_comparison_restores_its_gate_thresholds_and_calibration(
    qtbot: QtBot, make_window: WindowFactory, gate: str
) -> None:
    _calibrate()
    window = make_window(FakeEngine())
    _select(window, gate)
    dialog = window.show_comparison()
    dialog.thresholds.setText(COMPARED)
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=FINISH_MS)
    qtbot.waitUntil(lambda: not window.host.busy, timeout=FINISH_MS)  # reopening waits for it
    comparer = window.comparer
    ran = comparer.base
    assert ran is not None and ran.gate == gate
    asked = comparer.thresholds
    rows = [r for r in comparer.rows if r is not None]
    [entry] = window.history.entries()
    assert is_comparison(entry)
    _move_away(window, gate)
    comparer.status = JobStatus.idle
    assert window.open_history_entry(entry)
    assert comparer.status is JobStatus.opened
    _assert_restored(window, gate, ran)
    base = comparer.base
    assert base is not None and (base.variant_id, base.gate) == (CALIBRATED, gate)
    assert base.gate_params() == ran.gate_params()
    assert comparer.thresholds == asked
    reopened = [r for r in comparer.rows if r is not None]
    assert [r.threshold for r in reopened] == [r.threshold for r in rows]
    assert [r.skips for r in reopened] == [r.skips for r in rows]


def test_a_reopened_run_shows_its_own_band_not_the_last_live_one(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Two runs of one model and step count on different gates and seeds; the second's band is
    on screen when the first is reopened: the band must be the first's, from its own trace."""
    window = make_window(FakeEngine())
    form = window.form
    form.select_variant("demo")
    form.steps = STEPS
    first_gate, second_gate = GATES[0], GATES[1]
    form.select_gate(first_gate)
    form.seed = 1
    assert run_to_end(qtbot, window) is JobStatus.finished
    first_band = window.run.band
    assert first_band is not None and first_band.gate == first_gate
    form.select_gate(second_gate)
    form.seed = 2
    assert run_to_end(qtbot, window) is JobStatus.finished
    live_band = window.run.band
    assert live_band is not None and live_band != first_band

    first = next(e for e in window.history.entries() if e.request.seed == 1)
    assert window.open_history_entry(first)
    report = window.run.report
    assert report is not None and report.vanilla is not None
    own = engagement_band(
        report.request.variant, report.request.threshold, report.vanilla.steps, first_gate
    )
    assert window.run.band == own == first_band
    assert window.gate_advice.gate_plot_data().band == own  # what the gate plot draws
