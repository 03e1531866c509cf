"""Load a real BLAS before MLX on Linux.

The mlx-cpu wheel bundles the reference netlib BLAS, 25–90× slower than OpenBLAS for float32 GEMM.
``libmlx`` binds ``cblas_sgemm`` dynamically, so an OpenBLAS loaded first with global scope wins.
The headless OpenCV wheel (an mflux dependency) ships one. Call before the first ``import mlx``.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys
from collections.abc import Iterator
from typing import Any

_loaded: str | None = None


def preload_openblas() -> str | None:
    global _loaded
    if _loaded is not None or not sys.platform.startswith("linux"):
        return _loaded
    if os.environ.get("TEACACHE_STUDIO_NO_OPENBLAS"):
        return None
    patterns = ("opencv_python*.libs/libopenblas*.so*", "numpy.libs/libopenblas*.so*")
    for directory in sys.path:
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(directory, pattern))):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue
                _loaded = path
                return path
    return None


def _openblas_threads_api() -> tuple[Any, Any] | None:
    if _loaded is None:
        return None
    lib = ctypes.CDLL(_loaded)
    try:
        return lib.openblas_get_num_threads, lib.openblas_set_num_threads
    except AttributeError:  # a build with suffixed symbols: leave its threading alone
        return None


def openblas_threads() -> int | None:
    """OpenBLAS's current thread count, or None where no OpenBLAS was preloaded."""
    api = _openblas_threads_api()
    return None if api is None else int(api[0]())


@contextlib.contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Run with OpenBLAS limited to ``count`` threads (process-wide), then restore. A no-op where
    no OpenBLAS was preloaded (macOS uses Accelerate)."""
    api = _openblas_threads_api()
    if api is None:
        yield
        return
    get_threads, set_threads = api
    previous = int(get_threads())
    set_threads(count)
    try:
        yield
    finally:
        set_threads(previous)
