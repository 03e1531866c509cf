"""Hypothesis property tests of the decision rule and the simulator, on plain float traces.

``spec_decisions`` below restates the rule from the issue in the plainest possible form; the
kernel must agree with it on any trace, and the properties the UI relies on (threshold 0 never
skips, windows, cap, range, misses, engagement) are asserted on their own as well.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.gate import (
    Decision,
    TeaCacheParams,
    Verdict,
    engagement,
    poly_eval,
    predict_change,
    simulate,
    skip_curve,
)
from app.gate.decision import prediction_floor

finite = st.floats(allow_nan=False, allow_infinity=False)
coefficient_tuples = st.tuples(finite, finite, finite, finite, finite)
# Small polynomials: predictions in a range where thresholds matter. "Tame" ones have no
# near-vanishing coefficients (as real fits), "small" ones may (denormals and all).
small_coefficients = st.tuples(*[st.floats(-3.0, 3.0) for _ in range(5)])
tame_coefficients = st.tuples(*[st.floats(-3.0, 3.0).map(lambda c: round(c, 6)) for _ in range(5)])
changes = st.floats(0.0, 1.0)
any_change = st.one_of(
    st.floats(0.0, 1e6),
    st.sampled_from([math.nan, math.inf, 0.0]),
)


@st.composite
def traces(draw: st.DrawFn, values: st.SearchStrategy[float] = changes) -> list[float | None]:
    """A vanilla trace: nothing measured at step 0, a change against the previous step after."""
    n = draw(st.integers(0, 40))
    return [None, *draw(st.lists(values, min_size=n, max_size=n))] if n else []


@st.composite
def gate_params(
    draw: st.DrawFn, coefficients: st.SearchStrategy = tame_coefficients
) -> TeaCacheParams:
    calibrated_range = None
    if draw(st.booleans()):
        lo, hi = sorted(draw(st.lists(changes, min_size=2, max_size=2, unique=True)))
        calibrated_range = (lo, hi)
    return TeaCacheParams(
        coefficients=draw(coefficients),
        rel_l1_thresh=draw(st.floats(0.0, 1.0)),
        skip_first=draw(st.integers(0, 4)),
        skip_last=draw(st.integers(0, 4)),
        max_consecutive_skips=draw(st.integers(1, 10)),
        calibrated_range=calibrated_range,
    )


def letters(verdicts: list[Verdict]) -> str:
    return "".join(v.decision.letter for v in verdicts)


def longest_streak(verdicts: list[Verdict]) -> int:
    best = run = 0
    for v in verdicts:
        run = run + 1 if v.decision is Decision.skipped else 0
        best = max(best, run)
    return best


def spec_decisions(p: TeaCacheParams, trace: list[float | None]) -> list[tuple[str, float | None]]:
    """The rule as issue 2 states it, written independently of ``app.gate.decision``."""
    n = len(trace)
    if p.rel_l1_thresh == 0:
        return [("C", None)] * n
    out: list[tuple[str, float | None]] = []
    acc, streak, cache_ok = 0.0, 0, False
    for i, x in enumerate(trace):
        if i < p.skip_first or i >= n - p.skip_last:
            out.append(("F", None))
            acc, streak = 0.0, 0
            cache_ok = i < p.skip_first and (x is None or math.isfinite(x))
            continue
        if x is not None and not math.isfinite(x):
            out.append(("N", None))
            acc, streak, cache_ok = 0.0, 0, False
            continue
        if x is None or not cache_ok:
            out.append(("C", None))
            acc, streak, cache_ok = 0.0, 0, True
            continue
        lo, hi = p.calibrated_range or (-math.inf, math.inf)
        raw = poly_eval(p.coefficients, min(max(x, lo), hi))
        if not math.isfinite(raw):
            out.append(("N", None))
            acc, streak, cache_ok = 0.0, 0, False
            continue
        total = acc + max(raw, 0.0)
        if x <= hi and total < p.rel_l1_thresh and streak < p.max_consecutive_skips:
            out.append(("S", total))
            acc, streak = total, streak + 1
        else:
            out.append(("C", total))
            acc, streak = 0.0, 0
    return out


@given(gate_params(coefficients=coefficient_tuples), traces(any_change))
def test_kernel_matches_the_written_rule(p: TeaCacheParams, trace: list[float | None]) -> None:
    verdicts = simulate(p, trace)
    assert [(v.decision.letter, v.accumulated) for v in verdicts] == spec_decisions(p, trace)
    assert [v.index for v in verdicts] == list(range(len(trace)))


@given(gate_params(coefficients=coefficient_tuples), traces(any_change))
def test_threshold_zero_never_skips_nor_measures(
    p: TeaCacheParams, trace: list[float | None]
) -> None:
    verdicts = simulate(replace(p, rel_l1_thresh=0.0), trace)
    assert all(v == Verdict(v.index, Decision.computed) for v in verdicts)


@given(gate_params(), traces(any_change))
def test_protected_windows_are_honoured(p: TeaCacheParams, trace: list[float | None]) -> None:
    assume(p.enabled)
    n = len(trace)
    for v in simulate(p, trace):
        protected = v.index < p.skip_first or v.index >= n - p.skip_last
        assert (v.decision is Decision.forced) == protected
        # Only the leading window seeds the cache; nothing after the trailing window could use it.
        if protected:
            assert v.store_residual == (v.index < p.skip_first)


@given(gate_params(), traces())
def test_skip_cap_holds(p: TeaCacheParams, trace: list[float | None]) -> None:
    assert longest_streak(simulate(p, trace)) <= p.max_consecutive_skips


@given(traces(), st.integers(1, 10))
def test_skip_cap_is_reached_when_nothing_changes(trace: list[float | None], cap: int) -> None:
    p = TeaCacheParams((0.0, 0.0, 0.0, 0.0, 0.0), 0.5, max_consecutive_skips=cap)
    verdicts = simulate(p, trace)
    assert longest_streak(verdicts) == min(cap, p.eligible_steps(len(trace)))


@given(gate_params(), traces(any_change))
def test_skips_only_below_threshold_and_inside_range(
    p: TeaCacheParams, trace: list[float | None]
) -> None:
    previous_total = 0.0
    for v in simulate(p, trace):
        if v.decision is Decision.skipped:
            assert v.rel_l1 is not None and math.isfinite(v.rel_l1)
            assert v.predicted is not None and v.predicted >= 0.0
            assert v.accumulated is not None and v.accumulated < p.rel_l1_thresh
            assert v.accumulated == previous_total + v.predicted
            assert not v.store_residual
            if p.calibrated_range is not None:
                assert v.rel_l1 <= p.calibrated_range[1]
            previous_total = v.accumulated
        else:
            previous_total = 0.0


@given(gate_params(), traces(any_change))
def test_every_computed_step_is_explained(p: TeaCacheParams, trace: list[float | None]) -> None:
    """A step that reached the polynomial and computed did so for a stated reason."""
    verdicts = simulate(p, trace)
    for v in verdicts:
        if v.decision is not Decision.computed or v.predicted is None:
            continue
        assert v.store_residual and v.accumulated is not None and v.rel_l1 is not None
        above = p.calibrated_range is not None and v.rel_l1 > p.calibrated_range[1]
        capped = _streak_before(verdicts, v.index) >= p.max_consecutive_skips
        assert above or capped or v.accumulated >= p.rel_l1_thresh


def _streak_before(verdicts: list[Verdict], index: int) -> int:
    run = 0
    for v in reversed(verdicts[:index]):
        if v.decision is not Decision.skipped:
            break
        run += 1
    return run


@given(gate_params(coefficients=coefficient_tuples), traces(any_change))
def test_non_finite_changes_are_misses_and_never_skip(
    p: TeaCacheParams, trace: list[float | None]
) -> None:
    assume(p.enabled)
    verdicts = simulate(p, trace)
    for v, x in zip(verdicts, trace, strict=True):
        protected = v.index < p.skip_first or v.index >= len(trace) - p.skip_last
        if x is not None and not math.isfinite(x) and not protected:
            assert v.decision is Decision.numerical_miss
            assert not v.store_residual
        if v.decision is Decision.numerical_miss:
            # compute and reset: the next unprotected step must re-seed, never skip
            nxt = v.index + 1
            if nxt < len(verdicts):
                assert verdicts[nxt].decision is not Decision.skipped


@given(gate_params(), traces())
def test_eligible_steps_matches_the_simulator(p: TeaCacheParams, trace: list[float | None]) -> None:
    assume(p.enabled)
    evaluated = sum(v.predicted is not None for v in simulate(p, trace))
    # Finite, non-overflowing traces: every eligible step evaluates the polynomial.
    assert evaluated == p.eligible_steps(len(trace))


# -- engagement: exact onset -----------------------------------------------------------------------


@settings(max_examples=200)
@given(gate_params(), traces(st.one_of(changes, st.just(math.nan))), st.floats(0.0, 1.0))
def test_engagement_onset_is_exact(
    p: TeaCacheParams, trace: list[float | None], threshold: float
) -> None:
    onset = engagement(p, trace)
    skipped = _skips(p, trace, threshold)
    if onset.onset_threshold is None:
        assert onset.onset_step is None
        assert skipped == 0
        return
    assert onset.smallest_predicted == onset.onset_threshold
    if threshold > onset.onset_threshold:
        assert skipped >= 1
    else:
        assert skipped == 0


@given(gate_params(), traces(st.one_of(changes, st.just(math.nan))))
def test_first_skip_just_above_onset_is_at_the_onset_step(
    p: TeaCacheParams, trace: list[float | None]
) -> None:
    onset = engagement(p, trace)
    assume(onset.onset_threshold is not None and onset.can_engage)
    assert onset.onset_threshold is not None and onset.onset_step is not None
    just_above = math.nextafter(onset.onset_threshold, math.inf)
    verdicts = simulate(replace(p, rel_l1_thresh=just_above), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip == onset.onset_step
    at_onset = simulate(replace(p, rel_l1_thresh=max(onset.onset_threshold, 0.0)), trace)
    assert all(v.decision is not Decision.skipped for v in at_onset)


def _skips(p: TeaCacheParams, trace: list[float | None], threshold: float) -> int:
    return sum(
        v.decision is Decision.skipped for v in simulate(replace(p, rel_l1_thresh=threshold), trace)
    )


@given(gate_params(), traces())
def test_engagement_counts_the_eligible_steps(p: TeaCacheParams, trace: list[float | None]) -> None:
    assert engagement(p, trace).eligible_steps == p.eligible_steps(len(trace))


def test_skip_curve_on_a_hand_computed_trace() -> None:
    # Identity fit (predicted change = measured change), a change of 0.1 at every step after the
    # first, the first and last steps forced. A step skips while the change accumulated since the
    # last compute stays under the threshold, for at most 8 steps in a row:
    #   0.05: 0.1 alone reaches it, nothing skips;      0.15: skip (0.1), compute (0.2), ...
    #   0.25: skip (0.1), skip (0.2), compute (0.3);    1.0: 0.1 … 0.4 all stay under it.
    # Threshold 0 disables the gate: every step computes, none is even forced.
    p = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 1.0, 0.0), rel_l1_thresh=0.5)
    trace: list[float | None] = [None, 0.1, 0.1, 0.1, 0.1, 0.1]
    assert skip_curve(p, trace, [0.0, 0.05, 0.15, 0.25, 1.0]) == [
        (0.0, 0, "CCCCCC"),
        (0.05, 0, "FCCCCF"),
        (0.15, 2, "FSCSCF"),
        (0.25, 3, "FSSCSF"),
        (1.0, 4, "FSSSSF"),
    ]


@settings(deadline=None)  # prediction_floor's first call imports numpy
@given(gate_params(), traces(), st.lists(st.floats(0.0, 1.0), max_size=5))
def test_skip_curve_rows_are_consistent_and_floor_bound(
    p: TeaCacheParams, trace: list[float | None], thresholds: list[float]
) -> None:
    # Properties that do not replay the gate: one row per threshold in order, a letter per step,
    # the count is the pattern's S letters, and a threshold at or below the prediction floor (found
    # from the polynomial, not the simulator) can never skip.
    rows = skip_curve(p, trace, thresholds)
    assert [t for t, _, _ in rows] == thresholds
    floor = prediction_floor(p)
    for t, skipped, pattern in rows:
        assert len(pattern) == len(trace) and set(pattern) <= set("CFSN")
        assert skipped == pattern.count("S")
        if t <= floor:
            assert skipped == 0, (t, floor, pattern)


# -- the prediction floor --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)  # the first call imports numpy
@given(gate_params(small_coefficients), st.lists(st.floats(0.0, 3.0), min_size=1, max_size=50))
def test_no_priced_change_is_predicted_below_the_floor(p: TeaCacheParams, xs: list[float]) -> None:
    floor = prediction_floor(p)
    assert floor >= 0.0
    for x in xs:
        predicted, above = predict_change(p, x)
        if not above:
            assert predicted >= floor - 1e-9


@settings(max_examples=150, deadline=None)
@given(gate_params())
def test_the_floor_is_attained(p: TeaCacheParams) -> None:
    """Dense sampling of the priced interval finds nothing below the floor and, on a bounded
    interval, comes close to it (with near-vanishing coefficients the floor may fall back to 0)."""
    floor = prediction_floor(p)
    lo, hi = p.calibrated_range or (0.0, 4.0)
    grid = [lo + (hi - lo) * k / 4_000 for k in range(4_001)]
    sampled = min(predict_change(p, x)[0] for x in grid)
    assert sampled >= floor - 1e-9
    if p.calibrated_range is not None:
        assert sampled - floor <= 1e-4 + 1e-3 * abs(floor)


@settings(deadline=None)
@given(gate_params(), traces())
def test_skip_streaks_are_bounded_by_the_floor(
    p: TeaCacheParams, trace: list[float | None]
) -> None:
    """k consecutive skips accumulate at least k × floor, which must stay under the threshold."""
    floor = prediction_floor(p)
    streak = longest_streak(simulate(p, trace))
    if p.rel_l1_thresh <= floor:
        assert streak == 0
    assert streak * floor < p.rel_l1_thresh or streak == 0
