"""The shipped demo calibrations keep their calibrated range at full precision: exactly the
smallest and largest signal change among the committed calibration pairs
(lab/demo/results/<variant>.calibration-pairs.json, written by ``python -m lab.demo.calibrate``).

A rounded range would move the edge where the gate stops pricing a change (above it a step always
computes): a change inside the rounding gap would be priced instead of computed, or the reverse.
"""

from __future__ import annotations

import json

import pytest

from app.paths import DEMO_DIR
from app.variants import get_variant
from lab.paths import DEMO_RESULTS
from tests.fakes.params import teacache_params


@pytest.mark.parametrize("variant", ["demo", "demo-turbo"])
def test_shipped_range_is_the_pairs_exact_min_and_max(variant: str) -> None:
    pairs = json.loads((DEMO_RESULTS / f"{variant}.calibration-pairs.json").read_text("utf-8"))
    xs = [pair["x"] for run in pairs["pairs"] for pair in run]
    assert len(xs) == len(pairs["prompts"]) * (pairs["steps"] - 1)  # every consecutive-step pair
    shipped = json.loads((DEMO_DIR / f"{variant}.calibration.json").read_text("utf-8"))
    assert shipped["calibrated_range"] == [min(xs), max(xs)]  # float equality: no rounding
    # ... and that is the range the gate runs with.
    assert teacache_params(get_variant(variant), threshold=0.1).calibrated_range == (
        min(xs),
        max(xs),
    )


def test_turbo_smallest_prediction_is_on_a_step_the_gate_may_skip() -> None:
    """Issue #27 item 8: the banner's guess before a run (just above the calibration's smallest
    predicted change) must skip a step on the calibration trace it came from. The smallest over
    every pair included the last step, which the gate always computes: its guess, 0.1753, skipped
    nothing on any of the 12 calibration prompts."""
    from app.gate import Decision

    turbo = get_variant("demo-turbo")
    smallest = turbo.min_predicted_change
    assert smallest is not None
    pairs = json.loads((DEMO_RESULTS / "demo-turbo.calibration-pairs.json").read_text("utf-8"))
    steps = pairs["steps"]
    traces = [[None] + [p["x"] for p in run] for run in pairs["pairs"]]
    assert all(len(trace) == steps for trace in traces)
    guess = teacache_params(turbo, threshold=smallest + 1e-4)
    from app.gate.simulator import simulate

    skipped = [sum(v.decision is Decision.skipped for v in simulate(guess, t)) for t in traces]
    assert max(skipped) > 0, skipped  # the prompt it came from skips a step
    below = teacache_params(turbo, threshold=smallest)
    assert not any(
        v.decision is Decision.skipped for t in traces for v in simulate(below, t)
    )  # and it is the smallest such prediction: at it, no calibration prompt skips
