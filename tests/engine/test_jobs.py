"""The one job runner (``app.engine.jobs``) on the scripted fake engine: every kind of job runs on
it with exactly one terminal event, a target search included (the real engine's search on the demo:
``tests/engine/test_target.py``; the comparison's cancel and failure paths:
``tests/engine/test_engine_comparison.py``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.engine import events as ev
from app.engine.calibration import Calibrate
from app.engine.comparison import ThresholdComparison
from app.engine.jobs import Generate, Job, ThresholdSweep, run_job
from app.engine.request import QualityTarget, make_request
from app.engine.target import QualitySearch, candidates
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.gate.kinds import TEACACHE_KIND
from tests.fakes.engine import FakeEngine, FakeFailure, FakeScript
from tests.fakes.params import teacache_params

PROMPT = "a red circle on a blue background"
TERMINAL = (
    ev.RunFinished,
    ev.RunCancelled,
    ev.RunFailed,
    ev.ComparisonFinished,
    ev.SweepFinished,
    ev.CalibrationFinished,
)


def _request(threshold: float = 0.1, steps: int = 28, variant: str = "demo") -> Any:
    return make_request(variant, PROMPT, seed=3, steps=steps, threshold=threshold)


def _run(engine: FakeEngine, job: Job, cancel: threading.Event | None = None) -> list[Any]:
    events: list[Any] = []
    run_job(engine, 7, job, events.append, cancel or threading.Event())
    return events


JOBS = {
    "generate": Generate(_request()),
    "comparison": ThresholdComparison(_request(), (0.05, 0.1, 0.2, 0.3)),
    "search": QualitySearch(_request(), QualityTarget()),
    "sweep": ThresholdSweep(_request(), (0.0, 0.2, 0.05)),
}
ENDS = {
    "generate": ev.RunFinished,
    "comparison": ev.ComparisonFinished,
    "search": ev.RunFinished,
    "sweep": ev.SweepFinished,
}


@pytest.mark.parametrize("kind", JOBS)
def test_every_kind_of_job_runs_on_the_fake_with_one_terminal_event(kind: str) -> None:
    engine = FakeEngine()
    events = _run(engine, JOBS[kind])
    assert sum(isinstance(e, TERMINAL) for e in events) == 1
    assert isinstance(events[-1], ENDS[kind])
    assert all(e.run_id == 7 for e in events if hasattr(e, "run_id"))
    # One vanilla for every pass of the job, computed once and resumed from after that.
    vanilla = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla]
    assert [e.cached for e in vanilla] == [False] + [True] * (len(engine.requests) - 1)


def test_a_calibration_runs_on_the_fake_with_one_terminal_event() -> None:
    """One fresh vanilla per prompt, each with a gated pass resumed from it; then the threshold
    trials, every one resumed from its prompt's vanilla, kept (under the calibration's own key);
    the job's own progress and terminal events (``tests/engine/test_calibration.py`` has the
    rest)."""
    engine = FakeEngine()
    job = Calibrate(_request(0.0, steps=8), "jobs", DEMO_PROMPTS[:3])
    events = _run(engine, job)
    assert sum(isinstance(e, TERMINAL) for e in events) == 1
    assert isinstance(events[-1], ev.CalibrationFinished)
    assert all(e.run_id == 7 for e in events if hasattr(e, "run_id"))
    vanilla = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla]
    trials = len(engine.requests) - 3
    assert trials > 0 and [e.cached for e in vanilla] == [False] * 3 + [True] * trials
    assert [e.done for e in events if isinstance(e, ev.CalibrationProgress)] == [1, 2, 3]
    done = [e.done for e in events if isinstance(e, ev.CalibrationTrials) and e.trial]
    assert done == list(range(1, trials + 1))


def test_a_sweep_runs_its_thresholds_in_the_given_order() -> None:
    events = _run(FakeEngine(), JOBS["sweep"])
    entries = [e for e in events if isinstance(e, ev.SweepEntryDone)]
    assert [e.index for e in entries] == [0, 1, 2]
    assert [e.report.request.threshold for e in entries] == [0.0, 0.2, 0.05]
    assert entries[0].report.gated.skipped == 0 < entries[1].report.gated.skipped  # engagement
    finished = events[-1]
    assert finished.reports == tuple(e.report for e in entries) and not finished.cancelled


def test_a_target_search_runs_on_the_fake_engine() -> None:
    target = QualityTarget()
    search_job = QualitySearch(_request(0.1), target)
    events = _run(FakeEngine(), search_job)
    report = events[-1].report
    search = report.target_search
    assert search is not None and search.complete and search.met, search and search.note
    probes = search.probes
    assert [e.probe for e in events if isinstance(e, ev.TargetProbed)] == list(probes)
    assert probes[0].threshold == 0.1 and probes[0].predicted_skipped is None
    assert 2 <= len(probes) <= target.max_passes
    # Every later pass checks one of the simulator's candidates on the first pass's vanilla
    # trace; the fake gates by the simulator, so each skips exactly what was predicted.
    vanilla = [e for e in events if isinstance(e, ev.PassFinished) and e.which is ev.Pass.vanilla]
    trace = TEACACHE_KIND.trace(vanilla[0].steps)
    params = teacache_params(search_job.request.variant, 0.1)
    planned = {c.threshold for c in candidates(params, trace)}
    assert all(p.threshold in planned and p.skipped == p.predicted_skipped for p in probes[1:])
    # The result is the met pass with the most skips, shown as the run's own report.
    best = max((p for p in probes if p.met), key=lambda p: (p.skipped, p.ssim or 0.0))
    assert search.chosen_threshold == best.threshold and report.gated.skipped == best.skipped > 0
    assert report.request.threshold == best.threshold and report.ssim == best.ssim
    assert report.ssim is not None and report.ssim >= target.min_ssim


@pytest.mark.parametrize("start", [0.0488, 0.1])
def test_the_first_pass_narrows_the_search_to_its_side(start: float) -> None:
    """Where the first pass met the target, only thresholds above it are left to try; where it
    missed, only thresholds below it (the first pass's narrowing; the README's 5 passes depend on
    it)."""
    search = _run(FakeEngine(), QualitySearch(_request(start), QualityTarget()))[-1].report
    probes = search.target_search.probes
    first = probes[0]
    assert first.skipped > 0  # the first pass skipped: it narrows
    later = [p.threshold for p in probes[1:]]
    assert later, "the search tried no candidate"
    if first.met:
        assert all(t > start for t in later), later
    else:
        assert all(t < start for t in later), later
    assert {0.0488: True, 0.1: False}[start] == first.met  # both sides are covered


def test_a_search_forwards_each_warning_once() -> None:
    """A distilled schedule warns on every pass; the runner forwards each warning once."""
    events = _run(
        FakeEngine(), QualitySearch(_request(0.3, steps=4, variant="demo-turbo"), QualityTarget())
    )
    assert isinstance(events[-1], ev.RunFinished)
    search = events[-1].report.target_search
    assert search is not None and len(search.probes) > 1  # several passes repeated them
    warnings = [(e.kind, e.message) for e in events if isinstance(e, ev.RunWarning)]
    assert warnings and len(warnings) == len(set(warnings))


def test_two_different_warnings_of_one_kind_are_both_forwarded() -> None:
    """The runner forwards each warning once: the same kind and words again is a repeat, the same
    kind in other words is another warning (within one pass and from pass to pass)."""
    first, second = ev.RunWarning(0, "note", "first words"), ev.RunWarning(0, "note", "other words")
    generate = _run(FakeEngine(FakeScript(warnings=(first, second, first))), Generate(_request()))
    per_pass = [FakeScript(warnings=(first,)), FakeScript(warnings=(second, first))]
    comparison = _run(
        FakeEngine(scripts=per_pass), ThresholdComparison(_request(), (0.05, 0.1, 0.2, 0.3))
    )
    for events in (generate, comparison):
        notes = [e.message for e in events if isinstance(e, ev.RunWarning) and e.kind == "note"]
        assert notes == ["first words", "other words"]


def test_a_generate_ends_as_its_pass_ended() -> None:
    cancel = threading.Event()
    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        if isinstance(event, ev.StepDone) and event.step.index == 2:
            cancel.set()

    assert run_job(FakeEngine(), 4, Generate(_request()), emit, cancel) is None
    assert isinstance(events[-1], ev.RunCancelled) and events[-1].at_step == 3  # the engine's own
    failing = FakeEngine(FakeScript(failure=FakeFailure("out of sand", ev.Pass.gated, 1)))
    events = _run(failing, Generate(_request()))
    assert isinstance(events[-1], ev.RunFailed) and events[-1].message == "out of sand"


def test_a_job_never_raises_an_error_out_of_the_runner() -> None:
    broken = FakeEngine(FakeScript(failure=FakeFailure("kaboom", raise_instead=True)))
    events = _run(broken, QualitySearch(_request(), QualityTarget()))
    assert len(events) == 1 and isinstance(events[0], ev.RunFailed)
    assert events[0].message == "generation failed: kaboom" and "Traceback" in events[0].details
