"""The split-compiled gated path for families whose predict (or forward) mflux wraps in
``mx.compile``.

A compiled function traces its Python once per input signature, so the gate's ``if`` cannot sit
inside it. The step is split where the decision is made:

1. ``prelude`` (compiled): what body and tail read, and the gate's signal where its kind reads
   one (``LiveGate.signal``); ``measure`` (compiled): the gate's measurement of that signal
   against the previous step's;
2. ``gate.decide(signal, measured)`` (eager): Python branching on a value already evaluated;
3. ``body`` (compiled): the transformer body and tail of every CFG branch, the CFG combination,
   and each branch's residual over the tokens the tail reads; or
4. ``tail`` (compiled): the tail of ``input + cached residual`` per branch, and CFG.

No host sync of its own. A gate that reads a signal needs its value before the step branches,
so the next step's prelude and measurement are built at the end of this one (``LookAhead.
look_ahead``, called by the gate's lifecycle with the next step's latents) and evaluated in the
same ``mx.eval`` as those latents, the one sync mflux's loop has anyway: the decision reads a
value that is already there. The next step checks it was built from its own latents (by
identity) and timestep (a guard evaluated with its latents); a step with nothing built ahead
(the first, the first after a resumed pass's replayed steps) builds its prelude itself and its
decision waits for it. A gate that reads no signal (MagCache) decides first and runs only what
that decision needs: a skipped step is the prelude's inputs and the tail, nothing else.
``SplitStep`` drives the look-ahead from a predict (FLUX.2, Z-Image); Qwen-Image 2.1's adapter
from its transformer's conditional call (app/adapters/qwen_image21.py).

Step-varying values (latents, timestep) enter as arrays and every shape is fixed within a
generation, so each function traces once per generation (per caption length where CFG branches
differ); the guidance scale is a Python float, a constant exactly as in mflux's own predict. The
functions are built once per ``generate_image`` (like mflux's predict), so parameter changes
between generations are seen.

Compiled vs eager follows the pipeline itself: if its own ``_predict`` factory returns an
``mx.compile``'d function (mflux on Linux/CUDA and non-base M-series), the gated path is compiled
too; if it returns a plain function (base/Pro M1/M2, and the embedded demo, which never compiles),
the gated path stays eager. At threshold 0 and outside a generation the adapters call the
pipeline's own predict, untouched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mlx.core as mx

from app.adapters.common import COND, UNCOND, GateState
from app.gate.signals import Signal

F = TypeVar("F", bound=Callable[..., Any])

COMPILED_TYPE: type = type(mx.compile(lambda x: x))


def is_compiled(fn: Any) -> bool:
    """True for a function returned by ``mx.compile``."""
    return isinstance(fn, COMPILED_TYPE)


def counted_compile(name: str, fn: F, traces: Counter[str]) -> F:
    """``mx.compile(fn)`` that adds one to ``traces[name]`` each time MLX traces it (the Python
    body runs only while tracing, so the count is the number of (re)compilations)."""

    def traced(*args: Any) -> Any:
        traces[name] += 1
        return fn(*args)

    return mx.compile(traced)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A step's prelude and measurement, built at the previous step's end."""

    latents: mx.array
    timestep: mx.array
    prelude: tuple[Any, ...]
    measured: mx.array | None


