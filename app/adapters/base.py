"""What every family adapter shares: the lifecycle callback and a transactional installation."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import mlx.core as mx

from app.gate import LiveGate

Rollback = Callable[[], None]


class GateLifecycle:
    """Registered on ``pipeline.callbacks`` while a gate is installed.

    before_loop resets the gate for the active steps (img2img starts at ``init_time_step``),
    in_loop closes each step after evaluating the latents (so step times are real), and
    after_loop releases the cached residuals before the VAE decode.

    ``active`` is True between before_loop and after_loop: adapters gate only inside a
    generation and run the plain forward otherwise. ``generation`` counts before_loop calls, so an
    adapter can tell a new generation's first call from a stale one after an interrupted run.
    """

    def __init__(self, gate: LiveGate) -> None:
        self.gate = gate
        self.active = False
        self.generation = 0

    def call_before_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        active = int(config.num_inference_steps) - int(getattr(config, "init_time_step", 0) or 0)
        self.gate.begin(active)
        self.generation += 1
        self.active = True

    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any,
        **kwargs: Any,
    ) -> None:
        mx.eval(latents, *self.gate.unevaluated())  # one sync per step, residuals included
        self.gate.end_step()

    def call_after_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        self.active = False
        self.gate.release()

    def call_interrupt(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any,
        **kwargs: Any,
    ) -> None:
        self.active = False
        self.gate.release()


# mflux's loop asks every in-loop callback's signature on every step (does it take
# ``denoised``?); a stored signature spares re-parsing ours each step.
GateLifecycle.call_in_loop.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    GateLifecycle.call_in_loop
)

_MISSING = object()


class Installation:
    """Undo log of one install. Exiting (or ``remove()``) runs the rollbacks in reverse order.

    The helpers below record their own undo step *before* they mutate anything, so an adapter that
    fails half-way can call ``remove()`` and leave the pipeline as it found it.
    """

    def __init__(self, pipeline: Any, gate: LiveGate, family: str = "") -> None:
        self.pipeline = pipeline
        self.gate = gate
        self.family = family
        self._rollbacks: list[Rollback] = []
        self.removed = False

    def add_rollback(self, rollback: Rollback) -> None:
        self._rollbacks.append(rollback)

    # -- reversible mutations -------------------------------------------------------------
    def set_instance_attr(self, obj: Any, name: str, value: Any) -> None:
        """Set a plain (non-array, non-module) instance attribute; undo restores the old value
        if there was an instance attribute, else deletes it (a class attribute shows again)."""
        previous = vars(obj).get(name, _MISSING)

        def undo() -> None:
            if previous is _MISSING:
                vars(obj).pop(name, None)
            else:
                vars(obj)[name] = previous

        self.add_rollback(undo)
        # Written to __dict__ directly: nn.Module.__setattr__ would file containers as children.
        vars(obj)[name] = value

    def swap_class(self, obj: Any, new_class: type) -> None:
        original = type(obj)

        def undo() -> None:
            obj.__class__ = original

        self.add_rollback(undo)
        obj.__class__ = new_class

    def register_callback(self, registry: Any, callback: Any) -> None:
        """Register on an mflux ``CallbackRegistry``; undo removes exactly this object (by
        identity) from every list the registry filed it under."""

        def undo() -> None:
            for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
                entries = getattr(registry, name, None)
                if isinstance(entries, list):
                    entries[:] = [entry for entry in entries if entry is not callback]

        self.add_rollback(undo)
        registry.register(callback)

    # -- teardown ---------------------------------------------------------------------------
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
