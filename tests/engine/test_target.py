"""The target-quality search (``app.engine.target``): the simulator's candidates, and the search
on the demo through the one job runner and the real engine (resumed passes, measured SSIM and
local difference). The same search on the scripted fake engine: ``tests/engine/test_jobs.py``."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.engine.engine import Engine
from app.engine.events import RunCancelled, RunFinished, TargetProbed
from app.engine.jobs import run_job
from app.engine.report import RunReport
from app.engine.request import QualityTarget, make_request
from app.engine.target import QualitySearch, candidates
from app.gate import simulate
from app.gate.simulator import pattern
from app.variants import get_variant
from lab.target import readme_examples
from tests.fakes.params import teacache_params

# The case: at threshold 0.1 the demo loses one red circle (measured 2026-12-01 on this
# build: SSIM 0.938, worst-window difference 0.83, 10 of 28 steps skipped).
LOST_CIRCLE = "two red circles and a blue star on a yellow background"
LOST_CIRCLE_SEED = 701103987


def _run(engine: Engine, search: QualitySearch, cancel_after: int | None = None) -> list[Any]:
    events: list[Any] = []
    cancel = threading.Event()

    def emit(event: Any) -> None:
        events.append(event)
        if isinstance(event, TargetProbed) and event.index + 1 == cancel_after:
            cancel.set()

    run_job(engine, 1, search, emit, cancel)
    return events


def _is_the_readme_example(search: Any, gate: str) -> None:
    """The README's example of this search (``lab.target.readme_examples``, the same request
    through the CLI) is this search: the same passes, thresholds and patterns, and the measured
    figures equal at the 4 decimals the README prints (drift there shows in the README)."""
    tried = readme_examples.load(gate)["report"]["target_search"]
    assert [(p.threshold, p.skipped, p.pattern, p.met) for p in search.probes] == [
        (t["threshold"], t["skipped"], t["pattern"], t["met"]) for t in tried
    ]
    shown = 5e-5  # half a unit of the README's last decimal
    assert [p.ssim for p in search.probes] == pytest.approx([t["ssim"] for t in tried], abs=shown)
    assert [p.local_diff for p in search.probes] == pytest.approx(
        [t["local_diff"] for t in tried], abs=shown
    )


def _report(events: list[Any]) -> RunReport:
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert len(finished) == 1, events[-1]
    return finished[0].report


def test_candidates_visit_every_simulated_pattern_once_in_threshold_order() -> None:
    rng = np.random.default_rng(3)
    trace: list[float | None] = [None, *rng.uniform(0.01, 0.4, 27).tolist()]
    params = teacache_params(get_variant("demo"), 0.1)
    found = candidates(params, trace)
    assert len(found) > 3
    thresholds = [c.threshold for c in found]
    assert thresholds == sorted(thresholds) and len(set(c.pattern for c in found)) == len(found)
    for c in found:  # each tried threshold lies in its interval and gives its pattern
        assert c.low < c.threshold <= c.high and c.threshold == round(c.threshold, 4)
        assert pattern(simulate(replace(params, rel_l1_thresh=c.threshold), trace)) == c.pattern
        assert c.predicted_skipped == c.pattern.count("S") > 0
    # A dense grid finds no skipping pattern the candidates miss.
    grid = {
        pattern(simulate(replace(params, rel_l1_thresh=t), trace))
        for t in np.linspace(1e-4, 1.0, 4000)
    }
    assert {p for p in grid if "S" in p} <= {c.pattern for c in found}


@pytest.fixture(scope="module")
def engine() -> Any:
    from app.blas import preload_openblas

    preload_openblas()
    e = Engine()
    yield e
    e.close()


def test_search_on_the_demo_keeps_the_most_skips_that_meet_the_target(engine: Engine) -> None:
    target = QualityTarget(min_ssim=0.97)
    request = make_request("demo", LOST_CIRCLE, seed=LOST_CIRCLE_SEED, threshold=0.1)
    events = _run(engine, QualitySearch(request, target))
    report = _report(events)
    search = report.target_search
    assert search is not None and search.complete and search.met
    probes = search.probes
    assert [e.probe for e in events if isinstance(e, TargetProbed)] == list(probes)
    assert 2 <= len(probes) <= target.max_passes
    # The case is caught: threshold 0.1 loses a circle, and the search says so.
    first = probes[0]
    assert first.threshold == 0.1 and not first.met
    assert first.ssim is not None and first.ssim < 0.97
    assert first.local_diff is not None and first.local_diff > 0.5
    # The chosen result: its report is the chosen threshold's, measured, and engaged.
    assert report.request.threshold == search.chosen_threshold
    assert replace(report.request, resume=False) == replace(
        request, threshold=report.request.threshold
    )
    assert report.gated.skipped > 0  # engagement
    assert target.min_ssim is not None and report.ssim is not None
    assert report.ssim >= target.min_ssim
    assert report.local_diff is not None and target.max_local_diff is not None
    assert report.local_diff.value <= target.max_local_diff
    # No tried threshold with more skips also met it.
    assert all(p.skipped <= report.gated.skipped for p in probes if p.met)
    # Every probe after the first checked one of the simulator's candidates.
    assert all(p.predicted_skipped is not None for p in probes[1:])
    # The last pass shown is the chosen one.
    gated_images = [
        e for e in events if getattr(e, "which", None) == "gated" and hasattr(e, "image")
    ]
    assert np.array_equal(gated_images[-1].image, report.gated.image)
    json = report.to_json()
    assert json["target_ssim"] == 0.97 and json["threshold"] == search.chosen_threshold
    assert len(json["target_search"]) == len(probes)  # type: ignore[arg-type]
    assert sum(p["chosen"] for p in json["target_search"]) >= 1  # type: ignore[union-attr]
    # The README's example (its committed record): the same 5 passes, so the pass count is pinned
    # and dropping the first pass's narrowing fails here (M10; on the fake engine, both sides of
    # the narrowing: tests/engine/test_jobs.py).
    _is_the_readme_example(search, "teacache")


def test_a_target_nothing_meets_keeps_threshold_zero_and_says_which_came_closest(
    engine: Engine,
) -> None:
    # Identical images only: SSIM 1 and no local difference at all.
    target = QualityTarget(min_ssim=1.0, max_local_diff=0.0, max_passes=2)
    request = make_request("demo", LOST_CIRCLE, seed=LOST_CIRCLE_SEED, threshold=0.1)
    report = _report(_run(engine, QualitySearch(request, target)))
    search = report.target_search
    assert search is not None and not search.met
    assert report.request.threshold == 0 and report.gated.skipped == 0
    assert report.ssim == 1.0  # every step replayed from vanilla
    assert len([p for p in search.probes if p.threshold > 0]) == 2  # the bound held
    assert "Threshold 0 (no skipping)" in search.note and "the closest was" in search.note


def test_a_distilled_variant_reports_zero_skips_and_why(engine: Engine) -> None:
    request = make_request("demo-turbo", LOST_CIRCLE, seed=LOST_CIRCLE_SEED)
    report = _report(_run(engine, QualitySearch(request, QualityTarget())))
    search = report.target_search
    assert search is not None and not search.met
    assert report.gated.skipped == 0 and report.request.threshold == 0
    # It did try the skips the simulator predicts (one of 4 steps) and measured them too low.
    tried = [p for p in search.probes if p.skipped > 0]
    assert tried and all(not p.met for p in tried)
    assert "distilled" in search.note


def test_cancel_keeps_the_best_of_the_passes_that_finished(engine: Engine) -> None:
    # Start where the target is met (threshold 0.069 skips 5 with SSIM 0.998 on this case).
    request = make_request("demo", LOST_CIRCLE, seed=LOST_CIRCLE_SEED, threshold=0.069)
    search_job = QualitySearch(request, QualityTarget())
    report = _report(_run(engine, search_job, cancel_after=1))
    search = report.target_search
    assert search is not None and not search.complete
    assert len(search.probes) == 1 and search.probes[0].met
    assert report.request.threshold == 0.069 and report.gated.skipped > 0
    assert search.note.startswith("Cancelled after 1 passes")
    # Cancelling before any pass finished cancels the run.
    events = _run(engine, replace(search_job, request=replace(request, threshold=0.1)), 1)
    assert isinstance(events[-1], RunCancelled)


def test_magcache_candidates_are_its_exact_patterns_in_threshold_order() -> None:
    from app.gate.kinds import gate_kind

    simulate_gate = gate_kind("magcache").simulate

    params = get_variant("demo").params_for("magcache", 0.02)
    steps: list[float | None] = [None] * 28  # MagCache reads only the step count
    found = candidates(params, steps)
    assert len(found) > 3
    assert [c.threshold for c in found] == sorted(c.threshold for c in found)
    assert len({c.pattern for c in found}) == len(found)
    for c in found:  # exact: each tried threshold gives its pattern, from MagCache's own rule
        assert c.holds(c.threshold) and c.threshold == round(c.threshold, 4)
        assert pattern(simulate_gate(params.with_threshold(c.threshold), steps)) == c.pattern
        assert c.predicted_skipped == c.pattern.count("S") > 0
    grid = {
        pattern(simulate_gate(params.with_threshold(float(t)), steps))
        for t in np.linspace(1e-4, 1.0, 4000)
    }
    assert {p for p in grid if "S" in p} <= {c.pattern for c in found}


def test_a_magcache_target_search_meets_the_target_with_skips(engine: Engine) -> None:
    target = QualityTarget(min_ssim=0.97)
    base = make_request("demo", LOST_CIRCLE, seed=LOST_CIRCLE_SEED, gate="magcache")
    report = _report(_run(engine, QualitySearch(base, target)))
    search = report.target_search
    assert search is not None and search.complete
    assert report.request.gate == "magcache"
    assert all(p.predicted_skipped is not None for p in search.probes[1:])
    # MagCache's simulation is exact: each checked candidate skipped what it predicted.
    assert all(p.skipped == p.predicted_skipped for p in search.probes[1:])
    assert search.met, search.note
    assert report.gated.skipped > 0  # engagement
    assert target.min_ssim is not None and report.ssim is not None
    assert report.ssim >= target.min_ssim
    assert all(p.skipped <= report.gated.skipped for p in search.probes if p.met)
    _is_the_readme_example(search, "magcache")
