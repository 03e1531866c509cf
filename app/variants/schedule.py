"""Weight-free answer to "can this variant skip any step of this schedule?"."""

from __future__ import annotations

from dataclasses import dataclass

from app.gate.kinds import DEFAULT_GATE, gate_kind
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
    # The gate's floor (``GateKind.schedule``): TeaCache's smallest possible prediction (at or
    # below it no threshold skips), MagCache's smallest first-reuse error (below it none does);
    # None where it was not needed to answer.
    prediction_floor: float | None = None


def check_schedule(
    variant: Variant, steps: int, threshold: float | None = None, *, gate: str = DEFAULT_GATE
) -> ScheduleCheck:
    """Can ``gate`` skip any step of (variant, steps) at ``threshold`` (the gate's default where
    None)? Answered from the gate's calibration alone: its eligible steps and the floor below
    which no threshold skips (``GateKind.schedule``)."""
    kind = gate_kind(gate)
    suggestion = _suggestion(variant)
    calibration = kind.calibration_of(variant)
    reason = variant.gate_unavailable_reason(gate)
    if reason is not None or calibration is None:
        return ScheduleCheck(variant.id, steps, 0, False, reason or "", suggestion)
    params = kind.params(calibration, threshold)
    facts = kind.schedule(params, steps)
    eligible, floor = facts.eligible, facts.floor
    if threshold is None and kind.default_threshold(calibration) is None:
        why = variant.distilled_reason or kind.no_default_reason
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
            kind.no_eligible_reason(params, steps),
            suggestion or "use more steps",
            floor,
        )
    if not kind.engages(thresh, floor):
        reason = kind.floor_reason(params, steps, floor)
        return ScheduleCheck(variant.id, steps, eligible, False, reason, suggestion, floor)
    blocked = kind.calibration_blocks(calibration, thresh) if variant.distilled else None
    if blocked is not None:
        return ScheduleCheck(variant.id, steps, eligible, False, blocked, suggestion, floor)
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
    reason = kind.eligible_reason(eligible, steps)
    return ScheduleCheck(variant.id, steps, eligible, True, reason, None, floor)


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
