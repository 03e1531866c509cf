"""TeaCache, MagCache and the first-block probe on the embedded demo: the same prompts, each gate
over its thresholds.

    uv run python -m lab.gates.compare                       # writes lab/gates/results/
    uv run python -m lab.gates.compare --prompts 4 --out /tmp/cmp   # a quick look
    uv run python -m lab.gates.compare --quality-only        # the quality rows alone (any load)

Quality (SSIM and the local difference against vanilla, skipped steps) comes from the engine's
*resumed* gated passes:
bit-exact with a real gated run (the resumed pass replays vanilla only up to the last computed
step before the first skip, where both runs are still identical; tests/engine checks it for every
gate), so every prompt × threshold costs only the steps after the first skip. The gates are
compared at matched skip counts (``matched``: each gate's mean SSIM and local difference read off
its own curve at the same mean number of skipped steps). ``--quality-only`` re-measures only the
quality rows and keeps the committed speed panel (the rows are exact; the speed needs a quiet
machine).

Speed is measured the way ``teacache-studio bench`` measures (``app.bench``): on the first
``--speed-prompts`` prompts, untouched mflux (vanilla) and each gate at each of its
``SPEED_THRESHOLDS``, every (condition, repetition) in a fresh process that loads the demo, runs a
discarded warm-up generation and times one generation; ``--speed-reps`` repetitions per
condition, the order reversed from one repetition to the next (vanilla, TeaCache …, MagCache …,
then MagCache …, TeaCache …, vanilla), so a drift of the host's load touches every condition
alike. A threshold's speed-up is the median vanilla loop over its median gated loop, the ideal
(steps / computed steps) beside it. ``--speed-only`` re-measures only this and keeps the committed
quality rows (they are exact and do not depend on the load).

    uv run python -m lab.gates.compare --speed-only     # the speed panel alone, then the plot

The prompts are scenes the demo never saw in either gate's calibration (TeaCache: seeds from
800 000, MagCache: the 10 built-in calibrate prompts; the probe needs none); MagCache runs with
the demo's shipped table and recipe, and, as a second line, the reference's FLUX.1-dev recipe (K 5,
retention 0.1) on the same table; the probe with its defaults (``app.gate.firstblock``: these
rows are the demo's own sweep its default threshold is checked on).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lab.demo.reports import write_json
from lab.demo.scenes import caption, scene_from_seed
from lab.readme_figures import Block, Passage, count_word, fixed

COMPARE_SEED_BASE = 820_000  # scenes used by neither calibration
GENERATION_SEED = 42
TEACACHE_THRESHOLDS = (0.04, 0.06, 0.1, 0.15, 0.2, 0.3)
MAGCACHE_THRESHOLDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.3)
FLUX_RECIPE_THRESHOLDS = (0.005, 0.02, 0.05)
# The published first-block thresholds among them: 0.05 (diffusers), 0.12 (nunchaku, krita).
FIRSTBLOCK_THRESHOLDS = (0.03, 0.05, 0.08, 0.1, 0.12, 0.16, 0.2, 0.3)
DIFFUSERS_THRESHOLD = 0.05  # diffusers' FirstBlockCacheConfig default, quoted beside the probe's
SPEED_THRESHOLDS = {"teacache": (0.1, 0.2), "magcache": (0.01, 0.05), "firstblock": (0.08, 0.12)}
# The skip counts the gates are compared at (each read off its own curve; ``matched``).
MATCHED_SKIPS = (4, 6, 8, 10, 12)
SPEED_REPS = 3
# The reference's FLUX.1-dev recipe on the demo's own table (a user calibration in a scratch home).
FLUX_RECIPE = {"retention_ratio": 0.1, "max_consecutive_skips": 5}
RESULTS = Path(__file__).parent / "results"
DOCUMENT = RESULTS / "compare-demo.json"
CALIBRATION = RESULTS / "demo.magcache-calibration.json"
# The rows the README's table shows (every threshold is in the JSON and the plot).
README_ROWS = (
    ("teacache", (0.06, 0.1, 0.2)),
    ("magcache", (0.005, 0.02, 0.1, 0.3)),
    ("firstblock", (0.05, 0.08, 0.1, 0.12, 0.2)),
)
GATE_NAMES = {"teacache": "TeaCache", "magcache": "MagCache", "firstblock": "First-block probe"}
MATCHED_LINES = ("teacache", "magcache", "firstblock")


def prompts(n: int) -> list[str]:
    return [caption(scene_from_seed(COMPARE_SEED_BASE + i)) for i in range(n)]


def _flux_recipe_variant() -> str:
    """A user calibration ``demo+magflux``: the demo's table with the FLUX.1-dev recipe."""
    from app.variants import get_variant
    from app.variants.user import save_calibration

    demo = get_variant("demo")
    assert demo.magcache is not None
    save_calibration(
        {
            "base_variant": "demo",
            "name": "magflux",
            "coefficients": list(demo.coefficients or ()),
            "calibrated_range": list(demo.calibrated_range or ()) or None,
            "default_threshold": demo.default_threshold,
            "provenance": {"source": "lab.gates.compare: the demo's TeaCache fit, unchanged"},
            "magcache": {
                "ratios": list(demo.magcache.ratios),
                "default_threshold": None,
                **FLUX_RECIPE,
                "provenance": {"source": "lab.gates.compare: the demo's table, FLUX.1-dev recipe"},
            },
        }
    )
    return "demo+magflux"


