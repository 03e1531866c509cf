"""The per-step telemetry record. Plain data (no MLX), so the engine, the UI and reports can use it
without loading MLX; ``app.gate.live`` re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.gate.decision import Decision


@dataclass(frozen=True, slots=True)
class StepEvent:
    """Emitted as each step ends.

    ``rel_l1`` is the measured (unclamped) change of the gate signal against the previous step
    (None where nothing was measured: step 0, threshold 0); ``predicted`` the polynomial's
    predicted output change (None where the polynomial was not evaluated); ``accumulated`` the
    value compared with ``threshold`` on this step. ``seconds`` is the time since the previous
    step ended (or since ``begin``), read from the gate's clock. ``output_rel_l1`` (measured
    change of the transformer output) is filled only when the gate captures outputs (calibration
    data).

    ``gate`` names the rule that decided (a gate kind's name: see the registry,
    ``app.gate.kinds.GATE_KINDS``). Under MagCache ``rel_l1`` is None (it reads no signal),
    ``predicted`` is the step's magnitude ratio from the calibration table and ``accumulated`` the
    accumulated error ``sum |1 - prod ratios|`` compared with ``threshold``. ``mag_ratio`` is the
    *measured* magnitude ratio of the residual against the previous step's, recorded on vanilla
    (observe) passes: MagCache's calibration data.

    ``block_change`` is the first-block probe's ``d``: the relative change of the first block's
    residual against the last computed step's (on a vanilla pass: against the previous step).
    ``block_changes`` (vanilla passes only) holds ``d`` against each of the previous steps,
    nearest first, up to ``app.gate.firstblock.TRACE_DEPTH`` of them: the probe's simulator reads
    the one its own last computed step needs (``app.gate.firstblock``).

    ``fill`` is the fill's record of the step (``app.gate.fill``): on a skipped step ``reach``,
    the steps past the last computed one its change was forecast to (0: reused as it was); on the
    computed step that closes a streak, ``error`` and ``reuse_error``, the streak's worst
    estimated relative error of the fill that ran and of reuse. Empty elsewhere."""

    index: int
    num_steps: int
    decision: Decision
    rel_l1: float | None
    predicted: float | None
    accumulated: float | None
    threshold: float
    seconds: float
    output_rel_l1: float | None = None
    gate: str = "teacache"
    mag_ratio: float | None = None
    block_change: float | None = None
    block_changes: tuple[float, ...] | None = None
    fill: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "num_steps": self.num_steps,
            "decision": self.decision.value,
            "rel_l1": self.rel_l1,
            "predicted": self.predicted,
            "accumulated": self.accumulated,
            "threshold": self.threshold,
            "seconds": self.seconds,
            "output_rel_l1": self.output_rel_l1,
            "gate": self.gate,
            "mag_ratio": self.mag_ratio,
            "block_change": self.block_change,
            "block_changes": None if self.block_changes is None else list(self.block_changes),
            "fill": dict(self.fill),
        }
