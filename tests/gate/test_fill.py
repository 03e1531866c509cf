"""The fills (``app.gate.fill``) and the live gate's kept history (``app.gate.fill_memory``) on
small float32 MLX arrays: the forecast's arithmetic on uneven schedules, the horizon, the check
after a streak, the guard, the history's bound and its release, and the registry's words."""

from __future__ import annotations

import math
from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest

from app.gate import Decision, TeaCacheGate, TeaCacheParams
from app.gate.fill import (
    DEFAULT_FILL,
    ERROR,
    FILLS,
    FORECAST,
    REACH,
    REUSE,
    REUSE_ERROR,
    Forecast,
    Kept,
    UnknownFillError,
    check_fill,
    even_positions,
    get_fill,
    recorded_fill,
)
from app.gate.fill_memory import FillMemory

# An uneven schedule, as a shifted flow-matching one is: the steps shrink towards the end.
SIGMAS = (1.0, 0.9, 0.78, 0.64, 0.5, 0.37, 0.25, 0.14, 0.05)
SHAPE = (3, 4)
BASE = mx.random.normal(SHAPE, key=mx.random.key(1))
SLOPE = mx.random.normal(SHAPE, key=mx.random.key(2))
CURVE = mx.random.normal(SHAPE, key=mx.random.key(3))
UNFORECAST = Forecast(order=1, horizon=1)  # the shipped forecast without its guard


def linear(sigma: float) -> mx.array:
    return BASE + sigma * SLOPE


def quadratic(sigma: float) -> mx.array:
    return BASE + sigma * SLOPE + sigma * sigma * CURVE


Residual = Callable[[float], mx.array]  # a residual as a function of sigma


def kept(residual_at: Residual, *steps: int) -> list[Kept]:
    return [Kept(step, residual_at(SIGMAS[step])) for step in steps]


def close(a: mx.array, b: mx.array, tol: float = 1e-5) -> bool:
    return bool(np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol))


def test_reuse_adds_the_last_computed_residual_as_it_was() -> None:
    history = kept(linear, 1, 3)
    assert REUSE.residual(history, SIGMAS, 5) is history[-1].residual
    assert REUSE.reach(history, 5) == 0 and REUSE.depth == 1 and not REUSE.guarded


def test_first_order_is_exact_on_a_residual_linear_in_sigma_over_uneven_steps() -> None:
    """Spaced by the schedule's positions, not by step count: the computed steps 1 and 3 are
    0.26 apart and step 4 lies 0.14 past step 3, so an evenly spaced forecast would be wrong."""
    history = kept(linear, 1, 3)
    forecast = UNFORECAST.residual(history, SIGMAS, 4)
    assert close(forecast, linear(SIGMAS[4]))
    evenly = UNFORECAST.residual(history, even_positions(len(SIGMAS)), 4)
    assert not close(evenly, linear(SIGMAS[4]))  # the spacing matters on this schedule


def test_the_horizon_holds_the_forecast_past_its_reach() -> None:
    history = kept(linear, 1, 3)
    one_ahead = linear(SIGMAS[4])
    for step in (4, 5, 6):  # one step past the last computed one, then held
        assert UNFORECAST.reach(history, step) == 1
        assert close(UNFORECAST.residual(history, SIGMAS, step), one_ahead)
    unbounded = Forecast(order=1, horizon=None)
    assert unbounded.reach(history, 6) == 3
    assert close(unbounded.residual(history, SIGMAS, 6), linear(SIGMAS[6]))
    two = Forecast(order=1, horizon=2)
    assert close(two.residual(history, SIGMAS, 7), linear(SIGMAS[5]))


def test_one_computed_residual_is_reused_whatever_the_fill() -> None:
    history = kept(linear, 2)
    for fill in (UNFORECAST, Forecast(order=2), Forecast(corrected=True)):
        assert fill.reach(history, 3) == 0
        assert fill.residual(history, SIGMAS, 3) is history[0].residual


def test_second_order_is_exact_on_a_quadratic_and_first_order_is_not() -> None:
    history = kept(quadratic, 0, 2, 3)
    second = Forecast(order=2, horizon=None)
    assert second.depth == 3
    assert close(second.residual(history, SIGMAS, 5), quadratic(SIGMAS[5]), 1e-4)
    assert not close(UNFORECAST.residual(history, SIGMAS, 4), quadratic(SIGMAS[4]), 1e-3)


