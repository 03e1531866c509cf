"""Warnings both engines (the real one and the scripted fake) raise with the same words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.engine.events import RunWarning
from app.gate import GateParams
from app.gate.simulator import engagement


def engagement_warning(
    run_id: int, params: GateParams, trace: Sequence[float | None]
) -> RunWarning:
    """After the vanilla pass of a distilled or short schedule: where skipping begins on this
    run's own trace, and what that means at the current threshold (exact: before the first skip
    the simulator replays the gate step for step)."""
    onset = engagement(replace(params, rel_l1_thresh=max(params.rel_l1_thresh, 0.01)), trace)
    current = params.rel_l1_thresh
    if onset.onset_threshold is None:
        message = "On this run no step was gate-eligible: nothing can be skipped at any threshold."
    else:
        measured = (
            f"Measured on this run: the smallest predicted change among {onset.eligible_steps} "
            f"eligible steps is {onset.onset_threshold:.3f} (step {onset.onset_step}); "
        )
        if current <= onset.onset_threshold:
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
