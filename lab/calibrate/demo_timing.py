"""How long calibrating the demo takes, as a user runs it: ``teacache-studio calibrate`` in a fresh
process (imports, the model's load and its untimed warm-up included), each prompt one vanilla
pass of the demo's 28 steps at 128 × 128, then the threshold trials that choose each gate's
default (``app.engine.threshold_rule``), and what it made (R², held-out R², MagCache's spread,
the thresholds chosen and the trial passes they took). The same ``Calibrate`` job the window's
Calibrate This Model… runs.

    uv run python -m lab.calibrate.demo_timing --prompts 5 10

One process per prompt count, in a throwaway data folder; the host's load average before and
after each is recorded beside its time (this machine is shared), with the hardware and versions.
Writes ``lab/calibrate/results/demo-calibration-cpu.json``; the README quotes it
(``readme_figures``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.fileio.jsonio import write_json_atomic
from lab.readme_figures import Passage, fixed

RESULTS = Path(__file__).resolve().parent / "results"
RESULT = RESULTS / "demo-calibration-cpu.json"
ROOT = Path(__file__).resolve().parents[2]


def measure(count: int) -> dict[str, Any]:
    """One cold ``calibrate`` process over the first ``count`` suggested demo prompts."""
    with tempfile.TemporaryDirectory() as home:
        prompts = Path(home) / "prompts.txt"
        prompts.write_text("\n".join(DEMO_PROMPTS[:count]) + "\n", encoding="utf-8")
        env = {**os.environ, "TEACACHE_STUDIO_HOME": home}
        command = [sys.executable, "-m", "app", "calibrate", "--variant", "demo",
                   "--prompts", str(prompts), "--name", "timing", "--quiet"]  # fmt: skip
        load_before = os.getloadavg()
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        load_after = os.getloadavg()
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        data = json.loads(
            (Path(home) / "data" / "calibrations" / "demo+timing.json").read_text(encoding="utf-8")
        )
    fit = data["fit"]
    chosen = fit["fits"][fit["chosen"]]
    return {
        "prompts": count,
        "steps": data["recipe"]["steps"],
        "size": data["recipe"]["size"],
        "wall_seconds": round(wall, 2),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
        "fit_mode": fit["chosen"],
        "r2": chosen["r2"],
        "heldout_r2": chosen["heldout_r2"],
        "heldout_prompts": len(fit["heldout_prompts"]),
        "pairs": fit["fit_pairs"],
        "magcache_spread": data["magcache"]["provenance"]["fit_value"],
        "thresholds": {gate: _chosen(choice) for gate, choice in data["threshold_choice"].items()},
        "versions": data["versions"],
    }


def _chosen(choice: dict[str, Any]) -> dict[str, Any]:
    """A gate's default threshold as the calibration chose it, its row, and the trial passes."""
    row = next((r for r in choice["rows"] if r["threshold"] == choice["threshold"]), None)
    return {
        "threshold": choice["threshold"],
        "source": choice["source"],
        "mean_skipped": None if row is None else row["mean_skipped"],
        "min_ssim": None if row is None else row["min_ssim"],
        "thresholds_tried": len(choice["rows"]),
        "trial_passes": sum(t["ran"] for t in choice["trials"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    from app.hardware import hardware_label

    runs = [measure(n) for n in args.prompts]
    record = {
        "command": "teacache-studio calibrate --variant demo --prompts <first N suggested> "
        "(one cold process each)",
        "hardware": hardware_label(runs[0]["versions"]),
        "runs": runs,
    }
    write_json_atomic(args.out, record)
    for run in runs:
        print(
            f"{run['prompts']} prompts: {run['wall_seconds']:.1f} s, R² {run['r2']:.3f}, "
            f"held-out {run['heldout_r2']:.3f} (load {run['load_average_before'][0]:.1f})"
        )
    return 0


def load(path: Path = RESULT) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def readme_figures() -> list[Passage]:
    """The README's calibration timing: each prompt count's time, fit and the machine's load."""
    record = load()
    short, full = record["runs"][0], record["runs"][-1]
    cpu, cores, device = record["hardware"].split(", ")
    return [
        Passage(
            "lab/calibrate/results/demo-calibration-cpu.json",
            "On {cpu}, {cores} ({device}), calibrating the demo from the command line took "
            "**{short_s} s for "
            "{short_n} prompts** and {full_s} s for all {full_n} suggested ones ({steps} steps "
            "each, a cold process with the model's load, and {short_trials} and {full_trials} "
            "threshold trials; load average {load_short} and {load_full} on this shared "
            "machine); the fits scored R² {short_r2} and {full_r2} (held-out {short_held} and "
            "{full_held}), against the built-in demo calibration's 0.42, and chose TeaCache "
            "{short_tea} and MagCache {short_mag} on {short_n} prompts ({full_tea} and "
            "{full_mag} on {full_n}), where the shipped ones are 0.1 and 0.02.",
            {
                "cpu": cpu,
                "cores": cores,
                "device": device,
                "short_s": fixed(short["wall_seconds"], 0),
                "short_n": str(short["prompts"]),
                "full_s": fixed(full["wall_seconds"], 0),
                "full_n": str(full["prompts"]),
                "steps": str(short["steps"]),
                "load_short": fixed(short["load_average_before"][0], 1),
                "load_full": fixed(full["load_average_before"][0], 1),
                "short_r2": fixed(short["r2"], 2),
                "full_r2": fixed(full["r2"], 2),
                "short_held": fixed(short["heldout_r2"], 2),
                "full_held": fixed(full["heldout_r2"], 2),
                "short_trials": str(_trials(short)),
                "full_trials": str(_trials(full)),
                "short_tea": _threshold(short, "teacache"),
                "short_mag": _threshold(short, "magcache"),
                "full_tea": _threshold(full, "teacache"),
                "full_mag": _threshold(full, "magcache"),
            },
        )
    ]


def _trials(run: dict[str, Any]) -> int:
    return sum(chosen["trial_passes"] for chosen in run["thresholds"].values())


def _threshold(run: dict[str, Any], gate: str) -> str:
    value = run["thresholds"][gate]["threshold"]
    return "none" if value is None else f"{value:g}"


if __name__ == "__main__":
    raise SystemExit(main())
