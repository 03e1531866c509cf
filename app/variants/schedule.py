"""Weight-free answer to "can this variant skip any step of this schedule?"."""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.variants.catalog import Variant
from app.variants.registry import VARIANTS


def image_strength(strength: float) -> float:
    """mflux's ``image_strength`` for the studio's ``strength``. The studio's strength says how
    far the picture may change (1: every step runs, from noise; 0.4: only the last 40 % of the
    schedule runs), as diffusers' strength and ComfyUI's denoise do; mflux's says how much of the
    picture is kept (0: none, 1: all)."""
    return 1.0 - strength


def steps_left_out(steps: int, strength: float | None) -> int:
    """How many of ``steps`` a run from a picture at ``strength`` never runs: mflux's
    ``Config.init_time_step`` (mflux 0.24, models/common/config/config.py), on the very float
    ``image_strength`` hands mflux, so the two always agree (tests/variants/test_schedule.py
    asks mflux). 0 without a picture (``strength`` None) and at strength 1."""
    if strength is None:
        return 0
    kept = image_strength(strength)
    if kept <= 0.0:
        return 0
    return max(1, int(steps * min(1.0, kept)))


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
    # A run from a picture: the first steps strength leaves out (``steps_left_out``) and what
    # that leaves the gate, in words; every count above is then of the steps that run.
    left_out: int = 0
    strength_note: str | None = None


def strength_note(variant: Variant, steps: int, strength: float) -> str | None:
    """What ``strength`` leaves the gate of ``steps``, in words (None where it runs them all);
    on a distilled schedule, why that leaves little."""
    left_out = steps_left_out(steps, strength)
    if left_out <= 0:
        return None
    active = steps - left_out
    note = (
        f"strength {strength:g} starts from the picture at step {left_out + 1}, so the first "
        f"{left_out} of the {steps} steps never run and the gate decides among the last {active}"
    )
    if variant.distilled:
        note += (
            ", and a distilled schedule has few steps to begin with: the gate always computes "
            "the first and last of those it runs, so little or nothing is left to skip"
        )
    return note


def check_schedule(
    variant: Variant,
    steps: int,
    threshold: float | None = None,
    *,
    gate: str = DEFAULT_GATE,
    strength: float | None = None,
) -> ScheduleCheck:
    """Can ``gate`` skip any step of (variant, steps) at ``threshold`` (the gate's default where
    None)? Answered from the gate's calibration alone: its eligible steps and the floor below
    which no threshold skips (``GateKind.schedule``). ``strength``: a run from a picture, which
    runs only the steps after ``steps_left_out`` (the counts are then of those)."""
    left_out = steps_left_out(steps, strength)
    check = _check(variant, steps - left_out, threshold, gate, (steps, left_out))
    if strength is None or left_out <= 0:
        return check
    return replace(
        check,
        steps=steps,
        left_out=left_out,
        strength_note=strength_note(variant, steps, strength),
    )


def _check(
    variant: Variant,
    steps: int,
    threshold: float | None,
    gate: str,
    schedule: tuple[int, int] | None = None,
) -> ScheduleCheck:
    """The check over ``steps`` the gate sees; ``schedule``: (the whole schedule, the steps left
    out of it) for a run from a picture."""
    kind = gate_kind(gate)
    suggestion = _suggestion(variant)
    calibration = kind.calibration_of(variant)
    reason = variant.gate_unavailable_reason(gate)
    if reason is not None or calibration is None:
        return ScheduleCheck(variant.id, steps, 0, False, reason or "", suggestion)
    params = kind.params(calibration, threshold)
    if schedule is not None:
        params = kind.for_steps_run(params, *schedule)
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
