"""Warnings both engines (the real one and the scripted fake) raise with the same words."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.events import RunWarning
from app.gate.kinds import GateParamsLike, kind_of


def engagement_warning(
    run_id: int, params: GateParamsLike, trace: Sequence[float | None]
) -> RunWarning:
    """After the vanilla pass of a distilled or short schedule: where skipping begins on this
    run's own trace (the gate's, ``GateKind.trace``), and what that means at the current
    threshold (exact: before the first skip the simulator replays the gate step for step)."""
    kind = kind_of(params)
    onset = kind.engagement(params, trace)
    current = params.threshold
    source, smallest = kind.onset_source, kind.onset_quantity
    if onset.onset_threshold is None:
        message = "On this run no step was gate-eligible: nothing can be skipped at any threshold."
    else:
        measured = (
            f"{source}: the smallest {smallest} among {onset.eligible_steps} "
            f"eligible steps is {onset.onset_threshold:.3f} (step {onset.onset_step}); "
        )
        # MagCache skips at a threshold equal to the first-reuse error (its rule compares <=).
        blocked = current <= 0.0 or not kind.engages(current, onset.onset_threshold)
        if blocked:
            message = measured + (
                f"skipping would begin only above that, so at the current threshold "
                f"{current:.2f} nothing is skipped."
            )
        else:
            message = measured + (
                f"the current threshold {current:.2f} is above it, so the gate skips on this "
                "schedule: compare with vanilla before trusting the image."
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
    )
