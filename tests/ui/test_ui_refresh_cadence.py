"""The step timeline repaints at a run cadence, not once per step, and shows the end at once."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

import app.ui.refresh as refresh_module
from app.engine.events import Pass, StepDone
from app.ui.job_slot import JobStatus
from tests.fakes.engine import FakeEngine


def test_the_timeline_follows_its_run_cadence_and_paints_the_final_state_at_once(
    qtbot: QtBot, make_window: WindowFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cadence far longer than the run: every repaint during it but the first must wait.
    monkeypatch.setitem(refresh_module.SLOW_REFRESHES, "timeline", 60_000)
    engine = FakeEngine()
    window = make_window(engine)
    busy_at_paint: list[bool] = []
    set_rows = window.timeline.set_rows

    def counting_set_rows(*args: object, **kwargs: object) -> None:
        busy_at_paint.append(window.run.busy)
        set_rows(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(window.timeline, "set_rows", counting_set_rows)
    assert run_to_end(qtbot, window) is JobStatus.finished
    steps = [e for e in engine.emitted if isinstance(e, StepDone)]
    assert len(steps) == 2 * window.form.steps  # both passes ran: 56 step events …
    assert sum(busy_at_paint) <= 1  # … and at most one timeline repaint during the run
    assert busy_at_paint[-1] is False  # the final state, painted as the run ended
    gated = [e.step for e in steps if e.which is Pass.gated]
    assert window.timeline.pattern() == "".join(s.decision.letter for s in gated)
    assert window.timeline.filled() == window.form.steps
    assert all(s is not None for s in window.timeline.vanilla)


def test_outside_a_run_the_timeline_follows_the_model_at_once(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window(FakeEngine())
    assert run_to_end(qtbot, window) is JobStatus.finished
    window.run.gated_steps = (None,) * 3  # no run going: no cadence, no waiting for a timer
    assert window.timeline.pattern() == "···"
