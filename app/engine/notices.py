"""Warnings both engines (the real one and the scripted fake) raise with the same words."""

from __future__ import annotations

from app.engine.events import RunWarning
from app.engine.request import GenerationRequest
from app.gate import Engagement
from app.gate.kinds import GateParamsLike, format_threshold, kind_of
from app.variants import ScheduleCheck, Variant, check_schedule


def engagement_warning(run_id: int, params: GateParamsLike, onset: Engagement) -> RunWarning:
    """After the vanilla pass of a distilled or short schedule: where skipping begins on this
    run's own trace (the gate kind's ``engagement``, measured once per run: the report carries
    the same object), and what that means at the current threshold (exact: before the first skip the
    simulator replays the gate step for step). The window reads ``engagement``, typed; the
    ``details`` are its words for the history."""
    kind = kind_of(params)
    current = params.threshold
    source, smallest = kind.onset_source, kind.onset_quantity
    if onset.onset_threshold is None:
        message = "On this run no step was gate-eligible: nothing can be skipped at any threshold."
    else:
        measured = (
            f"{source}: the smallest {smallest} among {onset.eligible_steps} "
            f"eligible steps is {kind.format_onset(onset.onset_threshold)} "
            f"(step {onset.onset_step}); "
        )
        # MagCache skips at a threshold equal to the first-reuse error (its rule compares <=).
        blocked = current <= 0.0 or not kind.engages(current, onset.onset_threshold)
        if blocked:
            message = measured + (
                f"skipping would begin only above that, so at the current threshold "
                f"{format_threshold(current)} nothing is skipped."
            )
        else:
            message = measured + (
                f"the current threshold {format_threshold(current)} is above it, so the gate skips "
                "on this schedule: compare with vanilla before trusting the image."
            )
    return RunWarning(
        run_id,
        "engagement",
        message,
        {
            "eligible_steps": onset.eligible_steps,
            "onset_threshold": onset.onset_threshold,
            "threshold": current,
        },
        engagement=onset,
    )


def schedule_check(request: GenerationRequest) -> ScheduleCheck | None:
    """The weight-free check the engine warns with before a run (``schedule_warnings``): None
    where it has nothing to say (the schedule can skip at this threshold and is not distilled,
    or skipping is off on a schedule that is not distilled). The window derives the shown run's
    check from its request with this same function."""
    variant = request.variant
    check = check_schedule(
        variant,
        request.steps,
        request.threshold if request.threshold > 0 else None,
        gate=request.gate,
        strength=request.strength if request.images else None,
    )
    if check.strength_note is not None and request.threshold > 0:
        return check  # a run from a picture: say how many steps strength leaves the gate
    if check.can_skip and not variant.distilled:
        return None
    if request.threshold <= 0 and not variant.distilled:
        return None
    return check


def schedule_warnings(variant: Variant, request: GenerationRequest) -> list[RunWarning]:
    """The pre-run notice of a schedule that cannot skip (or is distilled), in one wording for
    both engines (``run_id`` 0: the engine sets its own)."""
    check = schedule_check(request)
    if check is None:
        return []
    message = f"{variant.display_name} at {request.steps} steps: {check.reason}."
    if check.strength_note is not None:
        message += f" From a picture, {check.strength_note}."
    if check.suggestion:
        message += f" Instead: {check.suggestion}."
    return [
        RunWarning(
            0,
            "distilled" if variant.distilled else "schedule",
            message,
            {
                "eligible_steps": check.eligible_steps,
                "can_skip": check.can_skip,
                "min_predicted_change": variant.min_predicted_change,
                "threshold": request.threshold,
                "suggestion": check.suggestion,
                "steps_left_out": check.left_out,
            },
        )
    ]
