"""Reuse or forecast on a skipped step: the quality/cost frontier on the embedded demo (#42).

    uv run python -m lab.gates.fill frontier            # the committed run, then the figure
    uv run python -m lab.gates.fill frontier --prompts 1 --seeds 42 --out /tmp/f.json  # a look
    uv run python -m lab.gates.fill plot                # the figure from the committed JSON
    uv run python -m lab.gates.fill dev                 # the development sweep (forecast variants)

``frontier`` runs the demo (embedded, offline, CPU; 28 steps, 128²) on a few evaluation prompts
(``lab.demo.evaluate``, scene seeds 900 000 on, which no calibration or ``dev`` saw) and a few
generation seeds: vanilla once per (prompt, seed), then every gate over ``THRESHOLDS`` with each
fill, each a real (not resumed) gated pass, so its loop time is its own. Per run: computed and
skipped steps, the steps that forecast, SSIM and SSIMULACRA2 against vanilla (same prompt and
seed), the local difference, and both loops' seconds. Per fill, the Pareto frontier of the
settings (gate, threshold) over mean computed steps and mean quality (each of SSIM and
SSIMULACRA2): a setting is on it when no other setting of that fill computes no more steps and
keeps at least as much quality, one of the two strictly. ``moved`` reads the two fills' frontiers
at the same budgets and bars. The loop times come from a shared 2-core machine: they say what the
skips cost, not a benchmark (``teacache-studio bench`` is that).

``dev`` compared forecast variants (order, horizon, damping, a Heun-style corrected slope, the
guard) against reuse on 40 development scenes (the gate comparison's 20, seeds 820 000–820 019, and
20 it never used); it was stopped part-way and its rows are committed as they are
(``results/fill-dev.partial.jsonl``): the basis of the shipped forecast's settings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.fileio.jsonio import dumps_json
from lab.demo.reports import write_json
from lab.demo.scenes import caption, scene_from_seed
from lab.readme_figures import Block, Passage, fixed

RESULTS = Path(__file__).parent / "results"
FRONTIER_DOCUMENT = RESULTS / "fill-frontier.json"
DEV_PARTIAL = RESULTS / "fill-dev.partial.jsonl"
STEPS = 28
SIZE = 128
PROMPTS = 3  # the first evaluation prompts
SEEDS = (42, 7)  # generation seeds: each prompt at each
FILLS = ("reuse", "forecast")
# Each gate from well inside its quality range to well past 2× (the gate comparison's ranges,
# lab/gates/compare.py, thinned).
THRESHOLDS: dict[str, tuple[float, ...]] = {
    "teacache": (0.04, 0.06, 0.1, 0.15, 0.2, 0.3),
    "magcache": (0.005, 0.01, 0.02, 0.05, 0.1),
    "firstblock": (0.05, 0.08, 0.12, 0.16, 0.2, 0.3),
}
QUALITIES = ("ssim", "ssimulacra2")
# Why a setting's measured speed-up may exceed its ideal here (tests/test_committed_speedups.py).
ABOVE_IDEAL_REASON = (
    "one timing per run on a shared 2-core machine: each vanilla loop is timed once per prompt "
    "and seed and the gated loops at other moments, so the host's load moves the ratio either "
    "way; not a benchmark (teacache-studio bench is)"
)
# The bars ``moved`` reads the frontiers at: SSIM's issue targets and SSIMULACRA2's scale words
# (app.metrics.ssimulacra2: 90 very high, 70 high, 50 medium).
BARS: dict[str, tuple[float, ...]] = {"ssim": (0.98, 0.99, 0.995), "ssimulacra2": (50, 70, 90)}
GATE_NAMES = {"teacache": "TeaCache", "magcache": "MagCache", "firstblock": "First-block probe"}
QUALITY_NAMES = {"ssim": "SSIM", "ssimulacra2": "SSIMULACRA2"}


def eval_texts(n: int) -> list[str]:
    from lab.demo.evaluate import eval_prompts

    return eval_prompts(n)


def _engine() -> Any:
    from app.blas import preload_openblas

    preload_openblas()  # before MLX: a lab script that imports MLX first runs ~10× slower
    from app.engine.engine import Engine

    return Engine(vanilla_cache_size=2)


def _generate(engine: Any, prompt: str, seed: int, gate: str, threshold: float, fill: str) -> Any:
    from app.engine.request import make_request

    request = make_request(
        "demo",
        prompt,
        seed=seed,
        steps=STEPS,
        size=(SIZE, SIZE),
        threshold=threshold,
        gate=gate,
        fill=fill,
    )
    return engine.generate(0, request, lambda event: None, threading.Event())


def row_of(report: Any) -> dict[str, Any]:
    """One run's figures: steps computed, skipped and forecast, quality against vanilla, the
    two loops' seconds."""
    from app.gate.fill import REACH

    steps = report.gated.steps
    computed = sum(s.decision.computes for s in steps)
    vanilla = report.vanilla
    return {
        "computed": computed,
        "skipped": len(steps) - computed,
        "forecast_steps": sum(s.fill.get(REACH, 0.0) > 0 for s in steps),
        "pattern": report.gated.pattern,
        "ssim": report.ssim,
        "ssimulacra2": report.ssimulacra2,
        "local_diff": report.local_diff_value,
        "gated_seconds": report.gated.loop_seconds,
        "vanilla_seconds": None if vanilla is None else vanilla.loop_seconds,
    }


