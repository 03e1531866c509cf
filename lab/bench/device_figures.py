"""The README's device performance figures, rendered from the committed results
(``uv run python -m lab.readme_figures --write``): the bench table (every report under
``resources/benchmarks/``), the real-size rows against the targets of issues #17 and #30, and the
profile of a skipped step (``lab/bench/results/skip-profile-h200.json``, written by
``lab/bench/device/profile_skip.py``), and the "This year's models" sentence with issue #29's
real-size ratios (``lab/bench/device/issue29.sh``). After a device batch (``issue17.sh`` or
``issue29.sh``)::

    uv run python -m lab.bench.device_figures DIR   # DIR: the batch's $OUT as it came back

copies each case's report (and its .md) where these figures read it, refusing a CPU dry run's,
and rewrites the README's figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench.table import BENCHMARKS_DIR, END_MARKER, START_MARKER, load_reports, readme_table
from lab.readme_figures import Block, Figure, Passage, fixed
from lab.readme_figures import main as write_readme

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "lab" / "bench" / "results" / "skip-profile-h200.json"
GATE_OFF_TARGET = 0.99  # gate off / vanilla: threshold 0 costs nothing (#17)
SKIP_TARGET = 0.01  # a skipped step against a computed one (#17, #30)


@dataclass(frozen=True)
class Target:
    """One real-size H200 report and the measured / ideal its issue asks of it."""

    file: str  # under resources/benchmarks/
    family: str
    measured_over_ideal: float
    issue: int


TARGETS = (
    Target("flux1-dev-1024-random-h200.json", "FLUX.1 dev", 0.97, 17),
    Target("flux2-klein-4b-1024-random-h200.json", "FLUX.2 Klein 4B", 0.98, 30),
    Target("flux2-klein-4b-512-random-h200.json", "FLUX.2 Klein 4B", 0.95, 30),
    Target("z-image-1024-random-h200.json", "Z-Image", 0.96, 30),
    Target("qwen-image-1024-random-h200.json", "Qwen-Image", 0.97, 17),
)


def _short(ms: float) -> str:
    """A step time in ms to about three figures, never in exponent form."""
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def _met(text: str, ok: bool) -> str:
    return f"**{text}**" if ok else text


def _label(target: Target, recipe: dict[str, Any]) -> str:
    notes = []
    if (recipe["width"], recipe["height"]) != (1024, 1024):
        width, height = recipe["width"], recipe["height"]
        notes.append(f"{width}²" if width == height else f"{width}×{height}")
    if recipe["steps"] != 20:
        notes.append(f"{recipe['steps']} steps")
    return ", ".join((target.family, *notes))


def targets_table(directory: Path = BENCHMARKS_DIR) -> str:
    """Each real-size H200 row against its issue's targets, bold where met (as the table's
    figures round: 0.985 shows 0.99 and meets ≥ 0.99)."""
    lines = [
        "| Family (H200, 1024², 20 steps unless noted) | Gate off / vanilla (≥ 0.99) "
        "| Measured / ideal (target) | Skipped step / computed (≤ 1%) | Skipped | Repetitions "
        "| Commit |",
        "|---|---|---|---|---|---|---|",
    ]
    for target in TARGETS:
        report = json.loads((directory / target.file).read_text(encoding="utf-8"))
        speedup, costs = report["speedup"], report["step_costs"]
        gate_off = fixed(speedup["gate_off_vs_vanilla"], 2)
        measured = fixed(speedup["measured_over_ideal"], 2)
        share = fixed(costs["skipped_over_computed"] * 100, 1)
        skipped = report["conditions"]["gated"]["skipped"]
        low, high = min(skipped), max(skipped)
        count = f"{low}" if low == high else f"{low}–{high}"
        lines.append(
            f"| {_label(target, report['recipe'])} "
            f"| {_met(gate_off, float(gate_off) >= GATE_OFF_TARGET)} "
            f"| {_met(measured, float(measured) >= target.measured_over_ideal)} "
            f"(≥ {target.measured_over_ideal:.2f}, #{target.issue}) "
            f"| {_met(f'{share}%', float(share) <= SKIP_TARGET * 100)} "
            f"({_short(costs['skipped_seconds'] * 1000)} / "
            f"{_short(costs['computed_seconds'] * 1000)} ms) "
            f"| {count}/{report['recipe']['steps']} | {report['recipe']['reps']} "
            f"| {str(report['hardware']['git']['commit'])[:7]} |"
        )
    return "\n".join(lines)


def _row_label(row: dict[str, Any]) -> str:
    name = {"flux2-klein-4b": "FLUX.2 Klein 4B", "z-image": "Z-Image"}.get(row["family"], "?")
    label = f"{name}, {row['size']}²"
    tokens = row.get("caption_tokens")
    if tokens is not None and tokens != row.get("negative_caption_tokens", tokens):
        label += f", captions of {tokens} and {row['negative_caption_tokens']} tokens"
    return label


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


PARTS = (
    ("prelude", "prelude"),
    ("measure", "measurement"),
    ("host_read_evaluated", "decision's read"),
    ("tail", "tail (+ residual)"),
    ("scheduler_step", "scheduler step"),
    ("skipped_step_graph", "skipped step's graph"),
    ("magcache_skip_graph", "MagCache skip's graph"),
    ("caption", "caption (once a generation)"),
    ("vanilla_predict", "vanilla predict"),
)
PHASES = (
    ("prelude", "prelude"),
    ("measure", "measure"),
    ("look_ahead", "look ahead"),
    ("decide", "decide"),
    ("tail", "tail"),
    ("scheduler_step", "scheduler"),
    ("latents_eval", "latents eval (the sync)"),
    ("end_step", "gate bookkeeping"),
    ("glue", "Python glue"),
    ("step", "whole step"),
)


def profile_tables(report: dict[str, Any]) -> str:
    """The profile's two tables: the parts in isolation, then each gate's skipped step inside
    mflux's loop (profile_skip.py's docstring says what each column times)."""
    gpus = report.get("gpus") or []
    hardware = str(gpus[0]).split(",")[0].replace("NVIDIA ", "") if gpus else report["device"]
    commit = str((report.get("git") or {}).get("commit") or "?")[:7]
    lines = [
        f"{hardware}, {report['dtype'].removeprefix('mlx.core.')}, commit {commit}; "
        f"the parts: medians of {report['n']} calls, ms:",
        "",
        "| | " + " | ".join(title for _, title in PARTS) + " |",
        "|---|" + "---|" * len(PARTS),
    ]
    for row in report["rows"]:
        ms = row.get("ms")
        if ms is None:
            continue
        cells = [_ms(ms.get(key)) for key, _ in PARTS]
        cells[5] += f" ({ms['skipped_step_graph'] / ms['vanilla_predict']:.1%})"
        lines.append(f"| {_row_label(row)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "A skipped step inside mflux's loop (a forced pattern, medians over its skipped steps, "
        "ms):",
        "",
        "| | gate | pattern | "
        + " | ".join(title for _, title in PHASES)
        + " | computed step | skipped / computed | in-loop measured / ideal |",
        "|---|---|---|" + "---|" * (len(PHASES) + 3),
    ]
    for row in report["rows"]:
        for key in ("loop", "loop_magcache"):
            loop = row.get(key)
            if loop is None:
                continue
            cells = [_ms(loop["skipped_step_ms"].get(name)) for name, _ in PHASES]
            lines.append(
                f"| {_row_label(row)} | {loop['gate']} | `{loop['pattern']}` | "
                + " | ".join(cells)
                + f" | {_ms(loop['computed_step_ms']['step'])} "
                f"| {loop['skipped_over_computed']:.1%} "
                f"| {loop['measured_over_ideal_in_loop']:.2f} |"
            )
    return "\n".join(lines)


def profile_block(path: Path = PROFILE) -> str:
    if not path.exists():
        return (
            "*Not measured since #30 yet: `bash lab/bench/device/issue17.sh profile-skip` on the "
            "H200, then `uv run python -m lab.bench.device_figures DIR`.*"
        )
    return profile_tables(json.loads(path.read_text(encoding="utf-8")))


def bench_table_block(directory: Path = BENCHMARKS_DIR) -> Block:
    """The performance table between its markers, as ``bench --readme-table`` prints it."""
    body = readme_table(directory).removeprefix(START_MARKER + "\n").removesuffix("\n" + END_MARKER)
    return Block("bench-table", f"{directory.name}/*.json", body)


# Issue #29's families: the report ``issue29.sh`` writes for each, under the name it is committed
# by (``resources/benchmarks/NAME``).
THIS_YEARS_REPORTS = {
    "flux3": "flux3-image-klein-1024-random-h200.json",
    "qwen21": "qwen-image-2.1-1024-random-h200.json",
    "krea2": "krea-2-1024-random-h200.json",
}
NOT_MEASURED = "not measured yet"
THIS_YEARS_TEMPLATE = (
    "`lab/bench/device/issue29.sh` builds them at mflux's dimensions (`bench --random-weights "
    "full`) and times TeaCache's seam on the forced pattern; gate off / vanilla and measured / "
    "ideal: FLUX.3 Image Klein {flux3}, Qwen-Image 2.1 {qwen21}, Krea 2 {krea2} (each measured "
    "one is a row of the table below)."
)


def ratios(report: dict[str, Any]) -> str:
    """ "gate off / vanilla and measured / ideal" of one report, as the table rounds them."""
    speedup = report["speedup"]
    return (
        f"{fixed(speedup['gate_off_vs_vanilla'], 2)} and {fixed(speedup['measured_over_ideal'], 2)}"
    )


def this_years_passage(directory: Path = BENCHMARKS_DIR) -> Passage:
    reports = dict(load_reports(directory))
    values = {
        key: ratios(reports[name]) if name in reports else NOT_MEASURED
        for key, name in THIS_YEARS_REPORTS.items()
    }
    return Passage(f"{directory.name}/issue29 rows", THIS_YEARS_TEMPLATE, values)


def readme_figures() -> list[Figure]:
    return [
        bench_table_block(),
        Block("bench-targets", "resources/benchmarks/*-random-h200.json", targets_table()),
        Block("skip-profile", "lab/bench/results/skip-profile-h200.json", profile_block()),
        this_years_passage(),
    ]


# issue17.sh's case -> the committed report's name (resources/benchmarks/NAME.json and .md).
CASES = {
    "flux2-1024": "flux2-klein-4b-1024-random-h200",
    "flux2-512": "flux2-klein-4b-512-random-h200",
    "z-image-1024": "z-image-1024-random-h200",
    "flux1-1024": "flux1-dev-1024-random-h200",
    "qwen-1024": "qwen-image-1024-random-h200",
}


def _refusal(report: dict[str, Any]) -> str | None:
    """Why a batch's report cannot stand for the H200 figures (None: it can)."""
    if report.get("kind") == "profile-skip":
        if report.get("tiny") or "gpu" not in str(report.get("device")):
            return "a CPU dry run's profile (tiny shells)"
    elif report.get("recipe", {}).get("random_weights") != "full":
        return "a CPU dry run's bench (tiny random weights)"
    elif "gpu" not in str(report["hardware"]["runtime"].get("mlx_device")):
        return "not run on the GPU"
    commit = (report.get("git") or report.get("hardware", {}).get("git") or {}).get("commit")
    if not commit:
        return "no commit recorded (set TEACACHE_GIT_COMMIT on the device)"
    return None


