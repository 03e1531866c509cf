"""The split-compiled gated path for families whose predict mflux wraps in ``mx.compile``.

A compiled function traces its Python once per input signature, so the gate's ``if`` cannot sit
inside it. The step is split where the decision is made:

1. ``prelude`` (compiled): everything up to the gate's signal, plus what body and tail reuse;
2. ``gate.decide(signal)`` (eager): the one host sync of the rel-L1, and Python branching;
3. ``body`` (compiled): the transformer body and tail of every CFG branch, the CFG combination,
   and each branch's body output over the tokens the tail reads (for the residual); or
4. ``tail`` (compiled): the tail of ``input + cached residual`` per branch, and CFG.

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

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import mlx.core as mx

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