def measure(
    texts: Sequence[str],
    seeds: Sequence[int],
    thresholds: Mapping[str, Sequence[float]],
    *,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (prompt, seed) × gate × threshold × fill, each a real gated pass beside the cached
    vanilla pass of its prompt and seed."""
    engine = _engine()
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        for p, text in enumerate(texts):
            for seed in seeds:
                for gate, values in thresholds.items():
                    for threshold in values:
                        for fill in FILLS:
                            report = _generate(engine, text, seed, gate, threshold, fill)
                            row = {"prompt": p, "seed": seed, "gate": gate}
                            row.update(threshold=threshold, fill=fill, **row_of(report))
                            rows.append(row)
                if progress is not None:
                    progress(
                        f"prompt {p + 1}/{len(texts)}, seed {seed}: "
                        f"{time.perf_counter() - started:.0f} s"
                    )
    finally:
        engine.close()
    return rows


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means and worst cases of one setting's runs (every prompt and seed once)."""
    gated = _mean([r["gated_seconds"] for r in rows])
    vanilla = _mean([r["vanilla_seconds"] for r in rows])
    perceptual = [r["ssimulacra2"] for r in rows if r["ssimulacra2"] is not None]
    return {
        "runs": len(rows),
        "mean_computed": statistics.fmean(r["computed"] for r in rows),
        "mean_skipped": statistics.fmean(r["skipped"] for r in rows),
        "mean_forecast_steps": statistics.fmean(r["forecast_steps"] for r in rows),
        "ideal_speedup": STEPS / statistics.fmean(r["computed"] for r in rows),
        "mean_ssim": statistics.fmean(r["ssim"] for r in rows),
        "min_ssim": min(r["ssim"] for r in rows),
        "mean_ssimulacra2": statistics.fmean(perceptual) if perceptual else None,
        "min_ssimulacra2": min(perceptual) if perceptual else None,
        "max_local_diff": max(r["local_diff"] for r in rows),
        "mean_gated_seconds": gated,
        # vanilla's mean loop over this setting's: one timing a run on a shared machine
        "speedup": None if gated is None or vanilla is None else vanilla / gated,
    }


def settings(
    rows: Sequence[dict[str, Any]], thresholds: Mapping[str, Sequence[float]]
) -> dict[str, list[dict[str, Any]]]:
    """Each fill's settings (gate, threshold), summarised over their runs."""
    out: dict[str, list[dict[str, Any]]] = {}
    for fill in FILLS:
        out[fill] = []
        for gate, values in thresholds.items():
            for t in values:
                found = [
                    r for r in rows if (r["gate"], r["threshold"], r["fill"]) == (gate, t, fill)
                ]
                if found:
                    out[fill].append({"gate": gate, "threshold": t, **summarise(found)})
    return out


def dominates(a: dict[str, Any], b: dict[str, Any], quality: str) -> bool:
    """``a`` computes no more steps and keeps at least as much mean quality as ``b``, one of the
    two strictly."""
    qa, qb = a[f"mean_{quality}"], b[f"mean_{quality}"]
    no_worse = a["mean_computed"] <= b["mean_computed"] and qa >= qb
    return no_worse and (a["mean_computed"] < b["mean_computed"] or qa > qb)


def pareto(points: Sequence[dict[str, Any]], quality: str) -> list[dict[str, Any]]:
    """The settings no other setting dominates, fewest computed steps first."""
    known = [p for p in points if p[f"mean_{quality}"] is not None]
    front = [p for p in known if not any(dominates(q, p, quality) for q in known)]
    return sorted(front, key=lambda p: (p["mean_computed"], -p[f"mean_{quality}"]))


def best_within(front: Sequence[dict[str, Any]], quality: str, budget: float) -> float | None:
    """The most mean quality a frontier keeps computing at most ``budget`` steps (mean)."""
    within = [p[f"mean_{quality}"] for p in front if p["mean_computed"] <= budget]
    return max(within, default=None)


def cheapest_at(front: Sequence[dict[str, Any]], quality: str, bar: float) -> dict[str, Any] | None:
    """The frontier's setting with the fewest computed steps that keeps mean quality ≥ ``bar``."""
    meeting = [p for p in front if p[f"mean_{quality}"] >= bar]
    return min(meeting, key=lambda p: p["mean_computed"], default=None)


def moved(fronts: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Does the forecast move the frontier? Per quality: at each budget where either frontier has
    a point, the best each fill keeps within it and the forecast's gain; at each bar, the fewest
    computed steps each fill needs (its ideal speed-up)."""
    out: dict[str, Any] = {}
    for quality in QUALITIES:
        reuse, forecast = fronts["reuse"][quality], fronts["forecast"][quality]
        budgets = sorted({p["mean_computed"] for p in (*reuse, *forecast)})
        at_budget = []
        for budget in budgets:
            r, f = best_within(reuse, quality, budget), best_within(forecast, quality, budget)
            gain = None if r is None or f is None else f - r
            at_budget.append({"computed": budget, "reuse": r, "forecast": f, "gain": gain})
        at_bar = []
        for bar in BARS[quality]:
            row: dict[str, Any] = {"bar": bar}
            for fill, front in (("reuse", reuse), ("forecast", forecast)):
                point = cheapest_at(front, quality, bar)
                row[fill] = None if point is None else _where(point)
            at_bar.append(row)
        out[quality] = {"at_budget": at_budget, "at_bar": at_bar}
    return out


def _where(point: dict[str, Any]) -> dict[str, Any]:
    keys = ("gate", "threshold", "mean_computed", "ideal_speedup", "mean_ssim", "mean_ssimulacra2")
    return {k: point[k] for k in keys}


def frontier_document(
    rows: Sequence[dict[str, Any]],
    texts: Sequence[str],
    seeds: Sequence[int],
    thresholds: Mapping[str, Sequence[float]],
    seconds: float | None = None,
) -> dict[str, Any]:
    """What ``frontier`` commits: every run, each fill's settings and frontiers, their reading,
    the machine."""
    from app.gate.fill import get_fill
    from app.hardware import blas_in_use, host_info

    by_fill = settings(rows, thresholds)
    fronts = {fill: {q: pareto(found, q) for q in QUALITIES} for fill, found in by_fill.items()}
    return {
        "command": "uv run python -m lab.gates.fill frontier"
        + (f" --prompts {len(texts)}" if len(texts) != PROMPTS else "")
        + (f" --seeds {' '.join(map(str, seeds))}" if tuple(seeds) != SEEDS else ""),
        "variant": "demo",
        "steps": STEPS,
        "size": SIZE,
        "prompts": list(texts),
        "seeds": list(seeds),
        "thresholds": {gate: list(values) for gate, values in thresholds.items()},
        "fills": {name: get_fill(name).describe() for name in FILLS},
        "quality_basis": "real gated passes against the vanilla pass of the same prompt and seed",
        "above_ideal_reason": ABOVE_IDEAL_REASON,
        "settings": by_fill,
        "frontier": fronts,
        "moved": moved(fronts),
        "rows": list(rows),
        "seconds": seconds,
        "host": {**host_info(), "blas": blas_in_use()},
    }


def frontier(
    out: Path,
    n_prompts: int = PROMPTS,
    seeds: Sequence[int] = SEEDS,
    thresholds: Mapping[str, Sequence[float]] = THRESHOLDS,
    *,
    quiet: bool = False,
) -> dict[str, Any]:
    texts = eval_texts(n_prompts)
    started = time.perf_counter()
    rows = measure(texts, seeds, thresholds, progress=None if quiet else _say)
    document = frontier_document(rows, texts, seeds, thresholds, time.perf_counter() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, document)
    return document


def _say(line: str) -> None:
    print(line, flush=True)


def plot(document: dict[str, Any], path: Path) -> None:
    """Each quality against the mean computed steps: every setting (faint), each fill's frontier
    (reuse dashed, forecast solid)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"reuse": "#7f7f7f", "forecast": "#1f77b4"}
    markers = {"teacache": "o", "magcache": "s", "firstblock": "^"}
    fig, axes = plt.subplots(1, len(QUALITIES), figsize=(12, 4.6), dpi=120)
    for axis, quality in zip(axes, QUALITIES, strict=True):
        for fill in FILLS:
            for p in document["settings"][fill]:
                if p[f"mean_{quality}"] is not None:
                    axis.plot(p["mean_computed"], p[f"mean_{quality}"], markers[p["gate"]],
                              color=colours[fill], alpha=0.35, markersize=4)  # fmt: skip
            front = document["frontier"][fill][quality]
            axis.plot([p["mean_computed"] for p in front], [p[f"mean_{quality}"] for p in front],
                      "-" if fill == "forecast" else "--", color=colours[fill],
                      label=f"{fill}: frontier")  # fmt: skip
        for gate, marker in markers.items():
            axis.plot([], [], marker, color="black", alpha=0.5, label=GATE_NAMES[gate])
        axis.set_xlabel(f"computed steps of {document['steps']} (mean)")
        axis.set_ylabel(f"{QUALITY_NAMES[quality]} against vanilla (mean)")
        axis.invert_xaxis()  # faster to the right
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="lower left")
    runs = len(document["prompts"]) * len(document["seeds"])
    fig.suptitle(
        f"Reuse or forecast on a skipped step: the demo, {runs} runs per setting, "
        f"{document['steps']} steps, {document['size']}²",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def load(path: Path = FRONTIER_DOCUMENT) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _figure(value: float | None, digits: int) -> str:
    return "—" if value is None else fixed(value, digits)


def frontier_table(document: dict[str, Any]) -> str:
    """The README's table: each fill's fewest computed steps at each bar."""
    rows = [
        "| Bar (mean over runs) | Reuse: fewest computed steps of 28, ideal speed-up (its mean) "
        "| Forecast: fewest computed steps of 28, ideal speed-up (its mean) |",
        "|---|---|---|",
    ]
    for quality in QUALITIES:
        for row in document["moved"][quality]["at_bar"]:
            cells = []
            for fill in FILLS:
                p = row[fill]
                cells.append(
                    "none meets it"
                    if p is None
                    else f"{GATE_NAMES[p['gate']]} {p['threshold']:g}: "
                    f"{fixed(p['mean_computed'], 1)}, {fixed(p['ideal_speedup'], 2)}× "
                    f"({QUALITY_NAMES[quality]} {_quality(p, quality)})"
                )
            rows.append(f"| {QUALITY_NAMES[quality]} ≥ {row['bar']:g} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def _quality(point: dict[str, Any], quality: str) -> str:
    value = point[f"mean_{quality}"]
    return fixed(value, 4) if quality == "ssim" else fixed(value, 1)


def gains(document: dict[str, Any], quality: str) -> list[dict[str, Any]]:
    """The budgets where both frontiers have a point within, with the forecast's gain."""
    return [r for r in document["moved"][quality]["at_budget"] if r["gain"] is not None]


def setting_pairs(document: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each setting (gate, threshold) with reuse and with the forecast, side by side."""
    forecast = {(p["gate"], p["threshold"]): p for p in document["settings"]["forecast"]}
    return [
        (p, forecast[(p["gate"], p["threshold"])])
        for p in document["settings"]["reuse"]
        if (p["gate"], p["threshold"]) in forecast
    ]


def _s2_gain(pair: tuple[dict[str, Any], dict[str, Any]]) -> float:
    reuse, forecast = pair
    return forecast["mean_ssimulacra2"] - reuse["mean_ssimulacra2"]


def readme_figures(document: dict[str, Any] | None = None) -> list[Block | Passage]:
    """The frontier's table and the reading the README quotes."""
    document = load() if document is None else document
    source = "lab/gates/results/fill-frontier.json"
    host = document["host"]
    ssim_gains, s2_gains = gains(document, "ssim"), gains(document, "ssimulacra2")
    best_ssim = max(ssim_gains, key=lambda r: r["gain"])
    best_s2 = max(s2_gains, key=lambda r: r["gain"])
    most_skips = min(s2_gains, key=lambda r: r["computed"])
    pairs = setting_pairs(document)
    loses_reuse, loses_forecast = min(pairs, key=_s2_gain)
    return [
        Block("fill-frontier-table", source, frontier_table(document)),
        Passage(
            source,
            "({runs} runs per setting: {prompts} evaluation prompts × {seeds} seeds, 28 steps, "
            "128², real gated passes; {cpu}, {cores} cores, shared)",
            {
                "runs": str(len(document["prompts"]) * len(document["seeds"])),
                "prompts": str(len(document["prompts"])),
                "seeds": str(len(document["seeds"])),
                "cpu": host["cpu"],
                "cores": str(host["cores"]),
            },
        ),
        Passage(
            source,
            "largest gain within one budget is SSIM {ssim_gain} (at {ssim_at} computed steps) "
            "and SSIMULACRA2 {s2_gain} (at {s2_at}); at the most skips ({fewest} computed) it is "
            "SSIMULACRA2 {end_gain}, where streaks are long",
            {
                "ssim_gain": f"{best_ssim['gain']:+.4f}",
                "ssim_at": fixed(best_ssim["computed"], 1),
                "s2_gain": f"{best_s2['gain']:+.1f}",
                "s2_at": fixed(best_s2["computed"], 1),
                "fewest": fixed(most_skips["computed"], 1),
                "end_gain": f"{most_skips['gain']:+.1f}",
            },
        ),
        Passage(
            source,
            "keeps more mean SSIMULACRA2 than reuse at {better} of {settings} settings",
            {
                "better": str(sum(_s2_gain(pair) > 0 for pair in pairs)),
                "settings": str(len(pairs)),
            },
        ),
        Passage(
            source,
            "it loses most at {gate} {threshold}: mean SSIMULACRA2 {reuse} with reuse against "
            "{forecast} with the forecast, the worst run {reuse_worst} against {forecast_worst}. "
            "MagCache skips",
            {
                "gate": GATE_NAMES[loses_reuse["gate"]],
                "threshold": f"{loses_reuse['threshold']:g}",
                "reuse": fixed(loses_reuse["mean_ssimulacra2"], 1),
                "forecast": fixed(loses_forecast["mean_ssimulacra2"], 1),
                "reuse_worst": fixed(loses_reuse["min_ssimulacra2"], 1),
                "forecast_worst": fixed(loses_forecast["min_ssimulacra2"], 1),
            },
        ),
    ]


# --- the development sweep (its rows are committed partial: results/fill-dev.partial.jsonl) ---

DEV_SEED_BASE = 820_000  # the gate comparison's 20 scenes and the prototype's 20 holdout scenes
DEV_PROMPTS = 40
DEV_GENERATION_SEED = 42
# The variants ``dev`` compares: name → Forecast fields (None: reuse).
DEV_FILLS: dict[str, dict[str, Any] | None] = {
    "reuse": None,
    "fo-h1": {"order": 1, "horizon": 1},
    "fo-h1-guard": {"order": 1, "horizon": 1, "guard": True},
    "fo-h1-d0.75": {"order": 1, "horizon": 1, "damping": 0.75},
    "fo-h2": {"order": 1, "horizon": 2},
    "heun-h1": {"order": 1, "horizon": 1, "corrected": True},
}
DEV_SETTINGS = (
    ("teacache", 0.15),
    ("teacache", 0.2),
    ("firstblock", 0.12),
    ("firstblock", 0.2),
    ("magcache", 0.05),
)


def dev_prompts(n: int = DEV_PROMPTS) -> list[str]:
    return [caption(scene_from_seed(DEV_SEED_BASE + i)) for i in range(n)]


def interleaved(n: int) -> list[int]:
    """Prompt indices in the order ``dev`` runs them: the comparison's scenes and the holdout
    alternately (0, 20, 1, 21, ...), so a run stopped early still covers both."""
    half = DEV_PROMPTS // 2
    order = [i for pair in zip(range(half), range(half, 2 * half), strict=True) for i in pair]
    return [i for i in order if i < n] + list(range(max(n, 2 * half), n))


@contextlib.contextmanager
def trial_fills(variants: dict[str, dict[str, Any] | None]) -> Iterator[None]:
    """The variants as fills the engine can run, by name, for the block (the registry's own
    entries come back after)."""
    from app.gate.fill import FILLS as REGISTRY
    from app.gate.fill import REUSE, Forecast

    saved = dict(REGISTRY)
    for name, fields in variants.items():
        REGISTRY[name] = REUSE if fields is None else Forecast(**fields)
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def dev_row(report: Any) -> dict[str, Any]:
    """One resumed pass's figures (quality only: a resumed pass's time is not its own)."""
    steps = report.gated.steps
    computed = sum(s.decision.computes for s in steps)
    errors = [s.fill["error"] for s in steps if "error" in s.fill]
    reuse_errors = [s.fill["reuse_error"] for s in steps if "reuse_error" in s.fill]
    return {
        "skipped": len(steps) - computed,
        "ssim": report.ssim,
        "ssimulacra2": report.ssimulacra2,
        "local_diff": report.local_diff_value,
        "pattern": report.gated.pattern,
        "ideal_speedup": len(steps) / computed,
        "worst_fill_error": max(errors, default=None),
        "worst_reuse_error": max(reuse_errors, default=None),
    }


def dev(partial: Path, n_prompts: int) -> None:
    """The development sweep: every variant of ``DEV_FILLS`` at every ``DEV_SETTINGS`` on resumed
    passes (bit-exact with real ones), one row appended per pass; a restarted run skips the rows
    it has."""
    from app.engine.request import make_request

    rows = (
        [json.loads(line) for line in partial.read_text(encoding="utf-8").splitlines() if line]
        if partial.exists()
        else []
    )
    done = {(r["prompt"], r["gate"], r["threshold"], r["fill"]) for r in rows}
    texts = dev_prompts(n_prompts)
    engine = _engine()
    with trial_fills(DEV_FILLS), partial.open("a", encoding="utf-8") as handle:
        for p in interleaved(n_prompts):
            for gate, threshold in DEV_SETTINGS:
                for fill in DEV_FILLS:
                    if (p, gate, threshold, fill) in done:
                        continue
                    request = make_request(
                        "demo", texts[p], seed=DEV_GENERATION_SEED, threshold=threshold,
                        gate=gate, fill=fill, resume=True,
                    )  # fmt: skip
                    report = engine.generate(0, request, lambda event: None, threading.Event())
                    row = {"prompt": p, "gate": gate, "threshold": threshold, "fill": fill}
                    handle.write(dumps_json({**row, **dev_row(report)}) + "\n")
                    handle.flush()
    engine.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gates.fill", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    frontier_parser = sub.add_parser("frontier", help="reuse vs forecast, every gate")
    frontier_parser.add_argument("--prompts", type=int, default=PROMPTS)
    frontier_parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    frontier_parser.add_argument("--out", type=Path, default=FRONTIER_DOCUMENT)
    plot_parser = sub.add_parser("plot", help="the figure from the JSON")
    plot_parser.add_argument("--out", type=Path, default=FRONTIER_DOCUMENT)
    dev_parser = sub.add_parser("dev", help="compare forecast variants on the development set")
    dev_parser.add_argument("--prompts", type=int, default=DEV_PROMPTS)
    dev_parser.add_argument("--out", type=Path, default=DEV_PARTIAL)
    args = parser.parse_args(argv)
    if args.command == "frontier":
        document = frontier(args.out, args.prompts, args.seeds)
        plot(document, args.out.with_suffix(".png"))
    elif args.command == "plot":
        plot(load(args.out), args.out.with_suffix(".png"))
    else:
        dev(args.out, args.prompts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
