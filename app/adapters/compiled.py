"""Compiling the one gated step (``app.adapters.step``) where mflux compiles its own forward.

A compiled function traces its Python once per input signature, so the gate's ``if`` cannot sit
inside it: ``GatedStep`` compiles its parts (prelude, body, tail; the measurement here) and
decides between them in Python, on a value already evaluated. A gate that reads a tap needs its
value before the step branches, so the next step's prelude and measurement are built at the end
of this one (``LookAhead.look_ahead``, called by the gate's lifecycle with the next step's
latents) and evaluated in the same ``mx.eval`` as those latents, the one sync mflux's loop has
anyway. The next step checks it was built from its own latents (by identity) and timestep (a
guard evaluated with its latents); a step with nothing built ahead (the first, the first after a
resumed pass's replayed steps) builds its prelude itself and its decision waits for it. A gate
that reads no tap (MagCache) decides first and runs only what that decision needs.

Step-varying values (latents, timestep) enter as arrays and every shape is fixed within a
generation, so each function traces once per generation (per caption length where CFG branches
differ); the guidance scale is a Python float, a constant exactly as in mflux's own predict. The
functions are built once per ``generate_image`` (like mflux's predict), so parameter changes
between generations are seen. Compiled vs eager follows the pipeline itself: if its own predict
is an ``mx.compile``'d function (mflux on Linux/CUDA and non-base M-series), the gated step is
compiled too; otherwise it stays eager.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mlx.core as mx
from mlx.utils import tree_flatten

from app.adapters.common import GateState
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
    prelude: dict[str, Any]
    measured: mx.array | None


class LookAhead:
    """The one-sync look-ahead of a compiled gated step (``app.adapters.step.GatedStep``): the
    decision's step reads its prelude (a dict whose ``"signal"`` the gate decides on) and the
    gate's measurement through ``prelude_ahead``, which arms the lifecycle's ``ahead`` hook, and
    at the step's end ``look_ahead`` builds the next step's the same way, from the next latents,
    evaluated with them. One per generation (the compiled functions live as long). Eager steps
    (``compiled`` False) build their prelude in the step and let the gate measure it.
    """

    def __init__(self, state: GateState, *, compiled: bool = True) -> None:
        self.gate = state.gate
        self.lifecycle = state.lifecycle
        self.traces = state.traces
        self.compiled = compiled
        self.reads_signal = state.gate.signal is not Signal.none
        self.measure = counted_compile("measure", state.gate.measure, state.traces)
        self._ahead: _Ahead | None = None
        self._build: Callable[..., Any] | None = None
        self._args: tuple[Any, ...] = ()
        self._look_ahead = self.look_ahead  # bound once: handed to the lifecycle every step

    def next_timestep(self, config: Any, t: int) -> mx.array:
        """Step ``t``'s timestep exactly as mflux's loop passes it to the step."""
        raise NotImplementedError

    def prelude_ahead(
        self,
        build: Callable[..., dict[str, Any]],
        latents: mx.array,
        timestep: mx.array,
        *args: Any,
    ) -> tuple[dict[str, Any], mx.array | None]:
        """This step's prelude ``build(latents, timestep, *args)`` and the gate's measurement of
        its signal: the ones the previous step's end built where they were built from these very
        latents (their timestep checked by a guard evaluated with this step's latents), else
        built now (the decision then waits for them). Arms the look-ahead."""
        ahead, self._ahead = self._ahead, None
        self._build, self._args = build, args
        self.lifecycle.ahead = self._look_ahead
        if ahead is not None and ahead.latents is latents:
            self.lifecycle.guards.append(mx.any(ahead.timestep != timestep))
            return ahead.prelude, ahead.measured
        pre = build(latents, timestep, *args)
        return pre, self._measured(pre)

    def _measured(self, pre: dict[str, Any]) -> mx.array | None:
        anchor = self.gate.anchor
        return None if anchor is None else self.measure(pre["signal"], anchor)

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
        leaves = [leaf for _, leaf in tree_flatten(pre) if isinstance(leaf, mx.array)]
        return (*leaves, measured) if measured is not None else tuple(leaves)
