"""The first-block probe's rule (``app.gate.firstblock``), its live gate and its simulator.

Oracles: the rule's guards and its reference (the last *computed* step, never a skipped one) on
hand-made changes; the live gate against the simulator on the same residuals, verdict for verdict
(the vanilla trace of changes against each previous step makes the simulation of the
last-computed-step rule exact along the vanilla path, which a trace of consecutive changes alone
does not); the onset, exact on either side.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest

from app.gate import Decision, GateConfigError
from app.gate.firstblock import (
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    TRACE_DEPTH,
    FirstBlockParams,
    FirstBlockScalars,
    decide_firstblock,
    onset,
    simulate_firstblock,
)
from app.gate.kinds import FIRSTBLOCK_KIND
from app.gate.live import BlockChangeRecorder, FirstBlockGate, VanillaRecorder
from app.gate.signals import Tap


def letters(verdicts: list) -> str:
    return "".join(v.decision.letter for v in verdicts)


@pytest.mark.parametrize("threshold", [-0.1, 1.5, math.nan, "x"])
def test_a_threshold_out_of_range_is_refused_in_one_sentence(threshold: object) -> None:
    with pytest.raises(GateConfigError, match="threshold must be between 0 and 1"):
        FirstBlockParams(threshold=threshold)  # type: ignore[arg-type]


def test_the_guards_warm_up_the_last_step_and_skips_in_a_row() -> None:
    params = FirstBlockParams(threshold=0.5, warmup_steps=2, max_consecutive_skips=2)
    state = FirstBlockScalars()
    # Every change is small: warm-up, then at most two skips in a row, the last step computes.
    verdicts = [decide_firstblock(params, state, i, 9, 0.1) for i in range(9)]
    assert letters(verdicts) == "FFSSCSSCF"
    stored = [True, True, False, False, True, False, False, True, False]
    assert [v.store_residual for v in verdicts] == stored
    assert params.eligible_steps(9) == 6
    off = FirstBlockParams(threshold=0.0)
    assert not off.enabled
    assert letters([decide_firstblock(off, FirstBlockScalars(), i, 5, 0.0) for i in range(5)]) == (
        "C" * 5
    )


def test_a_skip_keeps_comparing_with_the_last_computed_step() -> None:
    """Changes against each previous step, nearest first: step 3's change against step 2 is small
    but step 2 was skipped, so step 3 reads its change against step 1 (0.4): it computes, and
    step 4 compares with step 3."""
    trace = [None, (0.3,), (0.05, 0.3), (0.05, 0.4, 0.6), (0.06, 0.2, 0.5)]
    params = FirstBlockParams(threshold=0.1, warmup_steps=2, max_consecutive_skips=3)
    verdicts = simulate_firstblock(params, [*trace, (0.9,) * 4])
    assert letters(verdicts) == "FFSCSF"
    assert [v.accumulated for v in verdicts[2:5]] == [0.05, 0.4, 0.06]
    # A simulator of consecutive changes alone (each step's change against the step before it,
    # whatever was skipped) would skip step 3 (0.05): the deeper trace is what makes it exact.
    consecutive = [None if c is None else (c[0],) * TRACE_DEPTH for c in trace]
    assert letters(simulate_firstblock(params, [*consecutive, (0.9,) * 4])) == "FFSSSF"


def _residuals(steps: int, seed: int) -> list[mx.array]:
    """Residuals that change by a drifting amount each step (some steps barely move)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((1, 16, 8)).astype(np.float32)
    out, current = [], base
    for _ in range(steps):
        step = rng.uniform(0.0, 0.25) * rng.standard_normal(base.shape).astype(np.float32)
        current = current + step
        out.append(mx.array(current))
    return out


def _observe(residuals: list[mx.array]) -> list:
    """A vanilla pass's record of the first block's residuals (the probe's recorder)."""
    observer = VanillaRecorder([BlockChangeRecorder("firstblock")])
    observer.begin(len(residuals))
    for r in residuals:
        observer.decide(None)
        observer.record_tap(Tap.block_residual, r)
        observer.end_step()
    return observer.events


def _probe(event: object, key: str) -> object:
    return event.figures("firstblock").get(key)  # type: ignore[attr-defined]


def _live(params: FirstBlockParams, residuals: list[mx.array]) -> list:
    """The live gate fed the vanilla residuals at every step (the vanilla path)."""
    gate = FirstBlockGate(params)
    gate.begin(len(residuals))
    for r in residuals:
        verdict = gate.decide(r)
        if verdict.decision.computes:
            gate.store_residual(r + 1.0, r)
        else:
            gate.reuse(r)
        gate.end_step()
    return gate.events


@pytest.mark.parametrize("seed", range(6))
def test_the_simulator_replays_the_live_gate_on_the_vanilla_path(seed: int) -> None:
    residuals = _residuals(20, seed)
    events = _observe(residuals)
    assert _probe(events[0], "changes") is None
    lengths = [len(_probe(e, "changes") or ()) for e in events]  # type: ignore[arg-type]
    assert lengths == [min(i, TRACE_DEPTH) for i in range(20)]
    trace = FIRSTBLOCK_KIND.trace(events)
    for threshold in (0.02, 0.05, 0.1, 0.2, 0.4, 0.8):
        params = FirstBlockParams(threshold=threshold, warmup_steps=2)
        simulated = simulate_firstblock(params, trace)
        live = _live(params, residuals)
        assert letters(simulated) == "".join(e.decision.letter for e in live)
        # the same change, bit for bit, wherever the rule read one
        assert [v.accumulated for v in simulated] == [_probe(e, "change") for e in live]


def test_the_onset_is_exact_on_either_side() -> None:
    residuals = _residuals(16, 11)
    trace = FIRSTBLOCK_KIND.trace(_observe(residuals))
    params = FirstBlockParams(threshold=0.1)
    eligible, first, step = onset(params, trace)
    assert eligible == params.eligible_steps(16) and first is not None and step is not None
    at = simulate_firstblock(params.with_threshold(first), trace)
    above = simulate_firstblock(params.with_threshold(math.nextafter(first, 1.0)), trace)
    assert Decision.skipped not in {v.decision for v in at}  # strictly below skips
    assert next(v.index for v in above if v.decision is Decision.skipped) == step


def test_forced_skips_whatever_the_change_for_timing() -> None:
    params = FIRSTBLOCK_KIND.forced(FIRSTBLOCK_KIND.calibration_of(_NoCalibrations()), 2)
    assert params.forced and params.max_consecutive_skips == 2
    trace = [None, *((5.0,) * min(i, TRACE_DEPTH) for i in range(1, 12))]
    warm = params.warmup_steps
    assert (
        letters(simulate_firstblock(params, trace)) == "F" * warm + ("SSC" * 4)[: 11 - warm] + "F"
    )
    assert DEFAULT_MAX_CONSECUTIVE_SKIPS + 1 == TRACE_DEPTH


class _NoCalibrations:
    """A variant with no calibration for any gate."""

    @property
    def calibrations(self) -> dict[str, object]:
        return {}
