"""How sure are the evaluation figures? Intervals for each score and paired differences.

    python -m lab.demo.compare lab/demo/results/eval-demo.json lab/demo/results/eval-demo-turbo.json

100 prompts leave a score uncertain by several points, so every score gets a 95% Wilson interval.
Two evaluations on the same prompts and seeds (every ``eval-*.json`` is) are compared prompt by
prompt: the difference of their shares with a 95% interval from a seeded paired bootstrap (the
prompts resampled together, so what both get right or wrong cancels).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from lab.demo.reports import emit_json

KEYS = ("colour", "shape", "position", "count", "all")
Z95 = 1.959963984540054  # two-sided 95% normal quantile
BOOTSTRAP_SAMPLES = 10_000
BOOTSTRAP_SEED = 0


def wilson_interval(right: int, total: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a share of ``right`` out of ``total``."""
    if total <= 0:
        raise ValueError("no prompts")
    p = right / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(
    a: list[bool], b: list[bool], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, float]:
    """share(b) − share(a) over the same prompts, with a 95% paired-bootstrap interval."""
    if len(a) != len(b) or not a:
        raise ValueError("the two evaluations must cover the same, non-empty list of prompts")
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(len(diff), size=(samples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "difference": float(diff.mean()),
        "low": float(low),
        "high": float(high),
        "only_a": int((diff < 0).sum()),
        "only_b": int((diff > 0).sum()),
    }


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def describe(path: Path, report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each score of one evaluation file (``report``: its contents, when already read)."""
    report = report if report is not None else _load(path)
    rows = report["per_prompt"]
    scores = {}
    for key in KEYS:
        right = sum(bool(row[key]) for row in rows)
        low, high = wilson_interval(right, len(rows))
        scores[key] = {"share": right / len(rows), "low": low, "high": high}
    return {
        "file": str(path),
        "variant": report.get("variant"),
        "steps": report.get("steps"),
        "guidance": report.get("guidance"),
        "prompts": len(rows),
        "scores": scores,
    }


def compare(a: Path, b: Path) -> dict[str, Any]:
    report_a, report_b = _load(a), _load(b)
    rows_a, rows_b = report_a["per_prompt"], report_b["per_prompt"]
    if [r["prompt"] for r in rows_a] != [r["prompt"] for r in rows_b]:
        raise ValueError(f"{a} and {b} do not score the same prompts in the same order")
    return {
        "a": describe(a, report_a),
        "b": describe(b, report_b),
        "b_minus_a": {
            key: paired_difference([bool(r[key]) for r in rows_a], [bool(r[key]) for r in rows_b])
            for key in KEYS
        },
        "method": f"Wilson 95% per score; paired bootstrap ({BOOTSTRAP_SAMPLES} resamples of the "
        f"prompts, seed {BOOTSTRAP_SEED}) for b − a",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("a", type=Path, help="an eval-*.json (the reference)")
    parser.add_argument("b", type=Path, nargs="?", help="another on the same prompts")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        result = compare(args.a, args.b) if args.b else describe(args.a)
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"compare: {exc}") from None
    emit_json(result, args.out)


if __name__ == "__main__":
    main()
