"""Classifier-free guidance's two transformer calls, run side by side on the CPU.

MLX's CPU backend runs each stream's kernels on one thread, and on x86 Linux its transcendental
kernels (exp, sigmoid, softmax) are scalar: half of a demo transformer call is SiLU and softmax on
one core while the second core idles. Inside :func:`concurrent_branches`, the conditional and
unconditional calls of a step go to two CPU streams of their own (one per core) and OpenBLAS runs
one thread per GEMM, so the two branches' matrix products do not fight over the cores.

Numerics: a stream does not change any kernel's arithmetic, but a one-thread OpenBLAS GEMM rounds
differently from a two-thread one, so whether a generation is concurrent fixes its bits. Vanilla
and gated runs agree because the pipeline opens the context around both (``generate_image``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager

import mlx.core as mx

from app.blas import blas_threads

_local = threading.local()  # MLX streams are per thread: the worker that generates owns its pair


@contextlib.contextmanager
def concurrent_branches(enabled: bool = True) -> Iterator[None]:
    """Within this context (on this thread), :func:`branch_stream` hands out two CPU streams."""
    if not enabled:
        yield
        return
    streams = getattr(_local, "streams", None)
    if streams is None:
        streams = _local.streams = (mx.new_stream(mx.cpu), mx.new_stream(mx.cpu))
    previous = getattr(_local, "active", None)
    _local.active = streams
    try:
        with blas_threads(1):
            yield
    finally:
        _local.active = previous


def branch_stream(index: int) -> AbstractContextManager[object]:
    """The stream for CFG branch ``index`` (0 conditional, 1 unconditional) when concurrency is
    on for this thread; otherwise a no-op context (the default stream)."""
    active = getattr(_local, "active", None)
    if active is None:
        return contextlib.nullcontext()
    return mx.stream(active[index])


def cpu_concurrency_helps(guidance: float | None) -> bool:
    """Two branches exist only under guidance > 1, and only the CPU runs one stream per core."""
    return guidance is not None and guidance > 1.0 and mx.default_device() == mx.cpu
