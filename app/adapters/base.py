"""What every family adapter shares: the lifecycle callback and a transactional installation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx

from app.gate import TeaCacheGate

Rollback = Callable[[], None]


class GateLifecycle:
    """Registered on ``pipeline.callbacks`` while a gate is installed.

    before_loop resets the gate for the active steps (img2img starts at ``init_time_step``),
    in_loop closes each step after evaluating the latents (so step times are real), and
    after_loop releases the cached residuals before the VAE decode.
    """

    def __init__(self, gate: TeaCacheGate) -> None:
        self.gate = gate

    def call_before_loop(self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any) -> None:
        active = int(config.num_inference_steps) - int(getattr(config, "init_time_step", 0) or 0)
        self.gate.begin(active)

    def call_in_loop(self, t: int, seed: int, prompt: str, latents: mx.array, config: Any,
                     time_steps: Any, **kwargs: Any) -> None:
        mx.eval(latents)
        self.gate.end_step()

    def call_after_loop(self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any) -> None:
        self.gate.release()

    def call_interrupt(self, t: int, seed: int, prompt: str, latents: mx.array, config: Any,
                       time_steps: Any, **kwargs: Any) -> None:
        self.gate.release()


class Installation:
    """Undo log of one install. Exiting (or ``remove()``) runs the rollbacks in reverse order."""

    def __init__(self, pipeline: Any, gate: TeaCacheGate) -> None:
        self.pipeline = pipeline
        self.gate = gate
        self._rollbacks: list[Rollback] = []
        self.removed = False

    def add_rollback(self, rollback: Rollback) -> None:
        self._rollbacks.append(rollback)

    def remove(self) -> None:
        if self.removed:
            return
        errors: list[BaseException] = []
        while self._rollbacks:
            rollback = self._rollbacks.pop()
            try:
                rollback()
            except BaseException as exc:  # keep undoing the rest, then report the first
                errors.append(exc)
        self.gate.release()
        self.removed = True
        if errors:
            raise errors[0]

    def __enter__(self) -> Installation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()
