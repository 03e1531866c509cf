"""Threshold sweeps: skips, SSIM against vanilla and speedup per threshold.

Two timing modes, never mixed in one table:

* ``isolated`` (default): vanilla once and each threshold's gated run, every one in a fresh
  subprocess worker with a discarded warm-up (the benchmark's worker), ``reps`` cold repetitions
  each, interleaved rep-outer. The speedup column is honest: median vanilla loop over median
  gated loop, with the skip counts beside it.
* ``none``: one process; vanilla once, then each gated pass *resumed* from the vanilla
  trajectory (bit-exact up to the first skip, the app's fast path). Skips and SSIM are exact,
  but a resumed pass replays vanilla's steps, so its time is not a speed measurement: the speed
  columns are left empty and the report says why.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.chunks import ChunkStore, write_json_atomic
from app.bench.harness import ChunkedOutcome, Runner, WorkerFailed, subprocess_runner
from app.bench.worker import WorkerSpec, request_recipe
from app.engine.report import RunReport
from app.engine.request import GenerationRequest
from app.gate.kinds import DEFAULT_GATE
from app.hardware import host_info
from app.metrics import ssim

TIMING_MODES = ("isolated", "none")
NOT_MEASURED = (
    "speed not measured: each gated pass resumed from the vanilla trajectory in one process "
    "(exact for skips and SSIM, not a timing); use --timing isolated for speed"
)


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """One sweep: the request (its threshold unused: each run takes one of ``thresholds``) and how
    the sweep repeats and times it."""

    request: GenerationRequest
    thresholds: tuple[float, ...]
    reps: int = 1
    warmup: int = 1
    timing: str = "isolated"

    def settings(self) -> dict[str, Any]:
        """The recipe as the report (and the chunk folder's plan) records it."""
        recipe = request_recipe(self.request)
        del recipe["threshold"]
        return {
            **recipe,
            "thresholds": list(self.thresholds),
            "reps": self.reps,
            "warmup": self.warmup,
            "timing": self.timing,
        }

    def spec(self, condition: str, threshold: float, rep: int, image: Path | None) -> WorkerSpec:
        return WorkerSpec(
            replace(self.request, threshold=threshold),
            condition,
            warmup=self.warmup,
            rep=rep,
            image_path=None if image is None else str(image),
        )


def threshold_key(threshold: float) -> str:
    return f"t{threshold:.4f}"


def plan_sweep(config: SweepConfig) -> list[tuple[int, str, float]]:
    """Rep-outer: vanilla, then every threshold in ascending order, then the next repetition."""
    order: list[tuple[int, str, float]] = []
    for rep in range(config.reps if config.timing == "isolated" else 1):
        order.append((rep, "vanilla", 0.0))
        order += [(rep, "gated", t) for t in sorted(config.thresholds)]
    return order


def chunk_name(rep: int, condition: str, threshold: float) -> str:
    return f"rep{rep}-vanilla" if condition == "vanilla" else f"rep{rep}-{threshold_key(threshold)}"


def image_name(condition: str, threshold: float) -> str:
    return "vanilla.png" if condition == "vanilla" else f"gated-{threshold_key(threshold)}.png"


def run_sweep(
    config: SweepConfig,
    out_dir: Path,
    *,
    runner: Runner | None = None,
    progress: bool = True,
    max_chunks: int | None = None,
    fresh: bool = False,
) -> ChunkedOutcome:
    from tqdm import tqdm

    store = ChunkStore(out_dir / "chunks", config.settings(), fresh=fresh)
    images = out_dir / "images"
    images.mkdir(parents=True, exist_ok=True)
    plan = plan_sweep(config)
    done = sum(store.done(chunk_name(*item)) for item in plan)
    bar = tqdm(
        total=len(plan),
        initial=done,
        desc=f"sweep {config.request.variant_id}",
        unit="run",
        file=sys.stderr,
        disable=not progress,
    )
    pending = [item for item in plan if not store.done(chunk_name(*item))]
    if max_chunks is not None:
        pending = pending[:max_chunks]  # a deliberate, resumable stop
    runner = runner or subprocess_runner(log_dir=store.directory / "logs")

    def image_for(rep: int, condition: str, threshold: float) -> Path | None:
        return images / image_name(condition, threshold) if rep == 0 else None

    def keep(item: tuple[int, str, float], result: dict[str, Any]) -> None:
        nonlocal done
        store.save(chunk_name(*item), result)
        done += 1
        bar.update(1)
        bar.set_postfix_str(
            f"{_label(*item[1:])}: {result['skipped']}/{result['active_steps']} skipped"
        )

    try:
        if config.timing == "none":
            in_process = _InProcess(config)
            try:
                in_process.run(
                    [(c, t, image_for(r, c, t)) for r, c, t in pending],
                    lambda index, result: keep(pending[index], result),
                )
            finally:
                in_process.close()
        else:
            for rep, condition, threshold in pending:
                bar.set_postfix_str(f"{_label(condition, threshold)} rep {rep}")
                image = image_for(rep, condition, threshold)
                keep(
                    (rep, condition, threshold),
                    runner(config.spec(condition, threshold, rep, image)),
                )
    finally:
        bar.close()
    if done < len(plan):
        return ChunkedOutcome(None, done, len(plan), store.directory)
    results = {chunk_name(*item): store.load(chunk_name(*item)) or {} for item in plan}
    report = build_sweep_report(config, results, images, host_info())
    write_json_atomic(out_dir / "sweep.json", report)
    from app.bench.plots import contact_sheet, sweep_plot

    sweep_plot(report, out_dir / "sweep.png")
    contact_sheet(report, out_dir, out_dir / "contact_sheet.png")
    (out_dir / "sweep.md").write_text(sweep_markdown(report), encoding="utf-8")
    return ChunkedOutcome(report, done, len(plan), store.directory)


def _label(condition: str, threshold: float) -> str:
    return "vanilla" if condition == "vanilla" else f"threshold {threshold:g}"


class _InProcess:
    """``--timing none``: the pending chunks as one ``ThresholdSweep`` job (the vanilla chunk at
    threshold 0, whose gated pass replays every vanilla step), run by the one job runner on the
    engine's fast path (vanilla cached, gated passes resumed)."""

    def __init__(self, config: SweepConfig) -> None:
        from app.blas import preload_openblas

        preload_openblas()
        from app.engine.engine import Engine

        self.config = config
        self.engine = Engine()

    def run(
        self,
        items: Sequence[tuple[str, float, Path | None]],
        on_result: Callable[[int, dict[str, Any]], None],
    ) -> None:
        """Run every (condition, threshold, image) in order; ``on_result`` gets each chunk's
        result as it finishes. Raises ``WorkerFailed`` where a pass failed."""
        import threading

        from app.engine import events as ev
        from app.engine.jobs import ThresholdSweep, run_job

        if not items:
            return
        sweep = ThresholdSweep(self.config.request, tuple(t for _, t, _ in items))
        finished: list[int] = []
        failures: list[str] = []

        def emit(event: object) -> None:
            if isinstance(event, ev.SweepEntryDone):
                on_result(event.index, _chunk_result(*items[event.index], event.report))
                finished.append(event.index)
            elif isinstance(event, ev.RunFailed):
                failures.append(event.message)
            elif isinstance(event, ev.SweepFinished) and event.failure is not None:
                failures.append(event.failure)

        run_job(self.engine, 1, sweep, emit, threading.Event())
        if failures:
            condition, threshold, _ = items[len(finished)]
            raise WorkerFailed(f"{_label(condition, threshold)} failed: {failures[0]}")

    def close(self) -> None:
        self.engine.close()


def _chunk_result(
    condition: str, threshold: float, image: Path | None, report: RunReport
) -> dict[str, Any]:
    """One in-process chunk as the subprocess worker reports one (no time: not measured)."""
    from PIL import Image

    from app.engine.report import longest_skip_streak

    vanilla = report.vanilla
    if vanilla is None:
        raise RuntimeError("a sweep pass ran without its vanilla pass")
    if condition == "vanilla":
        pattern, picture, skipped = vanilla.pattern, vanilla.image, 0
    else:
        pattern, picture, skipped = report.gated.pattern, report.gated.image, report.gated.skipped
    if image is not None:
        Image.fromarray(picture).save(image)
    return {
        "condition": condition,
        "threshold": threshold,
        "rep": 0,
        "pattern": pattern,
        "skipped": skipped,
        "computed": len(pattern) - skipped,
        "active_steps": len(pattern),
        "longest_skip_streak": longest_skip_streak(pattern),
        "loop_seconds": None,
        "image": None if image is None else str(image),
        "resumed_from_step": report.gated.resumed_from,
        "max_abs_diff": report.max_abs_diff if condition == "gated" else 0.0,
    }


def _load_rgb(path: str | Path | None) -> np.ndarray | None:
    if path is None or not Path(path).exists():
        return None
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _median(values: list[Any]) -> float | None:
    clean = [v for v in values if v is not None]
    return statistics.median(clean) if clean else None


def build_sweep_report(
    config: SweepConfig, results: dict[str, dict[str, Any]], images: Path, host: dict[str, Any]
) -> dict[str, Any]:
    reps = config.reps if config.timing == "isolated" else 1
    vanilla_runs = [results[chunk_name(r, "vanilla", 0.0)] for r in range(reps)]
    vanilla_image = _load_rgb(images / image_name("vanilla", 0.0))
    vanilla_loop = _median([r.get("loop_seconds") for r in vanilla_runs])
    rows = []
    for threshold in sorted(config.thresholds):
        runs = [results[chunk_name(r, "gated", threshold)] for r in range(reps)]
        first = runs[0]
        picture = _load_rgb(images / image_name("gated", threshold))
        loop = _median([r.get("loop_seconds") for r in runs])
        computed = _median([r["computed"] for r in runs])
        active = first["active_steps"]
        ideal = active / computed if computed else None
        speedup = vanilla_loop / loop if (vanilla_loop and loop) else None
        rows.append(
            {
                "threshold": threshold,
                "skipped": first["skipped"],
                "skipped_per_rep": [r["skipped"] for r in runs],
                "computed": first["computed"],
                "active_steps": active,
                "pattern": first["pattern"],
                "longest_skip_streak": first["longest_skip_streak"],
                "ssim": None
                if vanilla_image is None or picture is None
                else ssim(vanilla_image, picture),
                "loop_seconds": loop,
                "loop_seconds_per_rep": [r.get("loop_seconds") for r in runs],
                "speedup": speedup,
                "ideal_speedup": ideal,
                "measured_over_ideal": speedup / ideal if speedup and ideal else None,
                "image": f"images/{image_name('gated', threshold)}",
                "max_abs_diff": first.get("max_abs_diff"),
            }
        )
    timing_note = (
        "every run in a fresh Python subprocess after a discarded warm-up generation; vanilla "
        f"then each threshold in ascending order, {reps} repetition(s) interleaved rep-outer; "
        "median denoising-loop time"
        if config.timing == "isolated"
        else NOT_MEASURED
    )
    return {
        "kind": "sweep",
        "schema": 1,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recipe": config.settings(),
        "timing": timing_note,
        "ssim_basis": "SSIM of each gated image against the vanilla image of the same recipe "
        "(8-bit RGB, skimage structural_similarity, data_range 255)",
        "hardware": {**host, "runtime": next((r.get("runtime") for r in vanilla_runs), None)},
        "vanilla": {
            "loop_seconds": vanilla_loop,
            "loop_seconds_per_rep": [r.get("loop_seconds") for r in vanilla_runs],
            "pattern": vanilla_runs[0]["pattern"],
            "image": f"images/{image_name('vanilla', 0.0)}",
        },
        "rows": rows,
    }


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def sweep_markdown(report: dict[str, Any]) -> str:
    recipe = report["recipe"]
    lines = [
        f"# Threshold sweep: {recipe['variant']}, {recipe['steps']} steps, "
        f"{recipe['width']}×{recipe['height']}",
        "",
        f"- Prompt: “{recipe['prompt']}”, seed {recipe['seed']}",
        f"- Gate: {recipe.get('gate', DEFAULT_GATE)}",
        f"- Timing: {report['timing']}",
        f"- SSIM: {report['ssim_basis']}",
        f"- Vanilla loop: {_fmt(report['vanilla']['loop_seconds'], '.3f', ' s')}",
        "",
        "| Threshold | Skipped | Pattern | Longest streak | SSIM | Gated loop | Speedup | Ideal "
        "| Measured / ideal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['threshold']:g} | {row['skipped']}/{row['active_steps']} | `{row['pattern']}` "
            f"| {row['longest_skip_streak']} | {_fmt(row['ssim'], '.4f')} "
            f"| {_fmt(row['loop_seconds'], '.3f', ' s')} | {_fmt(row['speedup'], '.2f', '×')} "
            f"| {_fmt(row['ideal_speedup'], '.2f', '×')} "
            f"| {_fmt(row['measured_over_ideal'], '.2f')} |"
        )
    return "\n".join(lines) + "\n"