def test_the_corrected_slope_is_the_mean_of_the_last_two_intervals_slopes() -> None:
    history = kept(quadratic, 0, 2, 3)
    corrected = Forecast(order=1, horizon=1, corrected=True)
    s0, s2, s3, s4 = (SIGMAS[i] for i in (0, 2, 3, 4))
    r0, r2, r3 = (k.residual for k in history)
    slope = ((r3 - r2) / (s3 - s2) + (r2 - r0) / (s2 - s0)) / 2
    assert corrected.depth == 3
    assert close(corrected.residual(history, SIGMAS, 4), r3 + (s4 - s3) * slope)
    on_a_line = kept(linear, 0, 2, 3)  # both slopes agree: the plain forecast
    assert close(corrected.residual(on_a_line, SIGMAS, 4), linear(SIGMAS[4]))


def test_damping_scales_the_difference() -> None:
    history = kept(linear, 1, 3)
    damped = Forecast(order=1, horizon=1, damping=0.5)
    last = history[-1].residual
    assert close(damped.residual(history, SIGMAS, 4), last + 0.5 * (linear(SIGMAS[4]) - last))


def test_bad_forecast_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="order"):
        Forecast(order=3)
    with pytest.raises(ValueError, match="horizon"):
        Forecast(horizon=0)
    with pytest.raises(ValueError, match="corrected"):
        Forecast(order=2, corrected=True)


# -- the kept history ---------------------------------------------------------------------------
def run_memory(memory: FillMemory, residual_at: Residual, pattern: str) -> list[dict[str, float]]:
    """Drive ``memory`` as a live gate does over ``pattern`` (C computes, S skips) with the
    conditional branch's residual ``residual_at(sigma)``; the records of every step."""
    records = []
    for index, letter in enumerate(pattern):
        if letter == "C":
            memory.keep("cond", index, residual_at(SIGMAS[index]))
        else:
            memory.residual("cond", index)
        pending = memory.unevaluated()
        if pending:
            mx.eval(*pending)
        records.append(dict(memory.record()))
    return records


def test_the_check_after_a_streak_is_exact_for_a_forecast_on_a_line() -> None:
    """Between two computed steps the straight line through their residuals is the truth where
    the residual is linear in sigma; the unbounded forecast lies on it, reuse does not."""
    memory = FillMemory(Forecast(order=1, horizon=None))
    memory.begin(SIGMAS)
    records = run_memory(memory, linear, "CCSSC")
    assert records[2] == {REACH: 1.0} and records[3] == {REACH: 2.0}
    assert records[4][ERROR] == pytest.approx(0.0, abs=1e-6)
    # reuse would have added step 1's residual at steps 2 and 3: worst at step 3, 2/3 of the way
    change = np.mean(np.abs(np.array(linear(SIGMAS[4]) - linear(SIGMAS[1]))))
    size = np.mean(np.abs(np.array(linear(SIGMAS[4]))))
    theta = (SIGMAS[3] - SIGMAS[1]) / (SIGMAS[4] - SIGMAS[1])
    assert records[4][REUSE_ERROR] == pytest.approx(theta * change / size, rel=1e-5)
    assert records[0] == records[1] == {}  # computed steps after no streak: nothing to check


def test_reuse_checks_itself_as_reuse() -> None:
    memory = FillMemory(REUSE)
    memory.begin(SIGMAS)
    records = run_memory(memory, quadratic, "CSSCSC")
    assert records[1] == records[2] == {REACH: 0.0}
    for checked in (records[3], records[5]):
        assert checked[ERROR] == checked[REUSE_ERROR] > 0


def test_the_guard_reuses_after_a_streak_where_reuse_was_closer() -> None:
    """A residual that turns back (a forecast overshoots it): the guarded forecast reuses for the
    next streak once a check finds reuse closer, and forecasts again once one finds it closer."""
    turn = (1.0, 1.1, 1.2, 0.9, 0.9, 0.9, 0.9, 1.0, 1.2)  # per step, times BASE

    def turning(sigma: float) -> mx.array:
        return BASE * turn[SIGMAS.index(sigma)]

    memory = FillMemory(FORECAST)
    memory.begin(SIGMAS)
    records = run_memory(memory, turning, "CCSCSCSSC")
    assert FORECAST.guarded
    assert records[2] == {REACH: 1.0}  # forecast, and it overshoots the turn at step 2..3
    assert records[3][ERROR] > records[3][REUSE_ERROR]
    assert records[4] == {REACH: 0.0}  # so the next streak reuses
    assert records[5][ERROR] == records[5][REUSE_ERROR]  # reuse checked as reuse: not worse
    assert records[6] == {REACH: 1.0}  # trusted again: forecast
    unguarded = FillMemory(UNFORECAST)
    unguarded.begin(SIGMAS)
    assert run_memory(unguarded, turning, "CCSCSC")[4] == {REACH: 1.0}


