"""The README's two target-search examples, run as the README gives them and kept as records.

    uv run python -m lab.target.readme_examples          # both, into lab/target/results/
    uv run python -m lab.target.readme_examples --gate magcache

Each example is the README's ``teacache-studio generate … --target-ssim 0.97`` command on the
demo (seed 701103987, "two red circles and a blue star on a yellow background", where threshold
0.1 loses a red circle). The record is the command's own ``report.json`` (every threshold tried,
the chosen run's skips, SSIM and local difference) with the command and the host beside it;
``readme_figures`` renders what the README says about them, and tests/lab/test_readme_figures.py
checks that the README says exactly that. About 20 s each on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from lab.demo.reports import write_json
from lab.readme_figures import Passage, fixed

RESULTS = Path(__file__).parent / "results"
PROMPT = "two red circles and a blue star on a yellow background"
SEED = 701103987
TARGET_SSIM = 0.97
GATES = ("teacache", "magcache")


def record_path(gate: str) -> Path:
    return RESULTS / f"target-search-demo-{gate}.json"


def argv(gate: str) -> list[str]:
    """The README's command for ``gate`` (the TeaCache one names no gate: it is the default)."""
    args = ["generate", "--variant", "demo", "--prompt", PROMPT, "--seed", str(SEED)]
    args += ["--gate", "magcache"] if gate == "magcache" else []
    return [*args, "--target-ssim", f"{TARGET_SSIM:g}"]


def run(gate: str) -> dict[str, Any]:
    """Run the README's command through the CLI and return its report with the command."""
    from app.cli.main import main
    from app.hardware import host_info

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out"
        code = main([*argv(gate), "--out", str(out)])
        if code != 0:
            raise SystemExit(f"teacache-studio generate exited {code}")
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {
        "command": "uv run teacache-studio " + shlex.join([*argv(gate), "--out", "out"]),
        "host": host_info(),
        "report": report,
    }


def load(gate: str) -> dict[str, Any]:
    return json.loads(record_path(gate).read_text(encoding="utf-8"))


def readme_figures() -> list[Passage]:
    """What the README says about each search: the passes, the chosen threshold and its figures
    (and, for TeaCache, the first pass's, which the target rejected)."""
    tea, mag = (load(gate)["report"] for gate in GATES)
    first = tea["target_search"][0]
    return [
        Passage(
            "lab/target/results/target-search-demo-teacache.json",
            "ran {passes} passes and chose threshold {threshold}: {skipped} of {steps} steps "
            "skipped, SSIM {ssim}, local difference {local}; threshold {first} ({first_skipped} "
            "skipped, SSIM {first_ssim}, local difference {first_local}: a circle lost) was "
            "rejected.",
            {
                **_chosen(tea),
                "local": fixed(tea["local_diff"], 3),
                "first": f"{first['threshold']:g}",
                "first_skipped": str(first["skipped"]),
                "first_ssim": fixed(first["ssim"], 3),
                "first_local": fixed(first["local_diff"], 2),
            },
        ),
        Passage(
            "lab/target/results/target-search-demo-magcache.json",
            "On the demo that seed's search chose threshold {threshold}: {skipped} of {steps} "
            "steps skipped, SSIM {ssim} ({passes} passes).",
            _chosen(mag),
        ),
    ]


def _chosen(report: dict[str, Any]) -> dict[str, str]:
    return {
        "passes": str(len(report["target_search"])),
        "threshold": f"{report['threshold']:g}",
        "skipped": str(report["skipped"]),
        "steps": str(report["steps"]),
        "ssim": fixed(report["ssim"], 4),
    }


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The README's target-search examples")
    parser.add_argument("--gate", choices=GATES, action="append", help="default: both")
    parsed = parser.parse_args(args)
    from app.blas import preload_openblas

    preload_openblas()
    for gate in parsed.gate or GATES:
        record = run(gate)
        write_json(record_path(gate), record)
        print(f"{record_path(gate)}: {record['report']['target_note']}")


if __name__ == "__main__":
    main()
