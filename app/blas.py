"""Load a real BLAS before MLX on Linux.

The mlx-cpu wheel bundles the reference netlib BLAS, 25–90× slower than OpenBLAS for float32 GEMM.
``libmlx`` binds ``cblas_sgemm`` dynamically, so an OpenBLAS loaded first with global scope wins.
The headless OpenCV wheel (an mflux dependency) ships one. Call before the first ``import mlx``.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

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
