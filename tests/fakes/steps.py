"""Steps as the tests build them: a ``StepEvent`` whose figures are TeaCache's, in TeaCache's
section (``StepEvent.signals``), in the order the tests always wrote them."""

from __future__ import annotations

from app.gate import Decision, StepEvent

TEACACHE = "teacache"


def tea_step(
    index: int,
    num_steps: int,
    decision: Decision,
    rel_l1: float | None = None,
    predicted: float | None = None,
    accumulated: float | None = None,
    threshold: float = 0.0,
    seconds: float = 0.0,
    *,
    gate: str = TEACACHE,
) -> StepEvent:
    """A step with TeaCache's figures (the signal's change and its price); ``gate`` the rule that
    decided it (``app.gate.events.VANILLA`` for a vanilla pass's)."""
    return StepEvent(
        index,
        num_steps,
        decision,
        threshold=threshold,
        seconds=seconds,
        gate=gate,
        accumulated=accumulated,
        signals={TEACACHE: {"rel_l1": rel_l1, "predicted": predicted}},
    )
