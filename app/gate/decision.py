"""The gate's decision rule on plain floats: shared by the live gate and the offline simulator.

Keeping the rule in one pure function is what makes "the simulator and the live gate agree on the
same trace" true by construction rather than by parallel maintenance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import ClassVar

DEFAULT_MAX_CONSECUTIVE_SKIPS = 8
GATE_NAME = "teacache"


class Decision(StrEnum):
    computed = "computed"
    forced = "forced"
    skipped = "skipped"
    numerical_miss = "numerical-miss"

    @property
    def letter(self) -> str:
        return _LETTERS[self]

    @property
    def computes(self) -> bool:
        return self is not Decision.skipped


_LETTERS = {
    Decision.computed: "C",
    Decision.forced: "F",
    Decision.skipped: "S",
    Decision.numerical_miss: "N",
}


class GateConfigError(ValueError):
    """A gate parameter is out of range; the message names the parameter and the allowed range."""


@dataclass(frozen=True, slots=True)
class TeaCacheParams:
    """Everything that decides the gate's behaviour, validated on construction.

    ``coefficients`` is the degree-4 rescaling polynomial stored high → low (numpy ``poly1d``
    order). A step whose measured signal change lies above ``calibrated_range`` always computes:
    the polynomial was never fitted there.
    """

    coefficients: tuple[float, ...]
    rel_l1_thresh: float
    skip_first: int = 1
    skip_last: int = 1
    max_consecutive_skips: int = DEFAULT_MAX_CONSECUTIVE_SKIPS
    calibrated_range: tuple[float, float] | None = None

    gate: ClassVar[str] = GATE_NAME

    def __post_init__(self) -> None:
        try:
            coefficients = tuple(float(c) for c in self.coefficients)
        except (TypeError, ValueError):
            coefficients = ()
        if len(coefficients) != 5 or not all(math.isfinite(c) for c in coefficients):
            raise GateConfigError("coefficients must be 5 finite numbers (degree 4, high → low)")
        object.__setattr__(self, "coefficients", coefficients)
        thresh = as_float(self.rel_l1_thresh)
        if not (math.isfinite(thresh) and 0.0 <= thresh <= 1.0):
            raise GateConfigError(f"threshold must be between 0 and 1, got {self.rel_l1_thresh!r}")
        object.__setattr__(self, "rel_l1_thresh", thresh)
        for name in ("skip_first", "skip_last"):
            value = getattr(self, name)
            if not is_whole(value) or value < 0:
                raise GateConfigError(f"{name} must be a whole number ≥ 0, got {value!r}")
        if not is_whole(self.max_consecutive_skips) or self.max_consecutive_skips < 1:
            raise GateConfigError("max_consecutive_skips must be a whole number ≥ 1")
        if self.calibrated_range is not None:
            try:
                lo, hi = (float(v) for v in self.calibrated_range)
            except (TypeError, ValueError):
                lo, hi = math.nan, math.nan
            if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 <= lo < hi):
                raise GateConfigError("calibrated_range must be (low, high) with 0 ≤ low < high")
            object.__setattr__(self, "calibrated_range", (lo, hi))

    @property
    def enabled(self) -> bool:
        return self.rel_l1_thresh > 0.0

    @property
    def threshold(self) -> float:
        """The threshold under the name every gate's parameters share."""
        return self.rel_l1_thresh

    def with_threshold(self, threshold: float) -> TeaCacheParams:
        return replace(self, rel_l1_thresh=threshold)

    def in_forced_window(self, index: int, num_steps: int) -> bool:
        return index < self.skip_first or index >= num_steps - self.skip_last

    def eligible_steps(self, num_steps: int) -> int:
        """Steps outside the protected windows that have a cached residual to reuse."""
        window = max(0, num_steps - self.skip_first - self.skip_last)
        # With no leading forced step, the first windowed step only seeds the cache.
        return window - 1 if window and self.skip_first == 0 else window


