"""Unit tests of the pure decision rule (``app.gate.decision``): one behaviour per test."""

from __future__ import annotations

import math

import pytest

from app.gate import (
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    Decision,
    GateConfigError,
    TeaCacheParams,
    Verdict,
    decide,
    poly_eval,
    predict_change,
    simulate,
)
from app.gate.decision import GateScalars

IDENTITY = (0.0, 0.0, 0.0, 1.0, 0.0)  # predicted change == measured change
# FLUX.2 Klein base 4B origin fit and calibrated range (mlx-teacache 0.12.0, research §3.4).
KLEIN_BASE = (-1841.022165607874, 848.4417137572868, -131.3554469956159, 8.179509586828413, 0.0)
KLEIN_BASE_RANGE = (0.028261, 0.219845)


def params(thresh: float = 0.1, **kw: object) -> TeaCacheParams:
    return TeaCacheParams(coefficients=kw.pop("coefficients", IDENTITY), rel_l1_thresh=thresh, **kw)  # type: ignore[arg-type]


def letters(p: TeaCacheParams, trace: list[float | None]) -> str:
    return "".join(v.decision.letter for v in simulate(p, trace))


# -- parameters ------------------------------------------------------------------------------------


def test_defaults_match_the_documented_rule() -> None:
    p = params()
    assert (p.skip_first, p.skip_last) == (1, 1)
    assert p.max_consecutive_skips == DEFAULT_MAX_CONSECUTIVE_SKIPS == 8
    assert p.calibrated_range is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"coefficients": (1.0, 2.0, 3.0, 4.0)},
        {"coefficients": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)},
        {"coefficients": (1.0, 2.0, math.nan, 4.0, 5.0)},
        {"coefficients": (1.0, 2.0, math.inf, 4.0, 5.0)},
        {"coefficients": ("a", 0, 0, 0, 0)},
        {"coefficients": 3.0},
        {"rel_l1_thresh": -0.01},
        {"rel_l1_thresh": 1.01},
        {"rel_l1_thresh": math.nan},
        {"rel_l1_thresh": "0.1x"},
        {"skip_first": -1},
        {"skip_last": 1.5},
        {"skip_first": True},
        {"max_consecutive_skips": 0},
        {"calibrated_range": (0.2, 0.1)},
        {"calibrated_range": (-0.1, 0.1)},
        {"calibrated_range": (0.1, math.inf)},
        {"calibrated_range": (0.1,)},
    ],
)
def test_bad_parameters_raise_a_config_error(kwargs: dict[str, object]) -> None:
    base: dict[str, object] = {"coefficients": IDENTITY, "rel_l1_thresh": 0.1}
    with pytest.raises(GateConfigError):
        TeaCacheParams(**{**base, **kwargs})  # type: ignore[arg-type]


def test_parameters_are_normalised_to_floats() -> None:
    p = TeaCacheParams(coefficients=[0, 0, 0, 1, 0], rel_l1_thresh=1, calibrated_range=[0, 1])  # type: ignore[arg-type]
    assert p.coefficients == IDENTITY and all(type(c) is float for c in p.coefficients)
    assert type(p.rel_l1_thresh) is float
    assert p.calibrated_range == (0.0, 1.0)


# -- polynomial ------------------------------------------------------------------------------------


def test_polynomial_is_stored_high_to_low() -> None:
    assert poly_eval((1.0, 0.0, 0.0, 0.0, 0.0), 2.0) == 16.0
    assert poly_eval((0.0, 1.0, 0.0, 0.0, 0.0), 2.0) == 8.0
    assert poly_eval((0.0, 0.0, 0.0, 0.0, 3.0), 2.0) == 3.0
    assert poly_eval((1.0, 2.0, 3.0, 4.0, 5.0), 2.0) == 16 + 16 + 12 + 8 + 5


def test_prediction_is_clamped_at_zero() -> None:
    p = params(coefficients=(0.0, 0.0, 0.0, -1.0, 0.0))
    assert predict_change(p, 0.3) == (0.0, False)


def test_overflowing_polynomial_predicts_nan() -> None:
    p = params(coefficients=(1e308, 0.0, 0.0, 0.0, 0.0))
    predicted, above = predict_change(p, 10.0)
    assert math.isnan(predicted) and not above


# -- calibrated range: exact priced values (research §3.4 / §6) ------------------------------------


def klein(thresh: float) -> TeaCacheParams:
    return params(thresh, coefficients=KLEIN_BASE, calibrated_range=KLEIN_BASE_RANGE)


def test_below_range_delta_is_priced_at_the_range_floor() -> None:
    floor_price = poly_eval(KLEIN_BASE, KLEIN_BASE_RANGE[0])
    # poly_eval at the range floor 0.028261 is 0.1442259266…: written to 6 decimals, so half a
    # unit of the last one (mlx-teacache's calibration notes print it as 0.144).
    assert floor_price == pytest.approx(0.144226, abs=5e-7)
    assert predict_change(klein(0.1), 0.0035) == (floor_price, False)
    # Unclamped the polynomial would price 0.0035 at about 0.027 and skip at 0.10.
    assert poly_eval(KLEIN_BASE, 0.0035) < 0.1
    v = simulate(klein(0.10), [None, 0.0035, 0.0035])[1]
    assert v.decision is Decision.computed
    assert v.rel_l1 == 0.0035  # the measured value is reported, not the clamped one
    assert v.predicted == floor_price
    assert simulate(klein(0.17), [None, 0.0035, 0.0035])[1].decision is Decision.skipped


