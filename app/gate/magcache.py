"""MagCache's decision rule on plain floats: shared by the live gate and the simulator.

MagCache (Ma et al., 2025, arXiv:2506.09045) decides from a per-step table of *magnitude ratios*
``r[i] = mean_tokens(‖residual_i‖ / ‖residual_{i−1}‖)`` measured once on vanilla runs (the residual
is the transformer body's output minus its input). While steps are reused, the ratio accumulates as
a product, the error as ``Σ |1 − ∏ r|``; a step is skipped while that error stays within the
threshold, at most K steps in a row, after a protected share of early steps.

The rule below is transcribed from the reference, ``Zehong-Ma/MagCache`` at commit
df81cb181776c2c61477c08e1d21f87fda1cd938, ``MagCache4FLUX/magcache_flux.py``:
``magcache_forward`` (retention start ``int(retention_ratio * num_steps + 0.5)``, skip while
``accumulated_err <= magcache_thresh and accumulated_steps <= K`` and the step does not map to the
FLUX table's index 11) and ``nearest_interp`` (a table of another length is resampled to the run's
step count). Two guards the reference does not need on its fixed recipes: a threshold of 0 turns
the gate off (the reference would still skip where a ratio is exactly 1.0), and a step with no
cached residual computes (the reference would read an unset residual).

The decisions depend on the table and the step count only, never on the run's latents, so the
simulator is exact for a whole run — not only up to the first skip as for TeaCache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from app.gate.decision import Decision, GateConfigError, Verdict, as_float

GATE_NAME = "magcache"


def nearest_interp(table: Sequence[float], target_length: int) -> tuple[float, ...]:
    """The reference's ``nearest_interp`` (MagCache4FLUX/magcache_flux.py): index
    ``round(i · (len − 1) / (target − 1))`` with numpy's round-half-to-even (Python's ``round``)."""
    if target_length < 1:
        return ()
    if target_length == 1:
        return (float(table[-1]),)
    scale = (len(table) - 1) / (target_length - 1)
    return tuple(float(table[round(i * scale)]) for i in range(target_length))


@dataclass(frozen=True, slots=True)
class MagCacheParams:
    """MagCache's settings, validated on construction.

    ``ratios`` is the calibration table, one entry per step of the calibration schedule
    (``ratios[0]`` is the reference's 1.0 pad: step 0 has no previous residual).
    ``always_compute`` lists table indices the reference never skips (FLUX.1-dev: step 11 of 28),
    mapped onto the run's steps with the same nearest rule.
    """

    ratios: tuple[float, ...]
    threshold: float
    retention_ratio: float = 0.2
    max_consecutive_skips: int = 2
    always_compute: tuple[int, ...] = ()
    # The retention window in steps, where it is not ``retention_ratio`` of the run's steps: a
    # run from a picture (``for_steps_run``) keeps the whole schedule's window, cut where it starts.
    retained_steps: int | None = None

    gate: ClassVar[str] = GATE_NAME

    def __post_init__(self) -> None:
        try:
            ratios = tuple(float(r) for r in self.ratios)
        except (TypeError, ValueError):
            ratios = ()
        if len(ratios) < 2 or not all(math.isfinite(r) and r > 0.0 for r in ratios):
            raise GateConfigError("the MagCache table needs at least 2 finite ratios above 0")
        object.__setattr__(self, "ratios", ratios)
        thresh = as_float(self.threshold)
        if not (math.isfinite(thresh) and 0.0 <= thresh <= 1.0):
            raise GateConfigError(f"threshold must be between 0 and 1, got {self.threshold!r}")
        object.__setattr__(self, "threshold", thresh)
        retention = as_float(self.retention_ratio)
        if not (math.isfinite(retention) and 0.0 <= retention < 1.0):
            raise GateConfigError(
                f"retention_ratio must be at least 0 and below 1, got {self.retention_ratio!r}"
            )
        object.__setattr__(self, "retention_ratio", retention)
        k = self.max_consecutive_skips
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise GateConfigError("max_consecutive_skips (K) must be a whole number ≥ 1")
        protected = tuple(self.always_compute)
        if not all(isinstance(i, int) and 0 <= i < len(ratios) for i in protected):
            raise GateConfigError("always_compute must name steps of the calibration table")
        object.__setattr__(self, "always_compute", protected)
        kept = self.retained_steps
        if kept is not None and (isinstance(kept, bool) or not isinstance(kept, int) or kept < 0):
            raise GateConfigError("retained_steps must be a whole number of steps ≥ 0")

    @property
    def enabled(self) -> bool:
        return self.threshold > 0.0

    def with_threshold(self, threshold: float) -> MagCacheParams:
        return replace(self, threshold=threshold)

    def first_eligible(self, num_steps: int) -> int:
        """The reference's retention window: steps before this index always compute."""
        if self.retained_steps is not None:
            return self.retained_steps
        return int(self.retention_ratio * num_steps + 0.5)

    def for_steps_run(self, steps: int, left_out: int) -> MagCacheParams:
        """These settings for a run from a picture, which runs only the steps after the first
        ``left_out`` of a ``steps`` schedule: the table is indexed by the schedule's step, so the
        run's first step takes the schedule's ratio at ``left_out``, not the table's first (the
        whole schedule's table, retention window and always-computed steps, cut where the run
        starts). Unchanged without steps left out, or where fewer than two run (nothing skips)."""
        ran = steps - left_out
        if left_out <= 0 or ran < 2:
            return self
        table = self.ratios_for(steps)[left_out:]
        protected = tuple(i - left_out for i in range(left_out, steps) if self.protected(i, steps))
        return replace(
            self,
            ratios=table,
            always_compute=protected,
            retained_steps=max(0, self.first_eligible(steps) - left_out),
        )

    def eligible_steps(self, num_steps: int) -> int:
        start = max(self.first_eligible(num_steps), 1)  # step 0 has no residual to reuse
        return max(0, num_steps - start)

    def ratios_for(self, num_steps: int) -> tuple[float, ...]:
        if len(self.ratios) == num_steps:
            return self.ratios
        return nearest_interp(self.ratios, num_steps)

    def protected(self, index: int, num_steps: int) -> bool:
        if not self.always_compute:
            return False
        calibration_steps = len(self.ratios)
        scale = (calibration_steps - 1) / (num_steps - 1) if num_steps > 1 else 0.0
        return round(index * scale) in self.always_compute


@dataclass(slots=True)
class MagCacheScalars:
    """The rule's state between steps (the reference's accumulated_ratio/_err/_steps)."""

    accumulated_ratio: float = 1.0
    accumulated_err: float = 0.0
    accumulated_steps: int = 0
    has_residual: bool = False

    def reset(self) -> None:
        self.accumulated_ratio = 1.0
        self.accumulated_err = 0.0
        self.accumulated_steps = 0


def decide_magcache(
    params: MagCacheParams,
    state: MagCacheScalars,
    index: int,
    num_steps: int,
    ratios: Sequence[float] | None = None,
) -> Verdict:
    """Decide step ``index`` and update ``state`` in place. ``ratios`` is the table already
    resampled to ``num_steps`` (``params.ratios_for``); passed by callers that decide every step.

    The verdict's ``predicted`` is this step's table ratio, ``accumulated`` the accumulated error
    compared with the threshold (None where the step lies in the retention window)."""
    if not params.enabled:
        return Verdict(index, Decision.computed)
    table = params.ratios_for(num_steps) if ratios is None else ratios
    if index < params.first_eligible(num_steps) or not state.has_residual:
        state.reset()
        state.has_residual = True
        decision = (
            Decision.forced if index < params.first_eligible(num_steps) else Decision.computed
        )
        return Verdict(index, decision, store_residual=True)
    ratio = table[index]
    state.accumulated_ratio *= ratio
    state.accumulated_steps += 1
    state.accumulated_err += abs(1.0 - state.accumulated_ratio)
    err = state.accumulated_err
    if (
        err <= params.threshold
        and state.accumulated_steps <= params.max_consecutive_skips
        and not params.protected(index, num_steps)
    ):
        return Verdict(index, Decision.skipped, None, ratio, err)
    state.reset()
    return Verdict(index, Decision.computed, None, ratio, err, store_residual=True)


def simulate_magcache(params: MagCacheParams, num_steps: int) -> list[Verdict]:
    """The live gate's verdicts for a run of ``num_steps``, exactly (the rule reads no latents)."""
    state = MagCacheScalars()
    table = params.ratios_for(num_steps)
    return [decide_magcache(params, state, i, num_steps, table) for i in range(num_steps)]


def onset(params: MagCacheParams, num_steps: int) -> tuple[int, float | None, int | None]:
    """(eligible steps, smallest threshold that skips, the step it skips first). Before the first
    skip every eligible step starts from a reset state, so its error is ``|1 − r[i]|``; any
    threshold at or above the smallest of those skips (the rule compares with ``<=``)."""
    table = params.ratios_for(num_steps)
    start = max(params.first_eligible(num_steps), 1)
    best: tuple[float, int] | None = None
    for i in range(start, num_steps):
        if params.protected(i, num_steps):
            continue
        err = abs(1.0 - table[i])
        if best is None or err < best[0]:
            best = (err, i)
    eligible = params.eligible_steps(num_steps)
    if best is None:
        return eligible, None, None
    return eligible, best[0], best[1]


def mean_ratio_table(traces: Sequence[Sequence[float | None]]) -> tuple[float, ...]:
    """The calibration table from vanilla runs of one schedule: per step, the mean measured ratio
    over runs (step 0 is the reference's 1.0 pad). Raises ``GateConfigError`` on ragged or
    missing data."""
    if not traces:
        raise GateConfigError("no vanilla runs to calibrate MagCache from")
    length = len(traces[0])
    if length < 2 or any(len(t) != length for t in traces):
        raise GateConfigError("every calibration run needs the same number of steps (≥ 2)")
    table = [1.0]
    for i in range(1, length):
        values = [t[i] for t in traces]
        finite = [float(v) for v in values if v is not None and math.isfinite(v)]
        if len(finite) != len(values):
            raise GateConfigError(f"step {i} has no measured magnitude ratio in every run")
        table.append(sum(finite) / len(finite))
    return tuple(table)


def magcache_figures(verdict: Verdict) -> dict[str, float | None]:
    """MagCache's figures of a step it decided (its section of ``StepEvent.signals``), the live
    gate's and the simulator's alike: the table's ratio for the step (the accumulated error is the
    step's ``accumulated``)."""
    return {"table_ratio": verdict.predicted}
