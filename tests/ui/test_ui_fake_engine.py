"""The fake engine keeps the engine protocol, so UI tests against it mean something."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from app.engine.events import (
    EngineEvent,
    LoadProgress,
    ModelReady,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
    StepDone,
)
from app.engine.request import make_request
from app.gate import Decision
from tests.fakes.engine import FakeEngine, FakeFailure, FakeScript, StepGate, minimal_report
from tests.fakes.params import teacache_params

TERMINAL = (RunFinished, RunCancelled, RunFailed)


def run(
    engine: FakeEngine, request, cancel: threading.Event | None = None, run_id: int = 1
) -> list[EngineEvent]:
    events: list[EngineEvent] = []
    engine.run(run_id, request, events.append, cancel or threading.Event())
    return events


def kinds(events: list[EngineEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_event_order_and_exactly_one_terminal_event() -> None:
    request = make_request("demo", "a red star", steps=10)
    events = run(FakeEngine(), request)
    assert isinstance(events[0], LoadProgress) and isinstance(events[1], ModelReady)
    assert isinstance(events[-1], RunFinished)
    assert sum(isinstance(e, TERMINAL) for e in events) == 1
    started = [e for e in events if isinstance(e, PassStarted)]
    assert [e.which for e in started] == [Pass.vanilla, Pass.gated]
    for which in Pass:
        steps = [e.step.index for e in events if isinstance(e, StepDone) and e.which is which]
        assert steps == list(range(10))
    finished = [e for e in events if isinstance(e, PassFinished)]
    assert all(e.image.dtype == np.uint8 and e.image.flags.c_contiguous for e in finished)
    assert finished[0].image.shape == (128, 128, 3)


def test_gated_decisions_follow_the_gate_rule_on_the_trace() -> None:
    request = make_request("demo", "a red star", steps=8, threshold=0.1)
    # Signal changes where the shipped fit predicts its least and its most change (the fit under
    # CFG is not monotone), alternated so the expected decisions follow by hand from the rule:
    # a step skips when the change accumulated since the last compute stays under the threshold.
    params = teacache_params(request.variant, 0.1)
    assert params.calibrated_range is not None
    assert (params.skip_first, params.skip_last) == (1, 1)
    grid = np.linspace(*params.calibrated_range, 200)
    predicted = np.polyval(params.coefficients, grid)
    low, high = float(grid[predicted.argmin()]), float(grid[predicted.argmax()])
    # Shipped fit: 0.029 and 0.173. A low step alone stays under 0.1 and skips; a high step,
    # alone or after a skipped low one, reaches 0.1 and computes.
    assert np.polyval(params.coefficients, low) < 0.1 <= np.polyval(params.coefficients, high)
    trace = (None, high, low, high, low, high, low, high)
    events = run(FakeEngine(FakeScript(trace=trace)), request)
    gated = [e.step for e in events if isinstance(e, StepDone) and e.which is Pass.gated]
    # Step 0 and the last step are forced; high computes, low skips, high computes, ...
    assert "".join(s.decision.letter for s in gated) == "FCSCSCSF"


def test_vanilla_is_cached_per_vanilla_key() -> None:
    engine = FakeEngine()
    request = make_request("demo", "a red star", steps=8)
    run(engine, request)
    again = run(engine, request.with_threshold(0.2), run_id=2)
    vanilla_started = [e for e in again if isinstance(e, PassStarted) and e.which is Pass.vanilla]
    assert vanilla_started and vanilla_started[0].cached
    assert not [e for e in again if isinstance(e, StepDone) and e.which is Pass.vanilla]
    other_seed = run(engine, replace(request, seed=1), run_id=3)
    assert not [e for e in other_seed if isinstance(e, PassStarted) and e.cached]


def test_cancel_takes_effect_within_one_step() -> None:
    gate = StepGate()
    engine = FakeEngine(step_gate=gate)
    cancel = threading.Event()
    events: list[EngineEvent] = []
    thread = threading.Thread(
        target=engine.run,
        args=(1, make_request("demo", "a red star", steps=10), events.append, cancel),
    )
    thread.start()
    gate.release(3)
    while gate.passed < 3 or gate.waiting_at is None:
        threading.Event().wait(0.001)
    cancel.set()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(events[-1], RunCancelled) and events[-1].at_step == 3
    assert len([e for e in events if isinstance(e, StepDone)]) == 3


def test_scripted_failures() -> None:
    request = make_request("demo", "a red star", steps=6)
    at_step = FakeEngine(FakeScript(failure=FakeFailure("boom", Pass.gated, 2)))
    events = run(at_step, request)
    assert isinstance(events[-1], RunFailed) and events[-1].message == "boom"
    loading = run(FakeEngine(FakeScript(failure=FakeFailure("no weights"))), request)
    assert kinds(loading) == ["LoadProgress", "RunFailed"]


def test_replayed_script_rewrites_the_run_id() -> None:
    finished = RunFinished(0, minimal_report())
    scripted = FakeScript(events=[RunWarning(0, "custom", "hello"), finished])
    events = run(FakeEngine(scripted), make_request("demo", "a red star"), run_id=9)
    assert [e.run_id for e in events] == [9, 9]  # type: ignore[union-attr]


def test_distilled_schedules_warn_with_numbers() -> None:
    # FLUX.2 Klein 4B at its 4 distilled steps: calibration says nothing predicts below 0.261.
    events = run(FakeEngine(), make_request("flux2-klein-4b", "a red star", threshold=0.17))
    warnings = {e.kind: e for e in events if isinstance(e, RunWarning)}
    assert set(warnings) == {"distilled", "engagement"}
    assert warnings["distilled"].details["eligible_steps"] == 2
    assert warnings["distilled"].details["can_skip"] is False
    onset = warnings["engagement"].details["onset_threshold"]
    assert isinstance(onset, float) and onset > 0.17
    skipped = [e for e in events if isinstance(e, StepDone) and e.step.decision is Decision.skipped]
    assert skipped == []  # zero skips on purpose: the distilled schedule cannot engage


def test_records_requests_and_threads() -> None:
    engine = FakeEngine()
    request = make_request("demo", "a red star", steps=4)
    run(engine, request)
    assert engine.requests == [request]
    assert engine.run_threads == [threading.get_ident()]
