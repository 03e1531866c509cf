"""What every family adapter shares: the lifecycle callback and a transactional installation."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

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

    ``ahead``: set by an adapter during a step, called once at that step's end with ``(t,
    latents, config)`` (the next step's latents, not evaluated yet); what it returns is evaluated
    in the same ``mx.eval`` as the latents (the split-compiled adapters build the next step's
    prelude and the gate's measurement there, so the next decision costs no sync of its own).
    ``guards``: flags (scalar bool arrays) an adapter adds during a step, evaluated with the
    latents and checked after: a True one stops the run (a lookahead that guessed the wrong
    step's input).
    """

    def __init__(
        self, gate: LiveGate, loop_sigmas: Callable[[Any], mx.array] | None = None
    ) -> None:
        self.gate = gate
        self.loop_sigmas = loop_sigmas  # the family's, where its loop steps on its own schedule
        self.active = False
        self.generation = 0
        self.ahead: Callable[[int, mx.array, Any], Sequence[mx.array]] | None = None
        self.guards: list[mx.array] = []
        self._bind_in_loop()

    def call_before_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        start = int(getattr(config, "init_time_step", 0) or 0)
        active = int(config.num_inference_steps) - start
        positions = schedule_positions(config, self.loop_sigmas)
        if positions is not None and len(positions) < start + active:
            positions = None
        self.gate.begin(active, None if positions is None else positions[start : start + active])
        self.generation += 1
        self.ahead = None
        self.guards = []
        self.active = True

    def _bind_in_loop(self) -> None:
        # mflux's loop asks every in-loop callback's signature on every step (does it take
        # ``denoised``?): a plain function that carries its signature answers at once, where a
        # bound method's would be rebuilt each time.
        def call_in_loop(
            t: int,
            seed: int,
            prompt: str,
            latents: mx.array,
            config: Any,
            time_steps: Any,
            **kwargs: Any,
        ) -> None:
            self._close_step(t, latents, config)

        call_in_loop.__signature__ = inspect.signature(call_in_loop)  # type: ignore[attr-defined]
        self.call_in_loop = call_in_loop

    def call_in_loop(  # the protocol's method; each instance answers with its own function
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any,
        **kwargs: Any,
    ) -> None:
        self._close_step(t, latents, config)

    def _close_step(self, t: int, latents: mx.array, config: Any) -> None:
        ahead, self.ahead = self.ahead, None
        extra = ahead(t, latents, config) if ahead is not None else ()
        guards, self.guards = self.guards, []
        # One sync per step: the residuals, the next step's prelude and the guards included.
        mx.eval(latents, *self.gate.unevaluated(), *extra, *guards)
        if any(guard.item() for guard in guards):
            raise RuntimeError(
                "the gate's lookahead built a step from other inputs than mflux's loop passed"
            )
        self.gate.end_step()

    def call_after_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        self._close()

    def _close(self) -> None:
        self.active = False
        self.ahead = None
        self.guards = []
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
        self._close()


def schedule_positions(
    config: Any, loop_sigmas: Callable[[Any], mx.array] | None = None
) -> tuple[float, ...] | None:
    """Each step's position on the run's schedule, as a forecast fill spaces its differences
    (``app.gate.fill``): the sigmas the loop steps on (the family's own where its loop steps
    outside ``config.scheduler``: ``LatentPreview.loop_sigmas``), else the scheduler's
    timesteps; None where the scheduler exposes neither (the gate then spaces steps evenly).
    Read once per generation."""
    if loop_sigmas is not None:
        values = loop_sigmas(config)
    else:
        scheduler = getattr(config, "scheduler", None)
        values = getattr(scheduler, "sigmas", None)
        if values is None:
            values = getattr(scheduler, "timesteps", None)
    if not isinstance(values, mx.array):
        return None
    return tuple(cast(list[float], values.astype(mx.float32).reshape(-1).tolist()))


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