def test_the_history_keeps_only_what_the_fill_reads_and_release_drops_it() -> None:
    memory = FillMemory(Forecast(order=2))
    memory.begin(SIGMAS)
    for step in range(5):
        memory.keep("cond", step, linear(SIGMAS[step]))
        memory.keep("uncond", step, 2 * linear(SIGMAS[step]))
    assert [k.index for k in memory._kept["cond"]] == [2, 3, 4]  # depth 3
    assert set(memory) == {"cond", "uncond"} and "uncond" in memory
    # each branch forecasts from its own history
    assert close(memory.residual("uncond", 5), 2 * memory.residual("cond", 5))
    memory.release()
    assert len(memory) == 0 and memory.get("cond") is None
    with pytest.raises(KeyError):
        memory.residual("cond", 6)


def test_a_live_gate_forecasts_per_branch_and_records_the_fill() -> None:
    """``TeaCacheGate`` with the forecast fill: a skipped step adds the forecast over the
    positions ``begin`` was given, each CFG branch from its own residuals, and the steps carry
    the fill's record."""
    params = TeaCacheParams(
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
    )
    gate = TeaCacheGate(params)
    gate.fill = UNFORECAST
    gate.begin(6, SIGMAS[:6])
    signal = mx.ones(SHAPE)
    added: dict[tuple[int, str], mx.array] = {}
    for step in range(6):
        verdict = gate.decide(signal * (1 + 0.01 * step))
        for branch, scale in (("cond", 1.0), ("uncond", -3.0)):
            residual = scale * linear(SIGMAS[step])
            if verdict.decision.computes:
                gate.store_residual(BASE + residual, BASE, branch)
            else:
                added[(step, branch)] = gate.residual(branch)
        gate.end_step()
    assert gate.pattern == "FSCSCF"
    assert close(added[(1, "cond")], linear(SIGMAS[0]))  # one residual kept: reused
    for branch, scale in (("cond", 1.0), ("uncond", -3.0)):
        assert close(added[(3, branch)], scale * linear(SIGMAS[3]), 1e-4)
    events = gate.events
    assert events[1].fill == {REACH: 0.0} and events[3].fill == {REACH: 1.0}
    assert events[4].fill[ERROR] == pytest.approx(0.0, abs=1e-5)  # on a line: exact
    assert events[4].fill[REUSE_ERROR] > 0.01
    assert events[0].fill == {} and events[5].fill == {}  # forced: no streak closed, nothing kept
    assert events[3].as_dict()["fill"] == {REACH: 1.0}
    assert gate.skipped == 2 and all(e.decision is not Decision.numerical_miss for e in events)
    gate.release()
    assert gate.cached_branches == ()


def test_the_registry_names_its_fills_in_one_sentence() -> None:
    assert tuple(FILLS) == ("reuse", "forecast") and DEFAULT_FILL == "reuse"
    assert get_fill("forecast") is FORECAST and check_fill("reuse") == "reuse"
    with pytest.raises(UnknownFillError, match=r"unknown fill 'taylor'; choose one of: reuse"):
        check_fill("taylor")
    assert recorded_fill(None) == recorded_fill("taylor") == "reuse"
    assert recorded_fill("forecast") == "forecast"
    for fill in FILLS.values():
        assert fill.describe() and fill.choice and fill.caption
        assert not fill.describe().endswith(".") and "\n" not in fill.describe()


def test_positions_past_the_schedule_continue_its_last_spacing() -> None:
    from app.gate.fill import position_of

    assert position_of(SIGMAS, 2) == SIGMAS[2]
    assert position_of(SIGMAS, len(SIGMAS)) == pytest.approx(SIGMAS[-1] + SIGMAS[-1] - SIGMAS[-2])
    assert position_of((), 4) == 4.0
    assert math.isfinite(position_of((0.5,), 3))
