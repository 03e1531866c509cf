"""Markdown for benchmark reports, and the README's performance table.

The README table is *generated*: ``readme_table()`` renders every committed benchmark report
under ``resources/benchmarks/`` and ``tests/test_readme_bench_table.py`` checks that README.md
holds exactly that text between the markers. A number in the README therefore always has a
committed JSON behind it, with its skip counts, repetitions and hardware.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.bench.stats import step_costs

BENCHMARKS_DIR = Path(__file__).resolve().parent.parent.parent / "resources" / "benchmarks"
START_MARKER = "<!-- bench-table:start -->"
END_MARKER = "<!-- bench-table:end -->"
CONDITION_NAMES = {
    "vanilla": "vanilla mflux",
    "gate_off": "gate off (threshold 0)",
    "gated": "gated",
}


def condition_name(condition: str) -> str:
    """A condition as the tables name it: ``gated-firstblock`` → "gated (First-block probe)"."""
    from app.bench.worker import condition_gate
    from app.gate.kinds import GATE_KINDS

    gate = condition_gate(condition)
    if gate in GATE_KINDS:
        return f"gated ({GATE_KINDS[gate].label})"
    return CONDITION_NAMES.get(condition, condition)


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _spread(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "—"
    return (
        f"{_seconds(summary['median'])} s ({_seconds(summary['min'])}–{_seconds(summary['max'])})"
    )


def _ratio(value: float | None, suffix: str = "×") -> str:
    return "—" if value is None else f"{value:.2f}{suffix}"


def _mb(value: int | None) -> str:
    return "—" if value is None else f"{value / 2**20:.0f}"


def _skips(info: dict[str, Any]) -> str:
    skipped = info.get("skipped") or []
    active = info.get("active_steps")
    if not skipped:
        return "—"
    low, high = min(skipped), max(skipped)
    count = f"{low}" if low == high else f"{low}–{high}"
    streaks = info.get("longest_skip_streak") or [0]
    return f"{count}/{active} (streak {max(streaks)})"


def _pattern(info: dict[str, Any]) -> str:
    patterns = info.get("patterns") or []
    if not patterns:
        return "—"
    return f"`{patterns[0]}`" if len(set(patterns)) == 1 else " / ".join(f"`{p}`" for p in patterns)


def _first_generation(report: dict[str, Any]) -> str:
    """Median first-generation loop per condition (vanilla / gate off / gated), with its steps;
    older reports (no top-level ``first_generation``) from the condition summaries."""
    first = report.get("first_generation")
    conditions = report["conditions"]
    values = []
    steps = None
    for cond in ("vanilla", "gate_off", "gated"):
        if first:
            info = first.get(cond) or {}
            steps = steps or info.get("steps")
            summary = info.get("loop_seconds")
        else:
            summary = conditions.get(cond, {}).get("first_generation_loop_seconds")
        values.append(_seconds(summary["median"]) if summary else "—")
    steps = steps or report["recipe"].get("warmup_steps") or report["recipe"]["steps"]
    return f"{' / '.join(values)} s ({steps} steps)"


def _skip_cost(report: dict[str, Any], condition: str = "gated") -> str:
    if condition == "gated":
        costs = report.get("step_costs") or step_costs(report.get("runs") or [])
    else:
        costs = (report.get("also") or {}).get(condition, {}).get("step_costs")
    if not costs or costs.get("skipped_over_computed") is None:
        return "—"
    return (
        f"{costs['skipped_over_computed'] * 100:.1f}% "
        f"({costs['skipped_seconds'] * 1000:.2g} / {costs['computed_seconds'] * 1000:.3g} ms)"
    )


def hardware_summary(report: dict[str, Any]) -> str:
    hardware = report.get("hardware", {})
    runtime = hardware.get("runtime", {})
    device = runtime.get("mlx_device", "")
    blas = runtime.get("blas", "")
    if "gpu" in device and hardware.get("gpus"):
        gpu = str(hardware["gpus"][0]).split(",")[0].replace("NVIDIA ", "")
        backend = "CUDA" if "CUDA" in blas else "Metal"
        return f"{gpu} (MLX {backend})"
    cpu = hardware.get("cpu", "CPU")
    note = "OpenBLAS" if "OpenBLAS" in blas else blas.split(" (")[0]
    return f"{cpu}, {hardware.get('cores', '?')} cores (MLX CPU, {note})"


def recipe_summary(report: dict[str, Any]) -> str:
    recipe = report["recipe"]
    parts = [
        f"**{recipe['variant']}**",
        f"{recipe['steps']} steps",
        f"{recipe['width']}×{recipe['height']}",
        f"threshold {recipe['threshold']:g}",
    ]
    if recipe.get("guidance") not in (None, 1.0):
        parts.append(f"guidance {recipe['guidance']:g}")
    if recipe.get("random_weights"):
        parts.append(f"random weights ({recipe['random_weights']} size)")
    if recipe.get("coefficients") is not None or recipe.get("forced_skips") is not None:
        parts.append("forced skip pattern")
    if report.get("stale"):  # a row kept after the model changed, with why
        parts.append(f"*{report['stale']}*")
    return ", ".join(parts)


def bench_markdown(report: dict[str, Any]) -> str:
    recipe = report["recipe"]
    hardware = report["hardware"]
    runtime = hardware.get("runtime", {})
    git = hardware.get("git", {})
    lines = [
        f"# Benchmark: {recipe_summary(report)}",
        "",
    ]
    if report.get("label"):
        lines += [f"*{report['label']}*", ""]
    lines += [
        f"- Prompt: “{recipe['prompt']}”, seed {recipe['seed']}, {recipe['reps']} repetitions",
        f"- Hardware: {hardware.get('cpu')} ({hardware.get('cores')} cores, "
        f"{hardware.get('ram_gb')} GB RAM), {', '.join(hardware.get('gpus') or ['no GPU'])}; "
        f"{hardware.get('os')}",
        f"- Software: MLX {runtime.get('mlx')} on {runtime.get('mlx_device')}, "
        f"BLAS: {runtime.get('blas')}; mflux {runtime.get('mflux')}; "
        f"teacache-studio {runtime.get('teacache_studio')}; commit {git.get('commit')}"
        + (" (uncommitted changes)" if git.get("dirty") else ""),
        f"- Isolation: {report['isolation']}",
        f"- Warm-up: {report['warmup_policy']}",
        "- Host load: the 1-minute load average as each timed generation began (other work on "
        f"the machine; {hardware.get('cores')} cores)",
        "",
        "| Condition | Loop, median (min–max) | Wall, median | First generation loop "
        "| Compile (first generation's excess) | Load | Peak MB | Skipped (longest streak) "
        "| Pattern |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    first_generation = report.get("first_generation") or {}
    for name, info in report["conditions"].items():
        compile_summary = (first_generation.get(name) or {}).get("compile_seconds")
        patterns = info.get("patterns") or []
        pattern = patterns[0] if info.get("pattern_stable") and patterns else " / ".join(patterns)
        wall = info.get("wall_seconds")
        lines.append(
            f"| {condition_name(name)} | {_spread(info.get('loop_seconds'))} "
            f"| {_seconds(wall['median']) if wall else '—'} s "
            f"| {_spread(info.get('first_generation_loop_seconds'))} "
            f"| {_spread(compile_summary)} "
            f"| {_spread(info.get('load_seconds'))} | {_mb(info.get('peak_memory_bytes'))} "
            f"| {_skips(info)} | `{pattern}` |"
        )
    s = report["speedup"]
    lines += [
        "",
        f"Speedup ({s['basis']}): gated vs vanilla **{_ratio(s['gated_vs_vanilla'])}**, "
        f"gated vs gate off {_ratio(s['gated_vs_gate_off'])}, gate off vs vanilla "
        f"{_ratio(s['gate_off_vs_vanilla'])}; ideal (active / computed steps) "
        f"{_ratio(s['ideal'])}; measured / ideal **{_ratio(s['measured_over_ideal'], '')}** "
        f"(gating alone {_ratio(s['gating_over_ideal'], '')}). "
        f"Wall-clock gated vs vanilla {_ratio(s['wall_gated_vs_vanilla'])}. "
        f"A skipped step costs {_skip_cost(report)} of a computed one (gated runs, median). "
        f"First generation (vanilla / gate off / gated): {_first_generation(report)}.",
        "",
    ]
    for condition, also in (report.get("also") or {}).items():
        a = also["speedup"]
        lines += [
            f"{condition_name(condition)}: vs vanilla **{_ratio(a['gated_vs_vanilla'])}**, vs "
            f"gate off {_ratio(a['gated_vs_gate_off'])}; ideal {_ratio(a['ideal'])}; measured / "
            f"ideal **{_ratio(a['measured_over_ideal'], '')}** (gating alone "
            f"{_ratio(a['gating_over_ideal'], '')}); a skipped step costs "
            f"{_skip_cost(report, condition)} of a computed one.",
            "",
        ]
    lines += [
        "Every run, in the order it ran:",
        "",
        "| Rep | Condition | Loop | Wall | First generation loop | Skipped | Pattern "
        "| Longest streak | Peak MB | Host load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in report["runs"]:
        first = run.get("first_generation") or {}
        lines.append(
            f"| {run['rep']} | {condition_name(run['condition'])} "
            f"| {_seconds(run['loop_seconds'])} s | {_seconds(run['wall_seconds'])} s "
            f"| {_seconds(first.get('loop_seconds'))} s | {run['skipped']}/{run['active_steps']} "
            f"| `{run['pattern']}` | {run['longest_skip_streak']} "
            f"| {_mb(run.get('peak_memory_bytes'))} "
            f"| {'—' if run.get('host_load_average') is None else run['host_load_average']} |"
        )
    return "\n".join(lines) + "\n"


def load_reports(directory: Path = BENCHMARKS_DIR) -> list[tuple[str, dict[str, Any]]]:
    """Every committed benchmark report (``kind == "bench"``), by file name."""
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("kind") == "bench":
            found.append((path.name, data))
    return found


def readme_table(directory: Path = BENCHMARKS_DIR) -> str:
    """The README's performance table, rendered from the committed reports (markers included)."""
    lines = [
        START_MARKER,
        "| Recipe | Hardware | Vanilla mflux | Gate off | Gated | Skipped (streak) | Pattern "
        "| Speedup vs vanilla | vs gate off | Gate off / vanilla | Ideal | Measured / ideal "
        "| Gating / ideal | Skipped step / computed | First generation: vanilla / gate off / "
        "gated | Source |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, report in load_reports(directory):
        conditions = report["conditions"]
        s = report["speedup"]
        lines.append(
            f"| {recipe_summary(report)} | {hardware_summary(report)} "
            f"| {_spread(conditions.get('vanilla', {}).get('loop_seconds'))} "
            f"| {_spread(conditions.get('gate_off', {}).get('loop_seconds'))} "
            f"| {_spread(conditions.get('gated', {}).get('loop_seconds'))} "
            f"| {_skips(conditions.get('gated', {}))} | {_pattern(conditions.get('gated', {}))} "
            f"| **{_ratio(s['gated_vs_vanilla'])}** "
            f"| {_ratio(s['gated_vs_gate_off'])} | {_ratio(s['gate_off_vs_vanilla'], '')} "
            f"| {_ratio(s['ideal'])} "
            f"| {_ratio(s['measured_over_ideal'], '')} | {_ratio(s['gating_over_ideal'], '')} "
            f"| {_skip_cost(report)} | {_first_generation(report)} "
            f"| `resources/benchmarks/{name}` |"
        )
        for condition, also in (report.get("also") or {}).items():
            info, a = conditions.get(condition, {}), also["speedup"]
            lines.append(
                f"| {recipe_summary(report)}: {condition_name(condition)} "
                f"| {hardware_summary(report)} "
                f"| {_spread(conditions.get('vanilla', {}).get('loop_seconds'))} "
                f"| {_spread(conditions.get('gate_off', {}).get('loop_seconds'))} "
                f"| {_spread(info.get('loop_seconds'))} | {_skips(info)} | {_pattern(info)} "
                f"| **{_ratio(a['gated_vs_vanilla'])}** | {_ratio(a['gated_vs_gate_off'])} "
                f"| {_ratio(a['gate_off_vs_vanilla'], '')} | {_ratio(a['ideal'])} "
                f"| {_ratio(a['measured_over_ideal'], '')} | {_ratio(a['gating_over_ideal'], '')} "
                f"| {_skip_cost(report, condition)} | — | `resources/benchmarks/{name}` |"
            )
    lines += [
        "",
        "Times are the denoising loop (median of the repetitions, min–max in brackets), each "
        "repetition a cold subprocess after one discarded warm-up generation, repetitions "
        "interleaved across conditions. Ideal = active steps / computed steps. Measured / ideal "
        "compares the gated run with untouched mflux; gating / ideal compares it with our own "
        "path at threshold 0, which isolates what skipping delivers. Gate off / vanilla is "
        "vanilla's time over gate off's (1.00: threshold 0 costs nothing). Skipped step / "
        "computed: median step times of the gated runs. First generation: the discarded warm-up "
        "(mx.compile traces, kernel JIT), median per condition.",
        END_MARKER,
    ]
    return "\n".join(lines)


def readme_block(readme_text: str) -> str | None:
    """The text between (and including) the markers in README.md, or None when absent."""
    start = readme_text.find(START_MARKER)
    end = readme_text.find(END_MARKER)
    if start < 0 or end < start:
        return None
    return readme_text[start : end + len(END_MARKER)]
