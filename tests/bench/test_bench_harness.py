"""The benchmark orchestrator with a scripted worker: order, statistics, resume, report shape.

No subprocess and no model here (those are in test_bench_worker.py): a fake runner returns
worker-shaped results with chosen times, so the arithmetic can be checked exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.bench.chunks import ChunkStore, PlanMismatchError, finite
from app.bench.harness import BenchConfig, build_report, plan_chunks, run_bench
from app.bench.stats import ideal_speedup, speedups, spread, summarize_condition
from app.bench.table import bench_markdown
from app.bench.worker import WorkerSpec
from app.engine.request import GenerationRequest

STEPS = 10
GATED_PATTERN = "FSCSCSCSCF"  # 4 skipped of 10 active → ideal 10/6

# Loop seconds per (condition, rep), chosen so medians, minima and maxima are easy to check.
TIMES = {
    ("vanilla", 0): 3.0,
    ("vanilla", 1): 1.0,
    ("vanilla", 2): 2.0,
    ("gate_off", 0): 2.2,
    ("gate_off", 1): 2.0,
    ("gate_off", 2): 2.1,
    ("gated", 0): 1.5,
    ("gated", 1): 1.2,
    ("gated", 2): 1.3,
}


def fake_result(spec: WorkerSpec) -> dict[str, Any]:
    pattern = "C" * STEPS if spec.condition != "gated" else GATED_PATTERN
    skipped = pattern.count("S")
    loop = TIMES[(spec.condition, spec.rep)]
    return {
        "schema": 1,
        "variant": spec.request.variant_id,
        "condition": spec.condition,
        "rep": spec.rep,
        "threshold": spec.request.threshold if spec.condition == "gated" else 0.0,
        "load_seconds": 0.5,
        "load_peak_memory_bytes": 1000,
        "warmup_generations": spec.warmup,
        "first_generation": {
            "loop_seconds": loop * 2,
            "wall_seconds": loop * 2 + 0.1,
            "pattern": pattern,
            "skipped": skipped,
        },
        "loop_seconds": loop,
        "wall_seconds": loop + 0.1,
        "peak_memory_bytes": 2**20 * (2 + spec.rep),
        "active_steps": STEPS,
        "loop_steps": STEPS,
        "pattern": pattern,
        "skipped": skipped,
        "computed": STEPS - skipped,
        "step_seconds": None,
        "longest_skip_streak": 1 if skipped else 0,
        "image": None,
        "runtime": {"mlx": "0", "mlx_device": "Device(cpu, 0)", "blas": "OpenBLAS preloaded (x)"},
    }


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

    def __call__(self, spec: WorkerSpec) -> dict[str, Any]:
        self.calls.append((spec.rep, spec.condition))
        return fake_result(spec)


HOST = {
    "cpu": "Test CPU",
    "cores": 2,
    "ram_gb": 4.0,
    "os": "TestOS",
    "gpus": [],
    "git": {"commit": "abc", "dirty": False},
}


def config(threshold: float = 0.2) -> BenchConfig:
    request = GenerationRequest(
        variant_id="demo",
        prompt="a red circle on a blue background",
        seed=1,
        steps=STEPS,
        threshold=threshold,
        width=128,
        height=128,
    )
    return BenchConfig(request, reps=3)


def test_plan_is_rep_outer_alternating_direction() -> None:
    assert plan_chunks(3) == [
        (0, "vanilla"),
        (0, "gate_off"),
        (0, "gated"),
        (1, "gated"),
        (1, "gate_off"),
        (1, "vanilla"),
        (2, "vanilla"),
        (2, "gate_off"),
        (2, "gated"),
    ]
    # Two repetitions: vanilla runs once before and once after gate_off.
    order = [condition for _, condition in plan_chunks(2)]
    assert order.index("vanilla") < order.index("gate_off")
    assert order[::-1].index("vanilla") < order[::-1].index("gate_off")


def test_runs_in_rep_outer_order_and_writes_report(tmp_path: Path) -> None:
    recorder = Recorder()
    out = tmp_path / "bench.json"
    outcome = run_bench(config(), out, runner=recorder, progress=False, host=HOST)
    assert recorder.calls == plan_chunks(3)
    assert outcome.report is not None
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(finite(outcome.report)))
    assert [(r["rep"], r["condition"]) for r in saved["runs"]] == plan_chunks(3)
    assert out.with_suffix(".md").exists()


def test_median_min_max_per_condition(tmp_path: Path) -> None:
    outcome = run_bench(config(), tmp_path / "b.json", runner=Recorder(), progress=False, host=HOST)
    assert outcome.report is not None
    conditions = outcome.report["conditions"]
    assert conditions["vanilla"]["loop_seconds"] == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert conditions["gate_off"]["loop_seconds"]["median"] == pytest.approx(2.1)
    assert conditions["gated"]["loop_seconds"] == {"median": 1.3, "min": 1.2, "max": 1.5, "n": 3}
    assert conditions["gated"]["first_generation_loop_seconds"]["median"] == pytest.approx(2.6)
    assert conditions["gated"]["peak_memory_bytes"] == 4 * 2**20  # the largest of the reps
    # Engagement beside every time: skip counts and patterns per repetition.
    assert conditions["gated"]["skipped"] == [4, 4, 4]
    assert conditions["gated"]["patterns"] == [GATED_PATTERN] * 3
    assert conditions["vanilla"]["skipped"] == [0, 0, 0]


def test_speedup_against_ideal(tmp_path: Path) -> None:
    outcome = run_bench(config(), tmp_path / "b.json", runner=Recorder(), progress=False, host=HOST)
    assert outcome.report is not None
    s = outcome.report["speedup"]
    assert s["gated_vs_vanilla"] == pytest.approx(2.0 / 1.3)
    assert s["gated_vs_gate_off"] == pytest.approx(2.1 / 1.3)
    assert s["gate_off_vs_vanilla"] == pytest.approx(2.0 / 2.1)
    assert s["ideal"] == pytest.approx(10 / 6)
    assert s["measured_over_ideal"] == pytest.approx((2.0 / 1.3) / (10 / 6))


def test_spread_and_ideal_edge_cases() -> None:
    assert spread([]) is None
    assert spread([4.0, 1.0]) == {"median": 2.5, "min": 1.0, "max": 4.0, "n": 2}
    assert ideal_speedup(28, [28]) == 1.0
    assert ideal_speedup(28, [0]) is None
    assert ideal_speedup(None, [3]) is None
    assert speedups({})["gated_vs_vanilla"] is None


def test_unstable_patterns_are_reported_not_hidden() -> None:
    runs = [
        fake_result(WorkerSpec(GenerationRequest("demo", "p", 1, STEPS, 0.2, 8, 8), "gated", rep=r))
        for r in range(2)
    ]
    runs[1] = {**runs[1], "pattern": "FSCCCSCSCF", "skipped": 3, "computed": 7}
    summary = summarize_condition(runs)
    assert not summary["pattern_stable"]
    assert summary["skipped"] == [4, 3]


def test_interrupted_run_resumes_without_redoing_finished_chunks(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    first = Recorder()
    partial = run_bench(config(), out, runner=first, progress=False, max_chunks=4, host=HOST)
    assert partial.report is None and partial.done == 4 and partial.total == 9
    assert not out.exists()
    assert first.calls == plan_chunks(3)[:4]

    second = Recorder()
    finished = run_bench(config(), out, runner=second, progress=False, host=HOST)
    assert second.calls == plan_chunks(3)[4:]  # only what was missing, in plan order
    assert finished.report is not None and out.exists()
    assert len(finished.report["runs"]) == 9


def test_ctrl_c_keeps_finished_chunks(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    calls = 0

    def interrupting(spec: WorkerSpec) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return fake_result(spec)

    with pytest.raises(KeyboardInterrupt):
        run_bench(config(), out, runner=interrupting, progress=False, host=HOST)
    recorder = Recorder()
    run_bench(config(), out, runner=recorder, progress=False, host=HOST)
    assert recorder.calls == plan_chunks(3)[2:]


def test_changed_settings_are_refused_then_fresh_starts_over(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run_bench(config(), out, runner=Recorder(), progress=False, max_chunks=2, host=HOST)
    with pytest.raises(PlanMismatchError):
        run_bench(config(threshold=0.3), out, runner=Recorder(), progress=False, host=HOST)
    recorder = Recorder()
    run_bench(config(threshold=0.3), out, runner=recorder, progress=False, fresh=True, host=HOST)
    assert recorder.calls == plan_chunks(3)


def test_torn_chunk_is_redone(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path / "c", {"a": 1})
    store.path("x").write_text("{not json", encoding="utf-8")
    assert not store.done("x")
    store.save("x", {"value": float("nan")})
    assert store.load("x") == {"value": None}  # strict JSON: NaN becomes null


def test_markdown_puts_skips_next_to_every_time(tmp_path: Path) -> None:
    runs = [fake_result(config().spec(c, r)) for r, c in plan_chunks(3)]
    report = build_report(config(), runs, HOST)
    text = bench_markdown(report)
    for line in text.splitlines():
        if line.startswith("| ") and " s " in line and "Condition" not in line:
            assert "/10" in line, line  # every row with a time has its skip count
    assert GATED_PATTERN in text
    assert "Test CPU" in text and "abc" in text
    assert "rep-outer" in text and "warm-up" in text
