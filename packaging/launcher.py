"""Entry script of the frozen app: PyInstaller runs this file as ``__main__``."""

from __future__ import annotations

import multiprocessing
import sys


def run() -> int:
    # A spawned child of a frozen app re-runs this script; freeze_support() turns it into the
    # worker instead of a second app (macOS starts processes with spawn).
    multiprocessing.freeze_support()

    # Linux: load OpenBLAS before the first `import mlx` (app/blas.py explains); no-op on macOS.
    from app.blas import preload_openblas

    preload_openblas()

    from app.__main__ import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
