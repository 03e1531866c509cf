"""Benchmark arithmetic: per-condition median, min and max, and the speedup against the ideal.

The ideal speedup of a gated run is ``active steps / computed steps``: what skipping would give if
a skipped step cost nothing and a computed step cost what it costs in vanilla. The ratio
measured/ideal therefore says how much of the skip's promise survives the gate's own work (the
signal, the residual, the host sync per step) and the fixed per-step costs (scheduler, callbacks).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def spread(values: Sequence[float]) -> dict[str, float | int] | None:
    """Median, min and max (and n) of the values; None when there are none."""
    clean = [float(v) for v in values if v is not None]
    if not clean:
        return None
    return {
        "median": statistics.median(clean),
        "min": min(clean),
        "max": max(clean),
        "n": len(clean),
    }


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _median(summary: dict[str, Any] | None) -> float | None:
    return None if summary is None else float(summary["median"])


def summarize_condition(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One condition's repetitions → times (median/min/max) with the engagement beside them."""
    runs = sorted(runs, key=lambda r: r["rep"])
    patterns = [r["pattern"] for r in runs]
    peaks = [int(r["peak_memory_bytes"]) for r in runs if r.get("peak_memory_bytes") is not None]
    return {
        "reps": len(runs),
        "loop_seconds": spread([r["loop_seconds"] for r in runs]),
        "wall_seconds": spread([r["wall_seconds"] for r in runs]),
        "first_generation_loop_seconds": spread(
            [r["first_generation"]["loop_seconds"] for r in runs if r.get("first_generation")]
        ),
        "load_seconds": spread([r["load_seconds"] for r in runs]),
        "peak_memory_bytes": max(peaks) if peaks else None,
        "active_steps": runs[0]["active_steps"] if runs else None,
        "skipped": [r["skipped"] for r in runs],
        "computed": [r["computed"] for r in runs],
        "patterns": patterns,
        "pattern_stable": len(set(patterns)) <= 1,
        "longest_skip_streak": [r["longest_skip_streak"] for r in runs],
        # skipped steps that forecast their change (``--fill forecast``); absent in older runs
        "forecast_steps": [r.get("forecast_steps", 0) for r in runs],
    }


def ideal_speedup(active_steps: int | None, computed: Sequence[int]) -> float | None:
    """Active over computed steps (median computed count across repetitions)."""
    if not active_steps or not computed:
        return None
    median_computed = statistics.median(computed)
    return active_steps / median_computed if median_computed > 0 else None


def speedups(conditions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Median-to-median speedups of the gated run, and each one against the ideal."""
    vanilla = _median(conditions.get("vanilla", {}).get("loop_seconds"))
    gate_off = _median(conditions.get("gate_off", {}).get("loop_seconds"))
    gated = _median(conditions.get("gated", {}).get("loop_seconds"))
    gated_info = conditions.get("gated", {})
    ideal = ideal_speedup(gated_info.get("active_steps"), gated_info.get("computed", []))
    vs_vanilla = _ratio(vanilla, gated)
    vs_gate_off = _ratio(gate_off, gated)
    wall_vanilla = _median(conditions.get("vanilla", {}).get("wall_seconds"))
    wall_gated = _median(gated_info.get("wall_seconds"))
    return {
        "basis": "median denoising-loop seconds (load, text encoding and VAE decode excluded)",
        "gated_vs_vanilla": vs_vanilla,
        "gated_vs_gate_off": vs_gate_off,
        "gate_off_vs_vanilla": _ratio(vanilla, gate_off),
        "ideal": ideal,
        "measured_over_ideal": _ratio(vs_vanilla, ideal),
        "gating_over_ideal": _ratio(vs_gate_off, ideal),
        "wall_gated_vs_vanilla": _ratio(wall_vanilla, wall_gated),
    }


def step_costs(runs: Sequence[dict[str, Any]], condition: str = "gated") -> dict[str, Any] | None:
    """Median seconds of a computed and of a skipped step in the runs of ``condition`` (each step
    timed from one loop callback to the next: transformer or tail, scheduler step, callbacks, the
    step's sync), and their ratio. None without a run of it that skipped."""
    computed: list[float] = []
    skipped: list[float] = []
    for run in runs:
        if run.get("condition") != condition or not run.get("step_seconds"):
            continue
        for index, (seconds, letter) in enumerate(
            zip(run["step_seconds"], run["pattern"], strict=False)
        ):
            if index == 0:
                continue  # step 0 also carries the time from before_loop
            (skipped if letter == "S" else computed).append(float(seconds))
    if not computed or not skipped:
        return None
    c, s = statistics.median(computed), statistics.median(skipped)
    return {
        "basis": "median over the gated runs' steps after step 0, loop callback to loop callback",
        "computed_seconds": c,
        "skipped_seconds": s,
        "skipped_over_computed": s / c if c > 0 else None,
    }
