"""MagCache's rule: a hand-worked table, the reference's forward transcribed as an oracle, the
simulator against the live gate, and the table-only helpers (interpolation, onset, calibration).
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.gate import Decision, GateConfigError, MagCacheGate, kind_of, make_gate
from app.gate.kinds import MAGCACHE_KIND
from app.gate.magcache import (
    MagCacheParams,
    mean_ratio_table,
    nearest_interp,
    onset,
    simulate_magcache,
)
from app.gate.signals import Tap
from tests.gate.test_gate_live import body, drive, latents, signals_for

# Hand-worked: 8 steps, retention 0.2 → steps 0–1 forced (int(0.2·8 + 0.5) = 2), K = 2,
# threshold 0.1.
HAND_TABLE = (1.0, 1.2, 1.05, 0.97, 1.0, 0.88, 1.02, 1.01)
#   step 2: ratio 1.05 → ∏ 1.05, err 0.05            ≤ 0.1, 1 in a row → skip
#   step 3: ratio 0.97 → ∏ 1.0185, err 0.05 + 0.0185 ≤ 0.1, 2 in a row → skip
#   step 4: ratio 1.0  → ∏ 1.0185, err 0.087         ≤ 0.1 but 3 > K   → compute, reset
#   step 5: ratio 0.88 → ∏ 0.88, err 0.12                          > 0.1 → compute, reset
#   step 6: ratio 1.02 → err 0.02                                      → skip
#   step 7: ratio 1.01 → ∏ 1.0302, err 0.0502                          → skip (no final guard)
HAND_PATTERN = "FFSSCCSS"
HAND_ERRORS = [None, None, 0.05, 0.0685, 0.087, 0.12, 0.02, 0.0502]


def hand_params(threshold: float = 0.1) -> MagCacheParams:
    return MagCacheParams(HAND_TABLE, threshold, retention_ratio=0.2, max_consecutive_skips=2)


def test_rule_on_a_hand_worked_table() -> None:
    verdicts = simulate_magcache(hand_params(), len(HAND_TABLE))
    assert "".join(v.decision.letter for v in verdicts) == HAND_PATTERN
    for verdict, expected in zip(verdicts, HAND_ERRORS, strict=True):
        if expected is None:
            assert verdict.accumulated is None
        else:
            assert verdict.accumulated == pytest.approx(expected, abs=1e-9)
    # Every computed step stores its residual for the skips that follow.
    assert all(v.store_residual for v in verdicts if v.decision.computes)


def test_threshold_zero_is_off_even_where_a_ratio_is_exactly_one() -> None:
    # The reference compares err <= thresh, so a ratio of exactly 1.0 would skip at 0: the app's
    # threshold 0 means "off", as it does for TeaCache.
    params = MagCacheParams((1.0,) * 10, 0.0, retention_ratio=0.1, max_consecutive_skips=5)
    assert not params.enabled
    assert all(v.decision is Decision.computed for v in simulate_magcache(params, 10))


def test_protected_step_of_the_flux_table_maps_with_the_step_count() -> None:
    params = MagCacheParams(
        (1.0,) * 28, 0.5, retention_ratio=0.1, max_consecutive_skips=30, always_compute=(11,)
    )
    for steps in (28, 20, 50):  # (at 14 steps no step maps to 11: nothing is protected)
        protected = [i for i in range(steps) if params.protected(i, steps)]
        verdicts = simulate_magcache(params, steps)
        assert protected, steps
        assert all(verdicts[i].decision.computes for i in protected)
        assert [round(i * 27 / (steps - 1)) for i in protected] == [11] * len(protected)


# -- the reference, transcribed ----------------------------------------------------------------


def reference_nearest_interp(src_array: np.ndarray, target_length: int) -> np.ndarray:
    """MagCache4FLUX/magcache_flux.py @ df81cb1, verbatim."""
    src_length = len(src_array)
    if target_length == 1:
        return np.array([src_array[-1]])
    scale = (src_length - 1) / (target_length - 1)
    mapped_indices = np.round(np.arange(target_length) * scale).astype(int)
    return src_array[mapped_indices]


class ReferenceForward:
    """The gate part of ``magcache_forward`` (MagCache4FLUX/magcache_flux.py @ df81cb1), with the
    FLUX-only ``!= 11`` test generalised to the table indices in ``protected``."""

    def __init__(self, table, thresh, k, retention, num_steps, protected=()):
        self.mag_ratios = np.array(table)
        if len(self.mag_ratios) != num_steps:
            self.mag_ratios = reference_nearest_interp(self.mag_ratios, num_steps)
        self.magcache_thresh, self.K, self.retention_ratio = thresh, k, retention
        self.num_steps, self.protected, self.calib = num_steps, protected, len(table)
        self.cnt, self.accumulated_ratio, self.accumulated_steps, self.accumulated_err = 0, 1, 0, 0

    def step(self) -> bool:
        skip_forward = False
        if self.cnt >= int(self.retention_ratio * self.num_steps + 0.5):
            cur_scale = self.mag_ratios[self.cnt]
            self.accumulated_ratio = self.accumulated_ratio * cur_scale
            self.accumulated_steps += 1
            self.accumulated_err += np.abs(1 - self.accumulated_ratio)
            mapped = np.round(self.cnt * ((self.calib - 1) / (self.num_steps - 1))).astype(int)
            if (
                self.accumulated_err <= self.magcache_thresh
                and self.accumulated_steps <= self.K
                and mapped not in self.protected
            ):
                skip_forward = True
            else:
                self.accumulated_ratio = 1.0
                self.accumulated_steps = 0
                self.accumulated_err = 0
        self.cnt += 1
        return skip_forward


@settings(max_examples=200, deadline=None)
@given(
    table=st.lists(st.floats(0.5, 1.5), min_size=2, max_size=40).map(lambda t: [1.0, *t]),
    steps=st.integers(2, 60),
    threshold=st.floats(1e-4, 1.0),
    k=st.integers(1, 6),
    retention=st.floats(0.05, 0.6),
    protect=st.booleans(),
)
def test_rule_matches_the_reference_forward(
    table: list[float], steps: int, threshold: float, k: int, retention: float, protect: bool
) -> None:
    protected = (len(table) // 2,) if protect else ()
    params = MagCacheParams(tuple(table), threshold, retention, k, protected)
    # The reference would read an unset residual at step 0 (the app computes there).
    assume(params.first_eligible(steps) >= 1)
    reference = ReferenceForward(table, threshold, k, retention, steps, protected)
    expected = [reference.step() for _ in range(steps)]
    verdicts = simulate_magcache(params, steps)
    assert [v.decision is Decision.skipped for v in verdicts] == expected


@given(
    table=st.lists(st.floats(0.1, 3.0), min_size=2, max_size=60),
    target=st.integers(1, 120),
)
def test_nearest_interp_matches_the_reference(table: list[float], target: int) -> None:
    assert list(nearest_interp(table, target)) == list(
        reference_nearest_interp(np.array(table), target)
    )


# -- live gate == simulator ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    table=st.lists(st.floats(0.8, 1.2), min_size=3, max_size=20).map(lambda t: [1.0, *t]),
    steps=st.integers(3, 24),
    threshold=st.floats(1e-3, 0.5),
    k=st.integers(1, 4),
    cfg=st.booleans(),
)
def test_live_gate_agrees_with_the_simulator(
    table: list[float], steps: int, threshold: float, k: int, cfg: bool
) -> None:
    params = MagCacheParams(tuple(table), threshold, 0.2, k)
    gate = make_gate(params)
    assert isinstance(gate, MagCacheGate)
    events = drive(gate, signals_for([0.1] * (steps - 1)), cfg=cfg)
    verdicts = simulate_magcache(params, steps)
    assert [e.decision for e in events] == [v.decision for v in verdicts]
    assert [e.accumulated for e in events] == [v.accumulated for v in verdicts]
    assert [e.figures("magcache")["table_ratio"] for e in events] == [v.predicted for v in verdicts]
    assert all(e.gate == "magcache" and set(e.signals) == {"magcache"} for e in events)
    assert kind_of(params).simulate(params, [None] * steps) == verdicts


def test_a_skipped_step_reuses_the_last_computed_residual() -> None:
    gate = make_gate(hand_params())
    outputs: list[mx.array] = []
    drive(gate, signals_for([0.0] * (len(HAND_TABLE) - 1)), outputs=outputs)
    assert gate.pattern == HAND_PATTERN
    # Steps 2 and 3 reuse step 1's residual (body(x) − x = x + 1 at x = latents(1)).
    residual = body(latents(1)) - latents(1)
    for step in (2, 3):
        assert np.array_equal(np.asarray(outputs[step]), np.asarray(latents(step) + residual))
    residual = body(latents(5)) - latents(5)
    assert np.array_equal(np.asarray(outputs[6]), np.asarray(latents(6) + residual))


def test_threshold_zero_takes_the_plain_path() -> None:
    gate = make_gate(hand_params(0.0))
    assert not gate.needs_signal  # the adapters run mflux's own forward
    drive(gate, signals_for([0.0] * 7))
    assert gate.pattern == "C" * 8
    assert gate.cached_branches == ()


def test_magcache_records_its_trace_through_its_recorder_only() -> None:
    """Its live gate records nothing; its record of a vanilla pass is its recorder's: the body
    residual's magnitude ratio (what its table is the mean of)."""
    assert not make_gate(hand_params()).taps.records
    recorder = MAGCACHE_KIND.recorder(None)
    assert recorder.kind == "magcache" and recorder.taps == {Tap.body_residual}