def as_float(value: object) -> float:
    """A parameter as a float, NaN where it is none (so a range check refuses it)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def is_whole(value: object) -> bool:
    """An int that is not a bool (a step count in a gate's parameters)."""
    return isinstance(value, int) and not isinstance(value, bool)


def poly_eval(coefficients: tuple[float, ...], x: float) -> float:
    """Horner evaluation; coefficients high → low."""
    acc = 0.0
    for c in coefficients:
        acc = acc * x + c
    return acc


def predict_change(params: TeaCacheParams, rel_l1: float) -> tuple[float, bool]:
    """The predicted body-output change for a measured signal change, and whether it lies above
    the calibrated range (which forces a compute). Non-finite results are returned as NaN."""
    x = rel_l1
    above = False
    if params.calibrated_range is not None:
        lo, hi = params.calibrated_range
        above = x > hi
        x = min(max(x, lo), hi)
    try:
        value = poly_eval(params.coefficients, x)
    except OverflowError:
        return math.nan, above
    if not math.isfinite(value):
        return math.nan, above
    return max(0.0, value), above


def prediction_floor(params: TeaCacheParams) -> float:
    """The smallest change the gate can predict for any measured change it would price.

    Priced inputs are ``[low, high]`` of the calibrated range (below it is clamped, above it always
    computes) or every change ≥ 0 without one. Before the first skip each eligible step compares its
    own prediction with the threshold, so a threshold at or below this floor can never skip, on any
    trace; above it, a run of ``k`` skips needs ``k × floor < threshold``. The minimum is taken over
    the interval ends and the polynomial's critical points; where those cannot be trusted
    (coefficients so small that a critical point leaves float range) the answer is 0, which never
    overstates.
    """
    lo, hi = params.calibrated_range or (0.0, math.inf)
    coefficients = params.coefficients
    bounded = hi != math.inf
    leading = next((c for c in coefficients[:-1] if c != 0.0), 0.0)
    if not bounded and leading < 0.0:
        return 0.0  # the polynomial falls without bound: a large enough change is priced at 0
    derivative = [c * (4 - i) for i, c in enumerate(coefficients[:-1])]
    points = _critical_points(derivative, exhaustive=not bounded)
    if points is None:
        return 0.0
    candidates = [lo, hi] if bounded else [lo]
    candidates += [x for x in points if lo <= x <= hi]
    values = [poly_eval(coefficients, x) for x in candidates]
    if not all(math.isfinite(v) for v in values):
        return 0.0  # overflow far out: the true minimum may lie beyond what floats can price
    return max(0.0, min(values))


def _critical_points(derivative: list[float], *, exhaustive: bool) -> list[float] | None:
    """Real roots of ``derivative`` (high → low), generously: also the roots of its truncations
    and Newton-polished copies. Extra points of the domain can only confirm a minimum, a missed one
    would overstate it. None when a root left float range and ``exhaustive`` needs all of them."""
    import numpy as np  # only here: importing the kernel stays light

    points: list[float] = []
    for start in range(len(derivative) - 1):
        truncated = derivative[start:]
        if not any(truncated[:-1]):
            continue
        try:
            with np.errstate(all="ignore"):
                roots = np.roots(truncated)
        except np.linalg.LinAlgError:
            roots = np.array([math.nan])
        finite = np.isfinite(roots)
        if start == 0 and exhaustive and not finite.all():
            return None
        for root in roots[finite]:
            x = float(root.real)
            if abs(root.imag) <= 1e-6 * (1.0 + abs(x)):
                points.append(x)
    polished = []
    slope = [c * (3 - i) for i, c in enumerate(derivative[:-1])]
    for x in points:
        for _ in range(3):
            d, dd = poly_eval(tuple(derivative), x), poly_eval(tuple(slope), x)
            if dd == 0.0 or not math.isfinite(d / dd):
                break
            x -= d / dd
        if math.isfinite(x):
            polished.append(x)
    return points + polished


@dataclass(frozen=True, slots=True)
class Verdict:
    """One step's decision. ``accumulated`` is the value compared with the threshold on this step
    (the running total plus this step's prediction); after a compute the running total restarts
    at 0."""

    index: int
    decision: Decision
    rel_l1: float | None = None
    predicted: float | None = None
    accumulated: float | None = None
    store_residual: bool = False


@dataclass(slots=True)
class GateScalars:
    """The gate's scalar state between steps."""

    accumulated: float = 0.0
    streak: int = 0
    has_anchor: bool = False
    has_residual: bool = False


def decide(
    params: TeaCacheParams,
    state: GateScalars,
    index: int,
    num_steps: int,
    rel_l1: float | None,
) -> Verdict:
    """Decide step ``index`` and update ``state`` in place.

    ``rel_l1`` is the measured change of the gate signal against the previous step, or None when
    no previous signal exists. With the gate disabled (threshold 0) every step computes and nothing
    is cached — the caller builds no signal at all in that case.
    """
    if not params.enabled:
        return Verdict(index, Decision.computed)

    if index < params.skip_first:
        # Leading protected steps compute and seed the anchor and the residual (as upstream
        # TeaCache does).
        _reset(state)
        state.has_anchor = rel_l1 is None or math.isfinite(rel_l1)
        state.has_residual = True
        return Verdict(index, Decision.forced, rel_l1, store_residual=True)
    if index >= num_steps - params.skip_last:
        # Trailing protected steps: nothing after them can reuse a residual, so none is stored.
        _reset(state)
        return Verdict(index, Decision.forced, rel_l1)

    if rel_l1 is not None and not math.isfinite(rel_l1):
        _reset(state)
        state.has_anchor = False
        state.has_residual = False
        return Verdict(index, Decision.numerical_miss, rel_l1)

    if rel_l1 is None or not state.has_anchor or not state.has_residual:
        _reset(state)
        state.has_anchor = True
        state.has_residual = True
        return Verdict(index, Decision.computed, rel_l1, store_residual=True)

    predicted, above_range = predict_change(params, rel_l1)
    if math.isnan(predicted):
        _reset(state)
        state.has_residual = False
        return Verdict(index, Decision.numerical_miss, rel_l1)

    candidate = state.accumulated + predicted
    if (
        not above_range
        and candidate < params.rel_l1_thresh
        and state.streak < params.max_consecutive_skips
    ):
        state.accumulated = candidate
        state.streak += 1
        return Verdict(index, Decision.skipped, rel_l1, predicted, candidate)

    _reset(state)
    return Verdict(index, Decision.computed, rel_l1, predicted, candidate, store_residual=True)


def _reset(state: GateScalars) -> None:
    state.accumulated = 0.0
    state.streak = 0


def teacache_figures(verdict: Verdict) -> dict[str, float | None]:
    """TeaCache's figures of a step it decided (its section of ``StepEvent.signals``), the live
    gate's and the simulator's alike: the signal's measured change and the polynomial's price."""
    return {"rel_l1": verdict.rel_l1, "predicted": verdict.predicted}
