"""The benchmark orchestrator: one fresh subprocess per (condition, repetition), rep-outer.

Order: vanilla, gate_off, gated for repetition 0, then gated, gate_off, vanilla for repetition 1,
and so on (rep-outer, alternating direction), so a slow drift of the host (thermals, background
load) hits every condition alike, and no condition always runs right after another: on the
H200 a fixed order put gate_off after vanilla in every repetition, and the per-step times of one
generation already spread ±7% (FLUX.1 dev, 1024²), so the order could bias that comparison.
Each finished chunk is persisted at once next to the
output (``<out>.chunks/``): Ctrl-C keeps it and a rerun with the same settings resumes.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.bench.chunks import ChunkStore, write_json_atomic
from app.bench.stats import speedups, spread, step_costs, summarize_condition
from app.bench.table import bench_markdown
from app.bench.worker import (
    CONDITIONS,
    WorkerSpec,
    condition_gate,
    parse_result,
    request_recipe,
)
from app.engine.request import GenerationRequest
from app.hardware import host_info

REPORT_SCHEMA = 1
WARMUP_POLICY = (
    "each worker process loads the pipeline, runs {warmup} discarded warm-up generation(s) "
    "of {warmup_steps} steps (MLX start-up, mx.compile traces and kernel JIT, allocator "
    "growth), then times one generation; the warm-up's own loop time is reported as "
    "first_generation, and its excess over a warm generation of the same pattern (estimated "
    "from the timed run's step times) as first_generation.compile_seconds"
)
ISOLATION = (
    "every (condition, repetition) in a fresh Python subprocess; repetitions interleaved "
    "rep-outer, alternating direction (vanilla, gate_off, gated, then gated, gate_off, vanilla)"
)

Runner = Callable[[WorkerSpec], dict[str, Any]]


def self_command() -> list[str]:
    """How to start this program again: the frozen app is its own executable."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "app"]


class WorkerFailed(RuntimeError):
    """A chunk ended without a result (a worker subprocess, or a pass of the in-process sweep);
    the message is its last error line."""


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """One benchmark: the request ``generate`` would run (its threshold and gate: the ``gated``
    condition's) and how the bench repeats and times it."""

    request: GenerationRequest
    reps: int = 3
    warmup: int = 1
    warmup_steps: int | None = None  # None: warm-up generations run the request's steps
    coefficients: tuple[float, ...] | None = None
    max_consecutive_skips: int | None = None
    forced_skips: int | None = None
    random_weights: str | None = None
    dtype: str | None = None
    conditions: tuple[str, ...] = CONDITIONS
    label: str | None = None  # how to read the numbers, e.g. "timing only: forced skip pattern"
    extra: dict[str, Any] = field(default_factory=dict)

    def spec(self, condition: str, rep: int, image_path: str | None = None) -> WorkerSpec:
        return WorkerSpec(
            self.request,
            condition,
            coefficients=self.coefficients,
            max_consecutive_skips=self.max_consecutive_skips,
            forced_skips=self.forced_skips,
            random_weights=self.random_weights,
            dtype=self.dtype,
            warmup=self.warmup,
            warmup_steps=self.warmup_steps,
            rep=rep,
            image_path=image_path,
        )

    def settings(self) -> dict[str, Any]:
        """The recipe as the report (and the chunk folder's plan) records it."""
        return {
            **request_recipe(self.request),
            "reps": self.reps,
            "warmup": self.warmup,
            "warmup_steps": self.warmup_steps,
            "coefficients": None if self.coefficients is None else list(self.coefficients),
            "max_consecutive_skips": self.max_consecutive_skips,
            "forced_skips": self.forced_skips,
            "random_weights": self.random_weights,
            "dtype": self.dtype,
            "conditions": list(self.conditions),
            "label": self.label,
            "extra": dict(self.extra),
        }


def plan_chunks(reps: int, conditions: Sequence[str] = CONDITIONS) -> list[tuple[int, str]]:
    """Rep-outer order, alternating direction: every condition of repetition 0 in order, then
    every condition of repetition 1 in reverse, ... (counterbalanced: see the module docstring)."""
    return [
        (rep, condition)
        for rep in range(reps)
        for condition in (conditions if rep % 2 == 0 else tuple(reversed(conditions)))
    ]


def chunk_key(rep: int, condition: str) -> str:
    return f"rep{rep}-{condition}"


def chunks_dir(out: Path) -> Path:
    return out.with_name(out.stem + ".chunks")