def test_above_range_delta_always_computes() -> None:
    # Unclamped, poly(0.30) is negative → predicted 0 → it would skip at any threshold.
    assert poly_eval(KLEIN_BASE, 0.30) < 0
    v = simulate(klein(1.0), [None, 0.30, 0.30])[1]
    assert v.decision is Decision.computed
    assert v.rel_l1 == 0.30
    assert v.predicted == poly_eval(KLEIN_BASE, KLEIN_BASE_RANGE[1])
    assert v.store_residual
    assert predict_change(klein(1.0), 0.30)[1] is True
    # The upper bound itself is inside the range.
    assert simulate(klein(1.0), [None, KLEIN_BASE_RANGE[1], 0.0])[1].decision is Decision.skipped


def test_above_range_resets_the_accumulator() -> None:
    p = params(0.25, calibrated_range=(0.0, 0.2))
    vs = simulate(p, [None, 0.1, 0.5, 0.1, 0.1, 0.1])
    assert "".join(v.decision.letter for v in vs) == "FSCSSF"
    assert vs[3].accumulated == pytest.approx(0.1)


# -- the accumulator -------------------------------------------------------------------------------


def test_skip_while_under_threshold_compute_and_reset_when_over() -> None:
    vs = simulate(params(0.25), [None, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert "".join(v.decision.letter for v in vs) == "FSSCSSF"
    assert [v.accumulated for v in vs[1:6]] == pytest.approx([0.1, 0.2, 0.3, 0.1, 0.2])
    assert [v.predicted for v in vs[1:6]] == pytest.approx([0.1] * 5)
    assert vs[3].store_residual and not vs[1].store_residual


def test_reaching_the_threshold_exactly_computes() -> None:
    assert letters(params(0.25), [None, 0.25, 0.0]) == "FCF"
    assert letters(params(0.25), [None, 0.125, 0.125, 0.0]) == "FSCF"


def test_consecutive_skips_are_capped() -> None:
    p = params(1.0, max_consecutive_skips=3)
    assert letters(p, [None] + [0.0] * 10) == "FSSSCSSSCSF"


def test_decide_updates_the_state_in_place() -> None:
    p = params(0.5)
    state = GateScalars()
    decide(p, state, 0, 5, None)
    assert state.has_anchor and state.has_residual
    decide(p, state, 1, 5, 0.2)
    assert (state.accumulated, state.streak) == (pytest.approx(0.2), 1)
    decide(p, state, 2, 5, 0.4)
    assert (state.accumulated, state.streak) == (0.0, 0)


# -- protected windows -----------------------------------------------------------------------------


def test_leading_window_seeds_the_cache_and_trailing_window_does_not() -> None:
    vs = simulate(params(1.0, skip_first=2, skip_last=2), [None, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert "".join(v.decision.letter for v in vs) == "FFSSFF"
    assert [v.store_residual for v in vs] == [True, True, False, False, False, False]


def test_without_a_leading_window_the_first_step_seeds() -> None:
    vs = simulate(params(1.0, skip_first=0, skip_last=0), [None, 0.0, 0.0])
    assert [(v.decision, v.store_residual) for v in vs] == [
        (Decision.computed, True),
        (Decision.skipped, False),
        (Decision.skipped, False),
    ]


@pytest.mark.parametrize(
    ("num_steps", "skip_first", "skip_last", "eligible"),
    [(25, 1, 1, 23), (4, 1, 1, 2), (3, 1, 1, 1), (2, 1, 1, 0), (1, 1, 1, 0), (0, 1, 1, 0),
     (5, 0, 0, 4), (1, 0, 0, 0), (5, 0, 1, 3), (10, 3, 2, 5), (4, 3, 3, 0)],
)  # fmt: skip
def test_eligible_steps(num_steps: int, skip_first: int, skip_last: int, eligible: int) -> None:
    p = params(1.0, skip_first=skip_first, skip_last=skip_last)
    assert p.eligible_steps(num_steps) == eligible
    vs = simulate(p, [None] + [0.0] * (num_steps - 1) if num_steps else [])
    assert sum(v.predicted is not None for v in vs) == eligible


# -- numerical misses ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_signal_is_a_numerical_miss(bad: float) -> None:
    vs = simulate(params(1.0), [None, 0.0, bad, 0.0, 0.0, 0.0])
    assert "".join(v.decision.letter for v in vs) == "FSNCSF"
    miss = vs[2]
    assert not miss.store_residual and miss.predicted is None and miss.accumulated is None
    # The step after a miss re-seeds the cache (computes and stores) however small its change.
    assert vs[3].store_residual and vs[3].decision is Decision.computed


def test_overflowing_polynomial_is_a_numerical_miss() -> None:
    p = params(1.0, coefficients=(1e308, 0.0, 0.0, 0.0, 0.0))
    vs = simulate(p, [None, 0.0, 10.0, 0.0, 0.0])
    assert "".join(v.decision.letter for v in vs) == "FSNCF"
    assert vs[2].rel_l1 == 10.0


def test_a_miss_resets_the_accumulator_and_the_streak() -> None:
    p = params(0.25, max_consecutive_skips=2)
    assert letters(p, [None, 0.1, 0.1, math.nan, 0.1, 0.1, 0.1, 0.0]) == "FSSNCSSF"


# -- threshold 0 -----------------------------------------------------------------------------------


def test_threshold_zero_is_a_fast_path() -> None:
    p = params(0.0)
    assert not p.enabled
    state = GateScalars()
    for i, x in enumerate([None, 0.0, math.nan, 1e-9]):
        assert decide(p, state, i, 4, x) == Verdict(i, Decision.computed)
    assert state == GateScalars()  # nothing measured, nothing cached