def collect(batch: Path, benchmarks: Path = BENCHMARKS_DIR, profile: Path = PROFILE) -> list[str]:
    """Copy a device batch's reports to where the README's figures read them; one line each."""
    lines = []
    found = [(batch / f"{case}.json", benchmarks / f"{name}.json") for case, name in CASES.items()]
    # issue29.sh names its reports as they are committed
    found += [(batch / name, benchmarks / name) for name in THIS_YEARS_REPORTS.values()]
    found.append((batch / "profile-skip.json", profile))
    for source, target in found:
        if not source.exists():
            continue
        why = _refusal(json.loads(source.read_text(encoding="utf-8")))
        if why is not None:
            lines.append(f"{source.name}: not taken, {why}")
            continue
        shutil.copyfile(source, target)
        shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
        lines.append(f"{source.name} -> {shown}")
        markdown = source.with_suffix(".md")
        if markdown.exists() and target.parent == benchmarks:
            shutil.copyfile(markdown, target.with_suffix(".md"))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Take a device batch's reports into the README.")
    parser.add_argument("batch", type=Path, help="the batch's $OUT folder, as it came back")
    args = parser.parse_args(argv)
    if not args.batch.is_dir():
        print(f"{args.batch}: no such folder", file=sys.stderr)
        return 2
    lines = collect(args.batch)
    none = f"{args.batch}: no report of issue17.sh's or issue29.sh's cases in it"
    print("\n".join(lines) if lines else none)
    if not any("->" in line for line in lines):
        return 1
    return write_readme(["--write"])


if __name__ == "__main__":
    raise SystemExit(main())
