"""The basis of SSIMULACRA2's "visible change" line (``app.metrics.VISIBLE_CHANGE``).

Re-runs the local-difference survey's demo runs (lab/target/results/local-diff-survey.json: the
10 prompts of the committed threshold sweep at 5 thresholds, plus the lost-circle case) through the
real engine (resumed gated passes from one vanilla per prompt) and records each run's SSIM, local
difference and SSIMULACRA2 (``app.metrics.ssimulacra2``, gated against vanilla). The survey's runs
were looked at side by side: every one at or below its ``DRIFT_UP_TO`` local difference was
ordinary drift, every one from ``LOSS_FROM`` a lost or reshaped object. The line is the midpoint of
the gap between the two classes' SSIMULACRA2 scores, where they separate.

    uv run python -m lab.target.ssimulacra2_line --out lab/target/results/ssimulacra2-line.json
"""

from __future__ import annotations

import argparse
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.blas import preload_openblas
from app.fileio.jsonio import dumps_json, write_json_atomic
from lab.target.local_diff_survey import DRIFT_UP_TO, LOSS_FROM
from lab.target.local_diff_survey import RESULT as SURVEY

RESULT = Path(__file__).parent / "results" / "ssimulacra2-line.json"


def classify(local_diff: float) -> str:
    """The survey's class of a run by its local difference (looked at side by side)."""
    if local_diff <= DRIFT_UP_TO:
        return "drift"
    return "loss" if local_diff >= LOSS_FROM else "between"


def line(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The lowest drift score, the highest loss score and the midpoint between them (None where
    the classes overlap)."""
    drift = [r["ssimulacra2"] for r in rows if r["class"] == "drift"]
    loss = [r["ssimulacra2"] for r in rows if r["class"] == "loss"]
    low_drift, high_loss = min(drift), max(loss)
    return {
        "lowest_drift": low_drift,
        "highest_loss": high_loss,
        "midpoint": (low_drift + high_loss) / 2 if high_loss < low_drift else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SSIMULACRA2 against the local-diff survey.")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    preload_openblas()
    from app.engine.engine import Engine
    from app.engine.events import RunFinished
    from app.engine.request import make_request

    survey = json.loads(SURVEY.read_text(encoding="utf-8"))
    thresholds = tuple(survey["thresholds"])
    cases = list(dict.fromkeys((r["prompt"], r["seed"]) for r in survey["rows"]))
    engine = Engine()
    rows = []
    for prompt, seed in cases:
        base = make_request("demo", prompt, seed=seed, threshold=thresholds[0])
        for i, threshold in enumerate(thresholds):
            request = replace(base, threshold=threshold, resume=i > 0)
            events: list[object] = []
            engine.run(1, request, events.append, threading.Event())
            report = next(e.report for e in events if isinstance(e, RunFinished))
            assert report.local_diff is not None and report.ssimulacra2 is not None
            rows.append(
                {
                    "prompt": prompt,
                    "seed": seed,
                    "threshold": threshold,
                    "skipped": report.gated.skipped,
                    "ssim": report.ssim,
                    "local_diff": report.local_diff.value,
                    "ssimulacra2": report.ssimulacra2,
                    "class": classify(report.local_diff.value),
                }
            )
            print(dumps_json(rows[-1]))
    engine.close()
    result = {"thresholds": thresholds, "rows": rows, "line": line(rows)}
    write_json_atomic(args.out, result, indent=1)
    print(dumps_json(result["line"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