class LookAhead(ABC):
    """The one-sync look-ahead every split-compiled family shares: the decision's step reads its
    prelude (signal last) and the gate's measurement through ``prelude_ahead``, which arms the
    lifecycle's ``ahead`` hook, and at the step's end ``look_ahead`` builds the next step's the
    same way, from the next latents, evaluated with them. One per generation (the family's
    compiled functions live as long).

    ``SplitStep`` drives it from a family's predict (FLUX.2, Z-Image); Qwen-Image 2.1 from the
    transformer's conditional call, whose prelude differs by mflux's path (text cache or joint
    sequence) and by the caption's geometry, so a prelude is given as a compiled function and its
    arguments after the latents and timestep.
    """

    def __init__(self, state: GateState) -> None:
        self.gate = state.gate
        self.lifecycle = state.lifecycle
        self.traces = state.traces
        self.reads_signal = state.gate.signal is not Signal.none
        self.measure = counted_compile("measure", state.gate.measure, state.traces)
        self._ahead: _Ahead | None = None
        self._build: Callable[..., Any] | None = None
        self._args: tuple[Any, ...] = ()
        self._look_ahead = self.look_ahead  # bound once: handed to the lifecycle every step

    @staticmethod
    @abstractmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        """Step ``t``'s timestep exactly as mflux's loop passes it to predict."""

    def prelude_ahead(
        self,
        build: Callable[..., Any],
        latents: mx.array,
        timestep: mx.array,
        *args: Any,
    ) -> tuple[Any, mx.array | None]:
        """This step's prelude ``build(latents, timestep, *args)`` and the gate's measurement of
        its signal (its last item): the ones the previous step's end built where they were built
        from these very latents (their timestep checked by a guard evaluated with this step's
        latents), else built now (the decision then waits for them). Arms the look-ahead."""
        ahead, self._ahead = self._ahead, None
        self._build, self._args = build, args
        self.lifecycle.ahead = self._look_ahead
        if ahead is not None and ahead.latents is latents:
            self.lifecycle.guards.append(mx.any(ahead.timestep != timestep))
            return ahead.prelude, ahead.measured
        pre = build(latents, timestep, *args)
        return pre, self._measured(pre)

    def _measured(self, pre: Any) -> mx.array | None:
        anchor = self.gate.anchor
        return None if anchor is None else self.measure(pre[-1], anchor)

    def look_ahead(self, t: int, latents: mx.array, config: Any) -> Sequence[mx.array]:
        """Called by the lifecycle at step ``t``'s end with the next step's latents: builds the
        next step's prelude and measurement, to be evaluated with those latents."""
        following = t + 1
        build = self._build
        if build is None or following >= config.num_inference_steps:
            self._build, self._args = None, ()  # the last step: let go of its inputs
            return ()
        timestep = self.next_timestep(config, following)
        pre = build(latents, timestep, *self._args)
        measured = self._measured(pre)
        self._ahead = _Ahead(latents, timestep, pre, measured)
        return (*pre, measured) if measured is not None else tuple(pre)


class SplitStep(LookAhead):
    """One generation's split-compiled gated step: what the predict families share (the prelude
    from the look-ahead or built now, the decision, body or tail). A family gives its compiled
    parts.

    ``inputs`` is the family's tuple of the step's other arguments (caption embeddings, ids,
    guidance): the same objects on every step of a generation, handed on to its parts.
    """

    # -- the family's parts ---------------------------------------------------------------------
    @abstractmethod
    def prelude(self, latents: mx.array, timestep: mx.array, inputs: tuple[Any, ...]) -> Any:
        """Compiled: what body and tail read, the signal last where the gate reads one."""

    @abstractmethod
    def compute(self, pre: Any, inputs: tuple[Any, ...], store: bool) -> mx.array:
        """The body and tail of every branch; each branch's residual kept where ``store``."""

    @abstractmethod
    def skip(self, pre: Any, inputs: tuple[Any, ...]) -> mx.array:
        """The tail of ``input + cached residual`` per branch."""

    # -- the step ---------------------------------------------------------------------------------
    def step(self, latents: mx.array, timestep: mx.array, inputs: tuple[Any, ...]) -> mx.array:
        gate = self.gate
        if self.reads_signal:
            pre, measured = self.prelude_ahead(self.prelude, latents, timestep, inputs)
            verdict = gate.decide(pre[-1], measured)
        else:
            verdict = gate.decide(None)
            pre = self.prelude(latents, timestep, inputs)
        if verdict.decision.computes:
            return self.compute(pre, inputs, verdict.store_residual)
        return self.skip(pre, inputs)

    def residuals(self, cfg: bool) -> tuple[mx.array, mx.array | None]:
        """The cached residuals a skipped step adds (conditional, unconditional under CFG)."""
        return self.gate.residual(COND), self.gate.residual(UNCOND) if cfg else None

    def keep(self, residuals: Sequence[mx.array]) -> None:
        """Each branch's residual from a compiled body, kept where this step's verdict stores."""
        for branch, residual in zip((COND, UNCOND), residuals, strict=False):
            self.gate.keep_residual(residual, branch)