def subprocess_runner(log_dir: Path | None = None, timeout: float | None = None) -> Runner:
    """Run each spec in a fresh ``python -m app bench --worker`` process."""

    def run(spec: WorkerSpec) -> dict[str, Any]:
        command = [*self_command(), "bench", "--worker", spec.to_json()]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise WorkerFailed(
                f"{spec.condition} rep {spec.rep}: no result within {timeout:.0f} s"
            ) from None
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            name = f"{chunk_key(spec.rep, spec.condition)}.log"
            (log_dir / name).write_text(done.stderr, encoding="utf-8")
        result = parse_result(done.stdout)
        if done.returncode != 0 or result is None:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            why = lines[-1] if lines else f"exit code {done.returncode}, no output"
            raise WorkerFailed(f"{spec.condition} rep {spec.rep} failed: {why}")
        return result

    return run


@dataclass(slots=True)
class ChunkedOutcome:
    """Where a resumable bench or sweep stands: the report once every chunk has finished."""

    report: dict[str, Any] | None  # None until every chunk has finished
    done: int
    total: int
    chunks: Path


def run_bench(
    config: BenchConfig,
    out: Path,
    *,
    runner: Runner | None = None,
    progress: bool = True,
    max_chunks: int | None = None,
    fresh: bool = False,
    host: dict[str, Any] | None = None,
) -> ChunkedOutcome:
    """Run (or resume) every chunk, then write ``out`` (JSON) and ``out`` with ``.md``.

    ``max_chunks`` stops after that many *new* chunks (a deliberate, resumable interruption).
    """
    from tqdm import tqdm

    directory = chunks_dir(out)
    store = ChunkStore(directory, config.settings(), fresh=fresh)
    runner = runner or subprocess_runner(log_dir=directory / "logs")
    plan = plan_chunks(config.reps, config.conditions)
    done = sum(store.done(chunk_key(rep, cond)) for rep, cond in plan)
    ran = 0
    bar = tqdm(
        total=len(plan),
        initial=done,
        desc=f"bench {config.request.variant_id}",
        unit="run",
        file=sys.stderr,
        disable=not progress,
    )
    try:
        for rep, condition in plan:
            key = chunk_key(rep, condition)
            if store.done(key):
                continue
            if max_chunks is not None and ran >= max_chunks:
                break
            bar.set_postfix_str(f"{condition} rep {rep}")
            result = runner(config.spec(condition, rep))
            result["order_index"] = plan.index((rep, condition))
            store.save(key, result)
            ran += 1
            done += 1
            bar.update(1)
            bar.set_postfix_str(
                f"{condition} rep {rep}: {result['loop_seconds']:.3f} s, "
                f"{result['skipped']}/{result['active_steps']} skipped"
            )
    finally:
        bar.close()
    if done < len(plan):
        return ChunkedOutcome(None, done, len(plan), directory)
    runs = [store.load(chunk_key(rep, cond)) or {} for rep, cond in plan]
    report = build_report(config, runs, host if host is not None else host_info())
    write_json_atomic(out, report)
    out.with_suffix(".md").write_text(bench_markdown(report), encoding="utf-8")
    return ChunkedOutcome(report, done, len(plan), directory)


def build_report(
    config: BenchConfig, runs: Sequence[dict[str, Any]], host: dict[str, Any]
) -> dict[str, Any]:
    conditions = {
        cond: summarize_condition([r for r in runs if r["condition"] == cond])
        for cond in config.conditions
    }
    runtime = next((r.get("runtime") for r in runs if r.get("runtime")), {})
    return {
        "kind": "bench",
        "schema": REPORT_SCHEMA,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "label": config.label,
        "recipe": config.settings(),
        "isolation": ISOLATION,
        "warmup_policy": WARMUP_POLICY.format(
            warmup=config.warmup,
            warmup_steps=(
                config.request.steps if config.warmup_steps is None else config.warmup_steps
            ),
        ),
        "hardware": {**host, "runtime": runtime},
        "conditions": conditions,
        "speedup": speedups(conditions),
        "first_generation": {
            cond: {
                "steps": next(
                    (r["first_generation"].get("steps") for r in runs if r["condition"] == cond),
                    None,
                ),
                "loop_seconds": spread(
                    [r["first_generation"]["loop_seconds"] for r in runs if r["condition"] == cond]
                ),
                "compile_seconds": spread(
                    [
                        r["first_generation"]["compile_seconds"]
                        for r in runs
                        if r["condition"] == cond
                        and r["first_generation"].get("compile_seconds") is not None
                    ]
                ),
            }
            for cond in config.conditions
        },
        "step_costs": step_costs(runs),
        # Every further gated condition (``gated-<gate>``): its speed-ups and step costs.
        "also": {
            cond: {
                "speedup": speedups({**conditions, "gated": conditions[cond]}),
                "step_costs": step_costs(runs, cond),
            }
            for cond in config.conditions
            if condition_gate(cond) is not None
        },
        "runs": [{k: v for k, v in r.items() if k != "runtime"} for r in runs],
    }