def _run(engine: Any, variant: str, prompt: str, gate: str, threshold: float, resume: bool):
    from app.engine.request import make_request

    request = make_request(
        variant,
        prompt,
        seed=GENERATION_SEED,
        threshold=threshold,
        gate=gate,
        compare_vanilla=True,
        resume=resume,
    )
    return engine.generate(0, request, lambda event: None, threading.Event())


def _row(report: Any) -> dict[str, Any]:
    steps = report.gated.steps
    computed = sum(s.decision.computes for s in steps)
    return {
        "skipped": len(steps) - computed,
        "ssim": report.ssim,
        "local_diff": report.local_diff_value,
        "pattern": "".join(s.decision.letter for s in steps),
        "ideal_speedup": len(steps) / computed,
    }


def sweep(
    n_prompts: int,
    speed_prompts: int,
    out: Path,
    *,
    speed_reps: int = SPEED_REPS,
    quiet: bool = False,
    quality_only: bool = False,
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The quality rows of every gate, then the speed panel (``quality_only``: the speed panel
    of the document already in ``out``, kept as it is; ``only``: these lines' quality rows
    alone, the other lines kept from that document, so adding a gate re-measures just its
    rows — the kept rows are exact, so they stand while their gates' code is unchanged)."""
    from app.blas import preload_openblas

    preload_openblas()
    from app.engine.engine import Engine

    texts = prompts(n_prompts)
    lines = {
        "teacache": ("demo", "teacache", TEACACHE_THRESHOLDS),
        "magcache": ("demo", "magcache", MAGCACHE_THRESHOLDS),
        "magcache-flux-recipe": (_flux_recipe_variant(), "magcache", FLUX_RECIPE_THRESHOLDS),
        "firstblock": ("demo", "firstblock", FIRSTBLOCK_THRESHOLDS),
    }
    if only:
        lines = {name: lines[name] for name in only}
    engine = Engine(vanilla_cache_size=2)
    quality: dict[str, list[dict[str, Any]]] = {name: [] for name in lines}
    started = time.perf_counter()
    for p, text in enumerate(texts):
        for name, (variant, gate, thresholds) in lines.items():
            for threshold in thresholds:
                report = _run(engine, variant, text, gate, threshold, resume=True)
                quality[name].append({"prompt": p, "threshold": threshold, **_row(report)})
        if not quiet:
            print(f"prompt {p + 1}/{len(texts)} done, {time.perf_counter() - started:.0f} s")
    engine.close()
    quality_cpu_seconds = time.process_time()
    from app.gate.firstblock import (
        DEFAULT_MAX_CONSECUTIVE_SKIPS,
        DEFAULT_WARMUP_STEPS,
    )
    from app.hardware import host_info
    from app.variants import get_variant

    demo = get_variant("demo")
    assert demo.magcache is not None
    command = f"uv run python -m lab.gates.compare --prompts {n_prompts}"
    if not quality_only:
        command += f" --speed-prompts {speed_prompts} --speed-reps {speed_reps}"
    document = {
        "command": command,
        "variant": "demo",
        "steps": demo.default_steps,
        "guidance": demo.default_guidance,
        "seed": GENERATION_SEED,
        "prompts": texts,
        "quality_basis": "resumed gated passes (bit-exact with real gated passes)",
        "recipes": {
            "teacache": {"coefficients": list(demo.coefficients or ()), "max_consecutive_skips": 8},
            "magcache": {
                "retention_ratio": demo.magcache.retention_ratio,
                "max_consecutive_skips": demo.magcache.max_consecutive_skips,
            },
            "magcache-flux-recipe": FLUX_RECIPE,
            "firstblock": {
                "warmup_steps": DEFAULT_WARMUP_STEPS,
                "max_consecutive_skips": DEFAULT_MAX_CONSECUTIVE_SKIPS,
            },
        },
        "summary": {name: summarise(rows) for name, rows in quality.items()},
        "quality": quality,
        "host": host_info(),
        "cpu_seconds": quality_cpu_seconds,
    }
    document["matched"] = matched(document)
    if only:
        kept = load(out / "compare-demo.json")
        for key in ("summary", "quality"):
            document[key] = {**kept[key], **document[key]}
        document["command"] = f"{kept['command']}; then {command} --only {' '.join(only)}"
        document["cpu_seconds"] = kept["cpu_seconds"] + quality_cpu_seconds
        document["hosts"] = {
            **kept.get("hosts", {name: kept["host"] for name in kept["quality"]}),
            **{name: document["host"] for name in only},
        }
        document["matched"] = matched(document)
    if quality_only:
        kept = load(out / "compare-demo.json")
        document["command"] = document["command"] if only else kept["command"]
        speed = {k: v for k, v in kept.items() if k.startswith("speed")}
        speed.setdefault("speed_host", kept["host"])  # the kept panel's machine, not this one
        if "above_ideal_reason" in kept:  # the kept panel's own excuse travels with it
            speed["above_ideal_reason"] = kept["above_ideal_reason"]
        document.update(speed)
    else:
        document.update(measure_speed(texts[:speed_prompts], speed_reps, quiet=quiet))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "compare-demo.json", document)
    plot(document, out / "compare-demo.png")
    return document


def remeasure_speed(
    out: Path, speed_prompts: int, speed_reps: int, *, runner: Any = None, quiet: bool = False
) -> dict[str, Any]:
    """Re-measure only the speed panel of the document in ``out`` (its quality rows are exact
    and load-independent, so they stay), then write it and its plot again."""
    path = out / "compare-demo.json"
    document = load(path)
    for key in ("speed_basis", "speed_reps", "speed_host", "speed_summary", "speed",
                "above_ideal_reason"):  # fmt: skip
        document.pop(key, None)
    texts = document["prompts"][:speed_prompts]
    document.update(measure_speed(texts, speed_reps, runner=runner, quiet=quiet))
    document["command"] = (
        f"{document['command']}; speed: uv run python -m lab.gates.compare --speed-only "
        f"--speed-prompts {speed_prompts} --speed-reps {speed_reps}"
    )
    write_json(path, document)
    plot(document, out / "compare-demo.png")
    return document


def speed_configs(prompt: str) -> dict[str, Any]:
    """One ``BenchConfig`` per timed condition of one prompt: ``vanilla`` (untouched mflux) and
    ``gate:threshold`` for each gate's ``SPEED_THRESHOLDS`` (the demo's steps, size, guidance)."""
    from app.bench.harness import BenchConfig
    from app.engine.request import make_request

    def config(gate: str, threshold: float) -> BenchConfig:
        request = make_request("demo", prompt, seed=GENERATION_SEED, threshold=threshold, gate=gate)
        return BenchConfig(request, conditions=("vanilla", "gated"))

    configs: dict[str, Any] = {"vanilla": config("teacache", SPEED_THRESHOLDS["teacache"][0])}
    for gate, thresholds in SPEED_THRESHOLDS.items():
        for threshold in thresholds:
            configs[f"{gate}:{threshold:g}"] = config(gate, threshold)
    return configs


def measure_speed(
    texts: list[str], reps: int, *, runner: Any = None, quiet: bool = False
) -> dict[str, Any]:
    """The speed panel, measured as the bench measures (module docstring): per prompt, every
    condition in a fresh process per repetition, the order reversed each repetition."""
    from app.bench.harness import subprocess_runner
    from app.bench.stats import speedups, summarize_condition
    from app.hardware import host_info

    run = runner or subprocess_runner()
    speed: dict[str, list[dict[str, Any]]] = {gate: [] for gate in SPEED_THRESHOLDS}
    started = time.perf_counter()
    for p, text in enumerate(texts):
        configs = speed_configs(text)
        names = list(configs)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for rep in range(reps):
            for name in names if rep % 2 == 0 else reversed(names):
                condition = "vanilla" if name == "vanilla" else "gated"
                result = run(configs[name].spec(condition, rep))
                result["order_index"] = sum(len(done) for done in results.values())
                results[name].append(result)
                if not quiet:
                    print(
                        f"speed prompt {p + 1}/{len(texts)} rep {rep + 1}/{reps} {name}: "
                        f"{result['loop_seconds']:.3f} s, {result['skipped']} skipped "
                        f"({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
        vanilla = summarize_condition(results["vanilla"])
        for name in names[1:]:
            gate, _, threshold = name.partition(":")
            gated = summarize_condition(results[name])
            figures = speedups({"vanilla": vanilla, "gated": gated})
            computed = statistics.median(gated["computed"])
            speed[gate].append(
                {
                    "prompt": p,
                    "threshold": float(threshold),
                    "skipped": statistics.median(gated["skipped"]),
                    "pattern": gated["patterns"][0],
                    "pattern_stable": gated["pattern_stable"],
                    "ideal_speedup": gated["active_steps"] / computed,
                    "speedup": figures["gated_vs_vanilla"],
                    "measured_over_ideal": figures["measured_over_ideal"],
                    "vanilla_loop_seconds": vanilla["loop_seconds"],
                    "gated_loop_seconds": gated["loop_seconds"],
                    "host_load_average": [
                        r.get("host_load_average") for r in results["vanilla"] + results[name]
                    ],
                    "reps": len(results[name]),
                }
            )
    return {
        "speed_basis": "as `teacache-studio bench` measures: untouched mflux (vanilla) and each "
        "gated threshold, every (condition, repetition) a fresh process after a discarded "
        f"warm-up generation, {reps} repetitions, order reversed each repetition; speed-up = "
        "median vanilla loop / median gated loop",
        "speed_reps": reps,
        "speed_host": host_info(),  # the speed panel's own (``--speed-only`` keeps ``host``)
        "speed_summary": {name: summarise_speed(rows) for name, rows in speed.items()},
        "speed": speed,
    }


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per threshold: mean skipped steps, mean and worst SSIM, mean and worst local difference
    over the prompts (rows from before the local difference was recorded have none)."""
    out = []
    for threshold in sorted({r["threshold"] for r in rows}):
        at = [r for r in rows if r["threshold"] == threshold]
        summary = {
            "threshold": threshold,
            "mean_skipped": statistics.fmean(r["skipped"] for r in at),
            "mean_ssim": statistics.fmean(r["ssim"] for r in at),
            "min_ssim": min(r["ssim"] for r in at),
            "mean_ideal_speedup": statistics.fmean(r["ideal_speedup"] for r in at),
            "prompts": len(at),
        }
        if all(r.get("local_diff") is not None for r in at):
            summary["mean_local_diff"] = statistics.fmean(r["local_diff"] for r in at)
            summary["max_local_diff"] = max(r["local_diff"] for r in at)
        out.append(summary)
    return out


def _along(rows: list[dict[str, Any]], skips: float, key: str) -> float | None:
    """``key`` at ``skips`` mean skipped steps, linear between the two thresholds that bracket
    it on the gate's own curve (None outside it, or where the curve does not rise there)."""
    points = sorted((r["mean_skipped"], r[key]) for r in rows if key in r)
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= skips <= x1 and x1 > x0:
            return y0 + (y1 - y0) * (skips - x0) / (x1 - x0)
    return next((y for x, y in points if x == skips), None)


def matched(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each gate at the same mean skip counts (``MATCHED_SKIPS``): its mean SSIM and mean local
    difference read off its own threshold curve (``_along``)."""
    rows = []
    for skips in MATCHED_SKIPS:
        row: dict[str, Any] = {"skipped": skips}
        for line in MATCHED_LINES:
            summary = document["summary"].get(line, [])
            row[line] = {
                "ssim": _along(summary, skips, "mean_ssim"),
                "local_diff": _along(summary, skips, "mean_local_diff"),
            }
        rows.append(row)
    return rows


ABOVE_IDEAL = 0.05  # what tests/test_committed_speedups.py allows a committed figure


def above_ideal(document: dict[str, Any]) -> list[str]:
    """The speed rows more than ``ABOVE_IDEAL`` above their ideal: only a load change between
    the processes can do that, so such a panel is measured again, not committed."""
    return [
        f"{gate} {r['threshold']:g}, prompt {r['prompt']}: {r['speedup']:.2f}× against an ideal "
        f"of {r['ideal_speedup']:.2f}×"
        for gate, rows in document.get("speed", {}).items()
        for r in rows
        if r["speedup"] is not None and r["speedup"] > r["ideal_speedup"] * (1 + ABOVE_IDEAL)
    ]


def summarise_speed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per threshold: the median of the prompts' speed-ups (their range beside it), the mean
    ideal and how far the measured figure sits from it."""
    out = []
    for threshold in sorted({r["threshold"] for r in rows}):
        at = [r for r in rows if r["threshold"] == threshold and r["speedup"] is not None]
        if not at:
            continue
        median = statistics.median(r["speedup"] for r in at)
        ideal = statistics.fmean(r["ideal_speedup"] for r in at)
        out.append(
            {
                "threshold": threshold,
                "mean_skipped": statistics.fmean(r["skipped"] for r in at),
                "median_speedup": median,
                "min_speedup": min(r["speedup"] for r in at),
                "max_speedup": max(r["speedup"] for r in at),
                "mean_ideal_speedup": ideal,
                "median_over_ideal": median / ideal,
                "prompts": len(at),
            }
        )
    return out


STYLES = {
    "teacache": ("TeaCache", "tab:blue", "o-"),
    "magcache": ("MagCache (K 2, retention 0.2)", "tab:red", "s-"),
    "magcache-flux-recipe": ("MagCache (K 5, retention 0.1)", "tab:orange", "^--"),
    "firstblock": ("First-block probe", "tab:green", "D-"),
}


def plot(document: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (quality_axis, local_axis, speed_axis) = plt.subplots(1, 3, figsize=(18, 4.8), dpi=120)
    for name, rows in document["summary"].items():
        label, colour, style = STYLES[name]
        xs = [r["mean_skipped"] for r in rows]
        quality_axis.plot(xs, [r["mean_ssim"] for r in rows], style, color=colour, label=label)
        local = [(r["mean_skipped"], r["mean_local_diff"]) for r in rows if "mean_local_diff" in r]
        if local:
            local_axis.plot(*zip(*local, strict=True), style, color=colour, label=label)
        quality_axis.plot(
            xs, [r["min_ssim"] for r in rows], style, color=colour, alpha=0.35, linewidth=1
        )
        for r in rows:
            quality_axis.annotate(
                f"{r['threshold']:g}",
                (r["mean_skipped"], r["mean_ssim"]),
                textcoords="offset points",
                xytext=(3, 4),
                fontsize=6,
                color=colour,
            )
    steps = document["steps"]
    n = len(document["prompts"])
    quality_axis.set_xlabel(f"skipped steps of {steps} (mean over {n} prompts)")
    quality_axis.set_ylabel("SSIM against vanilla (solid: mean, faint: worst prompt)")
    quality_axis.set_title("Quality against skipped steps (labels: threshold)", fontsize=10)
    quality_axis.grid(alpha=0.3)
    quality_axis.legend(fontsize=8, loc="lower left")
    local_axis.set_xlabel(f"skipped steps of {steps} (mean over {n} prompts)")
    local_axis.set_ylabel("local difference against vanilla (mean; 0–1)")
    local_axis.set_title("The worst window's difference against skipped steps", fontsize=10)
    local_axis.grid(alpha=0.3)
    local_axis.legend(fontsize=8, loc="upper left")
    for name, rows in document["speed_summary"].items():
        label, colour, style = STYLES[name]
        xs = [r["mean_skipped"] for r in rows]
        medians = [r["median_speedup"] for r in rows]
        if all("min_speedup" in r for r in rows):  # the prompts' range
            below = [m - r["min_speedup"] for m, r in zip(medians, rows, strict=True)]
            above = [r["max_speedup"] - m for m, r in zip(medians, rows, strict=True)]
            speed_axis.errorbar(
                xs, medians, yerr=[below, above], fmt="none", ecolor=colour, alpha=0.5, capsize=3
            )
        speed_axis.plot(xs, medians, style, color=colour, label=label)
    ideal = sorted(
        {(r["mean_skipped"], r["mean_ideal_speedup"]) for rs in document["summary"].values()
         for r in rs}
    )  # fmt: skip
    speed_axis.plot([x for x, _ in ideal], [y for _, y in ideal], ":", color="grey", label="ideal")
    speed_axis.set_xlabel("skipped steps (mean)")
    speed_axis.set_ylabel("speed-up over untouched mflux (×, median; bars: prompts)")
    reps = document.get("speed_reps")
    host = document.get("speed_host") or document["host"]
    how = (
        f"cold processes, {count_word(reps)} {'rep' if reps == 1 else 'reps'}"
        if reps
        else "re-timed passes"
    )
    speed_axis.set_title(
        f"Measured speed ({how}; {host['cpu']}, {host['cores']} cores)", fontsize=9
    )
    speed_axis.grid(alpha=0.3)
    speed_axis.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def load(path: Path = DOCUMENT) -> dict[str, Any]:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def _defaults() -> dict[str, float]:
    from app.variants import get_variant

    demo = get_variant("demo")
    assert demo.default_threshold is not None
    probe = demo.default_threshold_for("firstblock")
    assert probe is not None
    return {
        "teacache": demo.default_threshold,
        "magcache": demo.params_for("magcache").threshold,
        "firstblock": probe,
    }


def _at(document: dict[str, Any], line: str, threshold: float) -> dict[str, Any]:
    return next(r for r in document["summary"][line] if r["threshold"] == threshold)


def _skips(mean: float) -> str:
    return fixed(mean, 1).removesuffix(".0")


def _figure(value: float | None, digits: int) -> str:
    return "—" if value is None else fixed(value, digits)


def readme_table(document: dict[str, Any]) -> str:
    """The README's table: the chosen rows of each gate's summary."""
    defaults = _defaults()
    rows = [
        f"| Gate, threshold | Skipped of {document['steps']} (mean) | SSIM mean | SSIM worst "
        "| Local difference mean | worst | Ideal speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for line, thresholds in README_ROWS:
        for threshold in thresholds:
            r = _at(document, line, threshold)
            default = " (default)" if threshold == defaults[line] else ""
            rows.append(
                f"| {GATE_NAMES[line]} {threshold:g}{default} | {_skips(r['mean_skipped'])} "
                f"| {fixed(r['mean_ssim'], 3)} | {fixed(r['min_ssim'], 3)} "
                f"| {_figure(r.get('mean_local_diff'), 3)} | {_figure(r.get('max_local_diff'), 3)} "
                f"| {fixed(r['mean_ideal_speedup'], 2)}× |"
            )
    return "\n".join(rows)


def matched_table(document: dict[str, Any]) -> str:
    """The README's table of the three gates at the same skip counts (``matched``)."""
    head = " | ".join(f"{GATE_NAMES[line]} SSIM / local difference" for line in MATCHED_LINES)
    rows = [
        f"| Skipped of {document['steps']} (mean) | {head} |",
        "|---" * (1 + len(MATCHED_LINES)) + "|",
    ]
    for row in document["matched"]:
        cells = [
            "—"
            if row[line]["ssim"] is None
            else f"{fixed(row[line]['ssim'], 3)} / {_figure(row[line]['local_diff'], 3)}"
            for line in MATCHED_LINES
        ]
        rows.append(f"| {row['skipped']} | {' | '.join(cells)} |")
    return "\n".join(rows)


def probe_passage(document: dict[str, Any]) -> Passage:
    """The README's sentence on the probe at its default and at diffusers' default."""
    probe = _defaults()["firstblock"]
    at = _at(document, "firstblock", probe)
    rows = document["quality"]["firstblock"]
    per_prompt = [r["skipped"] for r in rows if r["threshold"] == probe]
    diffusers = _at(document, "firstblock", DIFFUSERS_THRESHOLD)
    return Passage(
        "lab/gates/results/compare-demo.json",
        "at its default {threshold} the probe skips {skips} of {steps} steps (mean; {low} to "
        "{high} per prompt) with SSIM {ssim} (worst {worst}) and local difference {local} (worst "
        "{local_worst}); diffusers' {diffusers} skips {diffusers_skips}.",
        {
            "threshold": f"{probe:g}",
            "skips": _skips(at["mean_skipped"]),
            "steps": str(document["steps"]),
            "low": str(min(per_prompt)),
            "high": str(max(per_prompt)),
            "ssim": fixed(at["mean_ssim"], 3),
            "worst": fixed(at["min_ssim"], 3),
            "local": _figure(at.get("mean_local_diff"), 3),
            "local_worst": _figure(at.get("max_local_diff"), 3),
            "diffusers": f"{DIFFUSERS_THRESHOLD:g}",
            "diffusers_skips": _skips(diffusers["mean_skipped"]),
        },
    )


def readme_figures(
    document: dict[str, Any] | None = None, calibration: dict[str, Any] | None = None
) -> list[Block | Passage]:
    """The table and the figures the README's prose quotes from the comparison."""
    document = load() if document is None else document
    calibration = load(CALIBRATION) if calibration is None else calibration
    source = "lab/gates/results/compare-demo.json"
    defaults = _defaults()
    tea, mag = (
        _at(document, "teacache", defaults["teacache"]),
        _at(document, "magcache", defaults["magcache"]),
    )
    cliff = max(r["threshold"] for r in document["summary"]["magcache"])
    flux = _at(document, "magcache-flux-recipe", defaults["magcache"])
    recipe = document["recipes"]["magcache-flux-recipe"]
    host = document["host"]
    provenance = calibration["magcache"]["provenance"]
    return [
        Block("gate-compare-table", source, readme_table(document)),
        Block("gate-matched-table", source, matched_table(document)),
        probe_passage(document),
        Passage(
            source,
            "(`uv run python -m lab.gates.compare`, {prompts} prompts neither gate was calibrated "
            "on, same seed; quality from resumed passes, bit-exact with real ones; "
            "`lab/gates/results/compare-demo.json` and `.png`; {cpu}, {cores} cores, shared; "
            "{minutes} minutes of CPU time):",
            {
                "prompts": str(len(document["prompts"])),
                "cpu": host["cpu"],
                "cores": str(host["cores"]),
                "minutes": fixed(document["cpu_seconds"] / 60, 0),
            },
        ),
        Passage(
            source,
            "At {skips} skipped steps TeaCache keeps SSIM {tea} (worst {tea_worst}), MagCache "
            "{mag} (worst {mag_worst}).",
            {
                "skips": _skips(mag["mean_skipped"]),
                "tea": fixed(tea["mean_ssim"], 3),
                "tea_worst": fixed(tea["min_ssim"], 3),
                "mag": fixed(mag["mean_ssim"], 3),
                "mag_worst": fixed(mag["min_ssim"], 3),
            },
        ),
        Passage(
            source,
            "quality falls off a cliff ({cliff} at {threshold}).",
            {
                "cliff": fixed(_at(document, "magcache", cliff)["mean_ssim"], 2),
                "threshold": f"{cliff:g}",
            },
        ),
        Passage(
            source,
            "The reference's FLUX.1-dev recipe (K {k}, retention {retention}) on the demo's table "
            "skips more but keeps less ({skips} skips, SSIM {ssim}, worst {worst}).",
            {
                "k": str(recipe["max_consecutive_skips"]),
                "retention": f"{recipe['retention_ratio']:g}",
                "skips": _skips(flux["mean_skipped"]),
                "ssim": fixed(flux["mean_ssim"], 3),
                "worst": fixed(flux["min_ssim"], 3),
            },
        ),
        Passage(
            "lab/gates/results/demo.magcache-calibration.json",
            "(largest spread across the {prompts} calibration prompts: {spread})",
            {
                "prompts": str(len(calibration["per_prompt_ratios"])),
                "spread": fixed(provenance["fit_value"], 3),
            },
        ),
        Passage(
            source,
            "(the right-hand plot has {timed} prompts timed per gate,",
            {"timed": count_word(len({r["prompt"] for r in document["speed"]["teacache"]}))},
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="TeaCache, MagCache and the first-block probe on the demo"
    )
    parser.add_argument("--prompts", type=int, default=20, help="prompts (default 20)")
    parser.add_argument(
        "--speed-prompts", type=int, default=2, help="prompts timed with real passes (default 2)"
    )
    parser.add_argument(
        "--speed-reps",
        type=int,
        default=SPEED_REPS,
        help=f"cold-process repetitions per timed condition (default {SPEED_REPS})",
    )
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="re-measure only the speed panel of the document in --out (quality rows kept)",
    )
    parser.add_argument(
        "--quality-only",
        action="store_true",
        help="re-measure only the quality rows (exact, any load); the speed panel of the document "
        "in --out is kept",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=tuple(STYLES),
        default=(),
        help="re-measure only these lines' quality rows (implies --quality-only); the other "
        "lines and the speed panel of the document in --out are kept",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="output folder")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.speed_prompts < 1 or args.speed_reps < 1 or args.prompts < args.speed_prompts:
        parser.error("--speed-prompts and --speed-reps must be at least 1, and --prompts at "
                     "least --speed-prompts")  # fmt: skip
    if args.speed_only:
        document = remeasure_speed(args.out, args.speed_prompts, args.speed_reps, quiet=args.quiet)
        for name, rows in document["speed_summary"].items():
            print(name)
            for r in rows:
                print(
                    f"  {r['threshold']:<6g} skipped {r['mean_skipped']:5.2f}  speed-up "
                    f"{r['median_speedup']:.2f}× (ideal {r['mean_ideal_speedup']:.2f}×)"
                )
        return _check_speed(document)
    # The FLUX-recipe calibration is scratch data: keep it out of the user's calibrations.
    with tempfile.TemporaryDirectory() as home:
        os.environ["TEACACHE_STUDIO_HOME"] = home
        document = sweep(
            args.prompts, args.speed_prompts, args.out, speed_reps=args.speed_reps,
            quiet=args.quiet, quality_only=args.quality_only or bool(args.only),
            only=tuple(args.only),
        )  # fmt: skip
    for name, rows in document["summary"].items():
        print(name)
        for r in rows:
            print(
                f"  {r['threshold']:<6g} skipped {r['mean_skipped']:5.2f}  SSIM mean "
                f"{r['mean_ssim']:.4f} worst {r['min_ssim']:.4f}"
            )
    return _check_speed(document)


def _check_speed(document: dict[str, Any]) -> int:
    over = above_ideal(document)
    if over and document.get("above_ideal_reason"):  # a kept panel, with its reason recorded
        print(f"speed panel kept as measured: {document['above_ideal_reason']}", file=sys.stderr)
        return 0
    if over:
        print(
            "speed rows above what skipping can deliver (the host's load changed between the "
            "processes; measure again on a quiet machine):\n  " + "\n  ".join(over),
            file=sys.stderr,
        )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
