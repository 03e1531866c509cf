"""Pieces every family adapter uses: the per-installation state and the error types."""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

from app.adapters.base import GateLifecycle
from app.gate import TeaCacheGate

COND = "cond"
UNCOND = "uncond"


class AdapterError(RuntimeError):
    """A gate cannot be installed on this pipeline; the message says why in one sentence."""


class UnsupportedPipelineError(AdapterError):
    pass


class AlreadyInstalledError(AdapterError):
    pass


@dataclass(eq=False)
class GateState:
    """What a gated forward needs at call time. A plain object, never an ``nn.Module`` attribute
    value that MLX would file as a child (arrays there would become parameters)."""

    gate: TeaCacheGate
    lifecycle: GateLifecycle
    _call_key: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def gating(self) -> bool:
        """True inside a generation (between before_loop and after_loop)."""
        return self.lifecycle.active

    def branch_of_call(self) -> str:
        """For pipelines that call the transformer twice per step (Qwen-Image): the first call
        of a step is the conditional branch, a repeat within the same step the unconditional."""
        key = (self.lifecycle.generation, self.gate.step_index)
        if key == self._call_key:
            return UNCOND
        self._call_key = key
        return COND

    def record(self, noise: mx.array) -> None:
        if self.gate.capture_output:
            self.gate.record_output(noise)
