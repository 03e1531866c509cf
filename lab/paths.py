"""Where the lab's committed results live (the app's runtime resources are in ``app.paths``)."""

from __future__ import annotations

from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent
DEMO_RESULTS = LAB_DIR / "demo" / "results"  # evaluations, calibration pairs, sweeps, profiles
DEMO_TRAINING = LAB_DIR / "demo" / "training"  # every training run: logs, reports, samples
BENCH_RESULTS = LAB_DIR / "bench" / "results"  # adapter overhead, GUI responsiveness
