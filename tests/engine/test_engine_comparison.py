"""Compare thresholds on the real engine and the embedded demo model (tiny, float32, CPU).

Oracle: paired same-process runs. A gated pass resumed from the vanilla trajectory is bit-exact
with a full gated pass by design (``test_engine.py`` proves it per family), so every entry of a
comparison must have the same final-latent SHA-256 as a separate, non-resumed run at its threshold.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.engine import events as ev
from app.engine.comparison import ThresholdComparison
from app.engine.engine import Engine
from app.engine.jobs import run_job, run_resumed_passes
from app.engine.request import make_request
from tests.fakes.engine import FakeEngine

PROMPT = "a red circle on a blue background"
STEPS = 12
THRESHOLDS = (0.05, 0.1, 0.2, 0.3)


def _base(threshold: float = 0.1, **kw: Any) -> Any:
    return make_request("demo", PROMPT, seed=7, steps=STEPS, threshold=threshold, **kw)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine()


def test_comparison_computes_vanilla_once_and_each_entry_equals_a_separate_run(
    engine: Engine,
) -> None:
    engine.close()  # no vanilla cached from another test
    seen: list[Any] = []
    comparison = ThresholdComparison(_base(), THRESHOLDS)
    result = run_job(engine, 5, comparison, seen.append, threading.Event())

    assert result is not None and result.complete and not result.cancelled
    vanilla_starts = [
        e for e in seen if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla
    ]
    assert [e.cached for e in vanilla_starts] == [False, True, True, True]  # computed once
    gated_starts = [e for e in seen if isinstance(e, ev.PassStarted) and e.which is ev.Pass.gated]
    assert len(gated_starts) == 4 and all(e.resumed_from is not None for e in gated_starts)
    entries = [e for e in seen if isinstance(e, ev.ComparisonEntryDone)]
    assert [e.index for e in entries] == [0, 1, 2, 3]
    assert isinstance(seen[-1], ev.ComparisonFinished) and seen[-1].result is result
    assert not any(isinstance(e, ev.RunFinished) for e in seen)  # one run, one terminal event
    assert all(e.run_id == 5 for e in seen if hasattr(e, "run_id"))

    reports = result.reports
    assert [r.request.threshold for r in reports] == list(THRESHOLDS)
    assert max(r.gated.skipped for r in reports) > 0  # engagement
    skips = [r.gated.skipped for r in reports]
    assert skips == sorted(skips)  # a looser threshold never skips less on one trajectory
    for report in reports:
        # Labelled as any resumed run is: the first entry's vanilla was measured in this run,
        # the others reuse it from the cache and say so.
        assert report.speedup_label == report.speedup_label.strip() and report.speedup_label
    assert reports[0].vanilla is not None and not reports[0].vanilla_cached
    assert all(r.vanilla_cached for r in reports[1:])
    vanilla_digest = reports[0].vanilla.latents_sha256
    assert all(
        r.vanilla is not None and r.vanilla.latents_sha256 == vanilla_digest for r in reports
    )

    for report in reports:
        separate: list[Any] = []
        request = _base(report.request.threshold, resume=False)
        engine.run(9, request, separate.append, threading.Event())
        full = separate[-1]
        assert isinstance(full, ev.RunFinished), full
        assert full.report.gated.resumed_from is None  # a full gated pass
        assert full.report.gated.pattern == report.gated.pattern
        assert full.report.gated.latents_sha256 == report.gated.latents_sha256


def test_cancel_after_two_entries_keeps_both(engine: Engine) -> None:
    cancel = threading.Event()
    seen: list[Any] = []

    def emit(event: Any) -> None:
        seen.append(event)
        if isinstance(event, ev.ComparisonEntryDone) and event.index == 1:
            cancel.set()

    result = run_job(engine, 3, ThresholdComparison(_base(), THRESHOLDS), emit, cancel)
    assert result is not None and result.cancelled and not result.complete
    assert [r.request.threshold for r in result.reports] == list(THRESHOLDS[:2])
    assert isinstance(seen[-1], ev.ComparisonFinished)
    gated = [e for e in seen if isinstance(e, ev.PassStarted) and e.which is ev.Pass.gated]
    assert len(gated) == 2  # the third pass never started


def test_cancel_during_the_first_entry_is_a_plain_cancel(engine: Engine) -> None:
    engine.close()
    cancel = threading.Event()
    seen: list[Any] = []

    def emit(event: Any) -> None:
        seen.append(event)
        if isinstance(event, ev.StepDone) and event.step.index == 2:
            cancel.set()

    result = run_job(engine, 4, ThresholdComparison(_base(), THRESHOLDS), emit, cancel)
    assert result is None
    assert isinstance(seen[-1], ev.RunCancelled)
    assert not any(isinstance(e, ev.ComparisonEntryDone | ev.ComparisonFinished) for e in seen)


def test_a_cancel_after_the_last_entry_leaves_the_comparison_complete() -> None:
    """Cancel pressed as the last entry finishes: nothing was stopped, so nothing is labelled
    cancelled (the window, the history and ``compare`` all read ``cancelled`` from here)."""
    cancel = threading.Event()
    seen: list[Any] = []

    def emit(event: Any) -> None:
        seen.append(event)
        if isinstance(event, ev.ComparisonEntryDone) and event.index == len(THRESHOLDS) - 1:
            cancel.set()

    engine = FakeEngine()
    result = run_job(engine, 2, ThresholdComparison(_base(), THRESHOLDS), emit, cancel)
    assert cancel.is_set()
    assert result is not None and result.complete and not result.cancelled
    assert [r.request.threshold for r in result.reports] == list(THRESHOLDS)
    assert isinstance(seen[-1], ev.ComparisonFinished) and not seen[-1].result.cancelled
    assert len(engine.requests) == len(THRESHOLDS)


def test_a_failing_pass_keeps_the_finished_entries() -> None:
    calls: list[float] = []

    class FailsOnThird:
        def run(self, run_id: int, request: Any, emit: Any, cancel: Any) -> None:
            calls.append(request.threshold)
            if len(calls) == 3:
                emit(ev.RunFailed(run_id, "out of memory: try a smaller size", "trace"))
                return
            emit(ev.RunWarning(run_id, "schedule", "same notice every pass"))
            emit(ev.RunFinished(run_id, _fake_report(request)))

        def close(self) -> None: ...

    seen: list[Any] = []
    result = run_job(
        FailsOnThird(), 1, ThresholdComparison(_base(), THRESHOLDS), seen.append, threading.Event()
    )
    assert result is not None and result.failure == "out of memory: try a smaller size"
    assert len(result.reports) == 2 and not result.cancelled
    assert sum(isinstance(e, ev.RunWarning) for e in seen) == 1  # forwarded once
    assert calls == list(THRESHOLDS[:3])


def test_a_plan_sees_the_reports_before_it() -> None:
    """The runner's plan can choose each request from the results so far (a target search)."""
    seen_counts: list[int] = []

    class Echo:
        def run(self, run_id: int, request: Any, emit: Any, cancel: Any) -> None:
            emit(ev.RunFinished(run_id, _fake_report(request)))

        def close(self) -> None: ...

    def plan(done: Any) -> Any:
        seen_counts.append(len(done))
        return _base(0.1 * (len(done) + 1), resume=True) if len(done) < 3 else None

    outcome = run_resumed_passes(Echo(), 1, plan, lambda _e: None, threading.Event())
    assert seen_counts == [0, 1, 2, 3]
    assert [round(r.request.threshold, 3) for r in outcome.reports] == [0.1, 0.2, 0.3]


def _fake_report(request: Any) -> Any:
    import numpy as np

    from app.engine.report import PassResult, RunReport

    image = np.zeros((8, 8, 3), np.uint8)
    return RunReport(request, PassResult(image, (), 0.1), PassResult(image, (), 0.2))
