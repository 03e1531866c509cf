"""The per-step telemetry record. Plain data (no MLX), so the engine, the UI and reports can use it
without loading MLX; ``app.gate.live`` re-exports it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field

from app.gate.decision import Decision

# ``StepEvent.gate`` of a vanilla pass's step: no rule decided it (every step computes), and every
# gate kind recorded its own figures on it. No gate kind is called so (``app.gate.kinds``).
VANILLA = "vanilla"

# One figure of a kind on one step: a number, a row of numbers (the probe's changes against each
# previous step), or None where nothing was measured.
Figure = float | tuple[float, ...] | None
Figures = Mapping[str, Figure]


@dataclass(frozen=True, slots=True)
class StepEvent:
    """Emitted as each step ends: what every step has, and each gate kind's own figures.

    ``accumulated`` is the value the deciding gate compared with ``threshold`` on this step (None
    where it compared none). ``seconds`` is the time since the previous step ended (or since
    ``begin``), read from the gate's clock. ``gate`` names the rule that decided (a gate kind's
    name: see the registry, ``app.gate.kinds.GATE_KINDS``), or ``VANILLA`` on a vanilla pass.

    ``signals`` holds each kind's figures by the kind's name: on a gated step the deciding kind's
    (what its rule read), on a vanilla step every kind's record of the step (its trace: what its
    simulator, plot and calibration read). Only a kind reads its own section
    (``GateKind.trace``, ``plot_value``, ``step_lines``); the keys are the kind's.

    ``fill`` is the fill's record of the step (``app.gate.fill``): on a skipped step ``reach``,
    the steps past the last computed one its change was forecast to (0: reused as it was); on the
    computed step that closes a streak, ``error`` and ``reuse_error``, the streak's worst
    estimated relative error of the fill that ran and of reuse. Empty elsewhere."""

    index: int
    num_steps: int
    decision: Decision
    _: KW_ONLY
    threshold: float
    seconds: float
    gate: str
    accumulated: float | None = None
    signals: Mapping[str, Figures] = field(default_factory=dict)
    fill: Mapping[str, float] = field(default_factory=dict)

    def figures(self, kind: str) -> Figures:
        """The figures of the kind called ``kind`` (empty where it recorded none)."""
        return self.signals.get(kind, {})

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "num_steps": self.num_steps,
            "decision": self.decision.value,
            "accumulated": self.accumulated,
            "threshold": self.threshold,
            "seconds": self.seconds,
            "gate": self.gate,
            "signals": {
                kind: {key: figure_to_json(value) for key, value in figures.items()}
                for kind, figures in self.signals.items()
            },
            "fill": dict(self.fill),
        }


def figure_to_json(value: Figure) -> object:
    return list(value) if isinstance(value, tuple) else value


def figure_from_json(value: object) -> Figure:
    """A figure as ``as_dict`` wrote it, read leniently: a number, a list of numbers (strict JSON
    wrote a non-finite one as null: read back as NaN, which every rule treats as a numerical
    miss, as it did live), else None."""
    if isinstance(value, list):
        return tuple(math.nan if (number := _number(item)) is None else number for item in value)
    return _number(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def figures_from_json(section: object) -> dict[str, Figure]:
    """One kind's section of a step as ``as_dict`` wrote it (an unknown shape reads as empty)."""
    if not isinstance(section, Mapping):
        return {}
    return {str(key): figure_from_json(value) for key, value in section.items()}
