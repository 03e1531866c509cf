"""Replay the gate offline on a recorded per-step signal trace.

Given the rel-L1 trace of one vanilla run (``trace[i]`` = change of the gate signal between step
``i − 1`` and step ``i``; ``None`` for step 0; what an observe-mode ``TeaCacheGate`` records), the
simulator returns the decisions the live gate would take. It runs the same decision function, and
the live gate always measures against the previous step's signal (also after a numerical miss), so
a live gate fed the same signals takes the same verdicts at every step, fields included
(``tests/test_gate_live.py`` checks it on random traces with non-finite signals).

How far that predicts a real gated run: **exact up to and including the first skip**. Until then
the gated trajectory is the vanilla trajectory, so the trace is the one the live gate would measure.
After a skip the gated latents drift from vanilla and the live signal changes with them, so later
decisions are an approximation (usually close, because a skip is taken only where little changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.gate.decision import Decision, GateScalars, TeaCacheParams, Verdict, decide, predict_change


def simulate(params: TeaCacheParams, trace: Sequence[float | None]) -> list[Verdict]:
    """One verdict per step of ``trace`` (its length is the step count)."""
    state = GateScalars()
    num_steps = len(trace)
    return [decide(params, state, i, num_steps, trace[i]) for i in range(num_steps)]


def pattern(verdicts: Sequence[Verdict]) -> str:
    return "".join(v.decision.letter for v in verdicts)


@dataclass(frozen=True, slots=True)
class Engagement:
    """Where skipping begins on one trace.

    ``onset_threshold`` is exact: any threshold strictly above it skips at least one step (just
    above it, the first skip is at ``onset_step``), any threshold at or below it skips none. None
    when no eligible step lies inside the calibrated range. ``smallest_predicted`` is the same
    number under the name that says how it is found: the smallest predicted change among the
    eligible steps (steps above the calibrated range excluded, as they always compute).
    """

    eligible_steps: int
    onset_threshold: float | None
    onset_step: int | None

    @property
    def smallest_predicted(self) -> float | None:
        return self.onset_threshold

    @property
    def can_engage(self) -> bool:
        """Some threshold the gate accepts (≤ 1) skips at least one step on this trace."""
        return self.onset_threshold is not None and self.onset_threshold < 1.0


def engagement(params: TeaCacheParams, trace: Sequence[float | None]) -> Engagement:
    """Before the first skip every eligible step starts from an empty accumulator, so the first
    skip happens at the eligible step with the smallest prediction as soon as the threshold
    exceeds that prediction. Found by replaying the trace at a vanishing threshold."""
    probe = replace(params, rel_l1_thresh=1e-12)
    eligible = 0
    best: tuple[float, int] | None = None
    for verdict in simulate(probe, trace):
        if verdict.predicted is None or verdict.rel_l1 is None:
            continue
        eligible += 1
        _, above = predict_change(probe, verdict.rel_l1)
        if above:
            continue
        if best is None or verdict.predicted < best[0]:
            best = (verdict.predicted, verdict.index)
    if best is None:
        return Engagement(eligible, None, None)
    return Engagement(eligible, best[0], best[1])


def skip_curve(
    params: TeaCacheParams, trace: Sequence[float | None], thresholds: Sequence[float]
) -> list[tuple[float, int, str]]:
    """(threshold, skipped steps, pattern) per threshold — approximate after the first skip."""
    rows = []
    for t in thresholds:
        verdicts = simulate(replace(params, rel_l1_thresh=t), trace)
        rows.append((t, sum(v.decision is Decision.skipped for v in verdicts), pattern(verdicts)))
    return rows
