"""Weight-free answer to "can this variant skip any step of this schedule?"."""

from __future__ import annotations

from dataclasses import dataclass

from app.gate.decision import prediction_floor
from app.gate.gates import MAGCACHE, TEACACHE
from app.gate.magcache import onset
from app.variants.catalog import Variant
from app.variants.registry import VARIANTS


@dataclass(frozen=True, slots=True)
class ScheduleCheck:
    """Weight-free answer to "can (variant, steps) skip at all?"."""

    variant_id: str
    steps: int
    eligible_steps: int
    can_skip: bool
    reason: str
    suggestion: str | None
    # The smallest change the polynomial can predict (see ``prediction_floor``); None when the
    # gate is off. A threshold at or below it never skips.
    prediction_floor: float | None = None


def check_schedule(
    variant: Variant, steps: int, threshold: float | None = None, *, gate: str = TEACACHE
) -> ScheduleCheck:
    if gate == MAGCACHE:
        return _check_magcache(variant, steps, threshold)
    params = variant.gate_params(threshold)
    eligible = params.eligible_steps(steps)
    thresh = params.rel_l1_thresh
    suggestion = _suggestion(variant)
    if threshold is None and variant.default_threshold is None:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"no default threshold: {variant.distilled_reason or 'the gate is not calibrated'}",
            suggestion,
        )
    if thresh <= 0.0:
        return ScheduleCheck(
            variant.id, steps, eligible, False, "threshold 0 turns skipping off", suggestion
        )
    price_floor = prediction_floor(params)
    if eligible <= 0:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"{steps} steps leave no gate-eligible step (the first and last steps always compute)",
            suggestion or "use more steps",
            price_floor,
        )
    if thresh <= price_floor:
        where = "inside its calibrated range" if params.calibrated_range else "for any change"
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"the polynomial never predicts a change below {price_floor:.3f} {where}, so "
            f"threshold {thresh:g} cannot skip any step; use a threshold above {price_floor:.3f}",
            suggestion,
            price_floor,
        )
    floor = variant.min_predicted_change
    if variant.distilled and floor is not None and floor >= thresh:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"distilled schedule: the smallest predicted change measured is {floor:.3f}, "
            f"at or above the threshold {thresh:g}, so no step can be skipped",
            suggestion,
            price_floor,
        )
    if variant.distilled:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            True,
            f"distilled schedule ({variant.distilled_reason}); skipping here is uncalibrated",
            suggestion,
            price_floor,
        )
    return ScheduleCheck(
        variant.id,
        steps,
        eligible,
        True,
        f"{eligible} of {steps} steps are gate-eligible",
        None,
        price_floor,
    )


def _suggestion(variant: Variant) -> str | None:
    base = VARIANTS.get(variant.base_variant) if variant.base_variant else None
    if base is None:
        return None
    return (
        f"use {base.display_name} ({base.id}) at {base.default_steps} steps, "
        f"threshold {base.default_threshold:.2f}"
        if base.default_threshold is not None
        else f"use {base.display_name} ({base.id})"
    )


def _check_magcache(variant: Variant, steps: int, threshold: float | None) -> ScheduleCheck:
    """The same questions for MagCache, answered from its table (its decisions read nothing
    else, so the answer is exact): is there a table, a threshold, an eligible step, and does the
    threshold reach the smallest first-reuse error ``|1 − r[i]|`` of this schedule?"""
    suggestion = _suggestion(variant)
    reason = variant.gate_unavailable_reason(MAGCACHE)
    calibration = variant.magcache
    if reason is not None or calibration is None:
        return ScheduleCheck(variant.id, steps, 0, False, reason or "", suggestion)
    params = calibration.params(threshold)
    eligible, floor, _ = onset(params, steps)
    if threshold is None and calibration.default_threshold is None:
        why = variant.distilled_reason or "the MagCache calibration sets no default threshold"
        return ScheduleCheck(
            variant.id, steps, eligible, False, f"no default threshold: {why}", suggestion
        )
    thresh = params.threshold
    if thresh <= 0.0:
        return ScheduleCheck(
            variant.id, steps, eligible, False, "threshold 0 turns skipping off", suggestion
        )
    if eligible <= 0 or floor is None:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"{steps} steps leave no MagCache-eligible step (the first "
            f"{params.first_eligible(steps)} steps always compute)",
            suggestion or "use more steps",
        )
    if thresh < floor:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"MagCache's table never gives a first-reuse error below {floor:.3f} at {steps} "
            f"steps, so threshold {thresh:g} cannot skip any step",
            suggestion,
            floor,
        )
    if variant.distilled:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            True,
            f"distilled schedule ({variant.distilled_reason}); skipping here is uncalibrated",
            suggestion,
            floor,
        )
    reason = f"{eligible} of {steps} steps are MagCache-eligible"
    return ScheduleCheck(variant.id, steps, eligible, True, reason, None, floor)
