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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.chunks import ChunkStore, write_json_atomic
from app.bench.harness import ChunkedOutcome, Runner, subprocess_runner
from app.bench.worker import WorkerSpec
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
    variant: str
    prompt: str
    seed: int
    steps: int
    width: int
    height: int
    thresholds: tuple[float, ...]
    guidance: float | None = None
    quantize: int | None = None
    loras: tuple[tuple[str, float], ...] = ()  # (path, scale)
    model_path: str | None = None  # a local model folder (--model-path)
    reps: int = 1
    warmup: int = 1
    timing: str = "isolated"
    gate: str = DEFAULT_GATE

    def settings(self) -> dict[str, Any]:
        data = asdict(self)
        data["thresholds"] = list(self.thresholds)
        data["loras"] = [list(lora) for lora in self.loras]  # as JSON reads it back
        return data

    def spec(self, condition: str, threshold: float, rep: int, image: Path | None) -> WorkerSpec:
        return WorkerSpec(
            variant=self.variant,
            condition=condition,
            prompt=self.prompt,
            seed=self.seed,
            steps=self.steps,
            width=self.width,
            height=self.height,
            threshold=threshold,
            guidance=self.guidance,
            quantize=self.quantize,
            loras=self.loras,
            model_path=self.model_path,
            warmup=self.warmup,
            rep=rep,
            image_path=None if image is None else str(image),
            gate=self.gate,
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
        desc=f"sweep {config.variant}",
        unit="run",
        file=sys.stderr,
        disable=not progress,
    )
    ran = 0
    in_process = _InProcess(config) if config.timing == "none" else None
    runner = runner or subprocess_runner(log_dir=store.directory / "logs")
    try:
        for rep, condition, threshold in plan:
            key = chunk_name(rep, condition, threshold)
            if store.done(key):
                continue
            if max_chunks is not None and ran >= max_chunks:
                break
            label = "vanilla" if condition == "vanilla" else f"threshold {threshold:g}"
            bar.set_postfix_str(f"{label} rep {rep}")
            image = images / image_name(condition, threshold) if rep == 0 else None
            if in_process is not None:
                result = in_process.run(condition, threshold, image)
            else:
                result = runner(config.spec(condition, threshold, rep, image))
            store.save(key, result)
            ran += 1
            done += 1
            bar.update(1)
            bar.set_postfix_str(f"{label}: {result['skipped']}/{result['active_steps']} skipped")
    finally:
        bar.close()
        if in_process is not None:
            in_process.close()
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


class _InProcess:
    """``--timing none``: the engine's own fast path (vanilla cached, gated passes resumed)."""

    def __init__(self, config: SweepConfig) -> None:
        from app.blas import preload_openblas

        preload_openblas()
        from app.engine.engine import Engine

        self.config = config
        self.engine = Engine()

    def run(self, condition: str, threshold: float, image: Path | None) -> dict[str, Any]:
        import threading

        from PIL import Image

        from app.engine import events as ev
        from app.engine.request import make_request

        request = make_request(
            self.config.variant,
            self.config.prompt,
            seed=self.config.seed,
            steps=self.config.steps,
            threshold=threshold,
            size=(self.config.width, self.config.height),
            guidance=self.config.guidance,
            quantize=self.config.quantize,
            loras=self.config.loras,
            compare_vanilla=True,
            resume=True,
            gate=self.config.gate,
        )
        outcome: dict[str, Any] = {}
        pictures: dict[str, np.ndarray] = {}

        def emit(event: object) -> None:
            if isinstance(event, ev.PassFinished):
                pictures[event.which.value] = event.image
            elif isinstance(event, ev.RunFinished):
                outcome["report"] = event.report.to_json()
            elif isinstance(event, ev.RunFailed):
                outcome["error"] = event.message

        self.engine.run(1, request, emit, threading.Event())
        if "error" in outcome:
            raise RuntimeError(str(outcome["error"]))
        report = outcome["report"]
        from app.engine.report import longest_skip_streak

        if condition == "vanilla":
            pattern = str(report["vanilla_pattern"])
            picture = pictures.get("vanilla")
            skipped = 0
        else:
            pattern = str(report["pattern"])
            picture = pictures.get("gated")
            skipped = int(report["skipped"])  # type: ignore[arg-type]
        if image is not None and picture is not None:
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
            "resumed_from_step": report.get("resumed_from_step"),
            "max_abs_diff": report.get("max_abs_diff") if condition == "gated" else 0.0,
        }

    def close(self) -> None:
        self.engine.close()


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