# -- table helpers -------------------------------------------------------------------------------


def test_onset_is_exact_on_the_table() -> None:
    params = hand_params()
    eligible, threshold, step = onset(params, 8)
    assert (eligible, step) == (6, 4)  # the ratio of exactly 1.0 at step 4
    assert threshold == 0.0
    # A table with no ratio of 1: the smallest |1 − r| after the retention window.
    table = (1.0, 1.3, 1.2, 1.1, 1.04, 0.93, 0.8)
    params = MagCacheParams(table, 0.1, retention_ratio=0.2, max_consecutive_skips=2)
    eligible, threshold, step = onset(params, 7)
    assert step == 4 and threshold == pytest.approx(0.04)
    assert sum(v.decision is Decision.skipped for v in simulate_magcache(params, 7)) > 0
    below = params.with_threshold(0.04 - 1e-9)
    assert all(v.decision is not Decision.skipped for v in simulate_magcache(below, 7))
    at = params.with_threshold(0.04 + 1e-12)
    assert [v.index for v in simulate_magcache(at, 7) if v.decision is Decision.skipped] == [4]


def test_calibration_table_is_the_per_step_mean() -> None:
    table = mean_ratio_table([[None, 1.0, 0.5], [None, 0.8, 0.7]])
    assert table == pytest.approx((1.0, 0.9, 0.6))
    with pytest.raises(GateConfigError, match="step 2"):
        mean_ratio_table([[None, 1.0, math.nan], [None, 1.0, 0.5]])
    with pytest.raises(GateConfigError, match="same number of steps"):
        mean_ratio_table([[None, 1.0], [None, 1.0, 1.0]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ratios": (1.0,)}, "at least 2"),
        ({"ratios": (1.0, math.nan)}, "finite"),
        ({"ratios": (1.0, -1.0)}, "above 0"),
        ({"threshold": 1.5}, "threshold"),
        ({"retention_ratio": 1.0}, "retention_ratio"),
        ({"max_consecutive_skips": 0}, "K"),
        ({"always_compute": (99,)}, "always_compute"),
    ],
)
def test_bad_parameters_are_one_sentence(kwargs: dict, message: str) -> None:
    base = {"ratios": (1.0, 1.0, 1.0), "threshold": 0.1}
    with pytest.raises(GateConfigError, match=message):
        MagCacheParams(**{**base, **kwargs})


@pytest.mark.parametrize(("variant_id", "steps"), [("flux1-dev", 28), ("flux1-dev", 25)])
def test_published_flux_table_and_recipe_match_the_reference(variant_id: str, steps: int) -> None:
    from app.variants import get_variant

    calibration = get_variant(variant_id).magcache
    assert calibration is not None
    params = calibration.params()
    assert (params.threshold, params.max_consecutive_skips, params.retention_ratio) == (
        0.24,
        5,
        0.1,
    )
    reference = ReferenceForward(
        list(calibration.ratios), 0.24, 5, 0.1, steps, calibration.always_compute
    )
    expected = [reference.step() for _ in range(steps)]
    verdicts = simulate_magcache(params, steps)
    assert [v.decision is Decision.skipped for v in verdicts] == expected
    assert sum(expected) > 0  # engagement: the published recipe skips on its own schedule
