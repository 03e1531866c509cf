"""Threshold sweeps with a scripted worker: rows, files, SSIM, honest speed labels, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.bench.sweep import NOT_MEASURED, SweepConfig, plan_sweep, run_sweep
from app.bench.worker import WorkerSpec
from app.cli.errors import UserError
from app.cli.sweep import parse_thresholds
from app.engine.request import GenerationRequest

STEPS = 12
BASE = np.random.default_rng(0).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)


def pattern_for(threshold: float) -> str:
    """More skips at higher thresholds, as a real gate would do."""
    skips = int(threshold * 20)
    middle = ["S" if i < skips else "C" for i in range(STEPS - 2)]
    return "F" + "".join(middle) + "F"


class FakeWorker:
    def __init__(self) -> None:
        self.calls: list[tuple[int, str, float]] = []

    def __call__(self, spec: WorkerSpec) -> dict[str, Any]:
        threshold = spec.request.threshold
        self.calls.append((spec.rep, spec.condition, threshold))
        vanilla = spec.condition == "vanilla"
        pattern = "C" * STEPS if vanilla else pattern_for(threshold)
        skipped = pattern.count("S")
        if spec.image_path:
            noise = np.zeros_like(BASE) if vanilla else np.full_like(BASE, int(threshold * 100))
            Image.fromarray(np.clip(BASE.astype(int) + noise, 0, 255).astype(np.uint8)).save(
                spec.image_path
            )
        computed = STEPS - skipped
        return {
            "condition": spec.condition,
            "rep": spec.rep,
            "pattern": pattern,
            "skipped": skipped,
            "computed": computed,
            "active_steps": STEPS,
            "longest_skip_streak": skipped,
            "loop_seconds": 0.1 * computed + 0.01,
            "image": spec.image_path,
            "runtime": {"mlx_device": "Device(cpu, 0)"},
        }


def config(**overrides: Any) -> SweepConfig:
    request = GenerationRequest(
        variant_id="demo",
        prompt="a red circle on a blue background",
        seed=7,
        steps=STEPS,
        threshold=0.0,
        width=32,
        height=32,
    )
    values: dict[str, Any] = dict(thresholds=(0.1, 0.2, 0.3), reps=2)
    values.update(overrides)
    return SweepConfig(request, **values)


def test_plan_vanilla_once_per_rep_then_thresholds() -> None:
    assert plan_sweep(config()) == [
        (0, "vanilla", 0.0),
        (0, "gated", 0.1),
        (0, "gated", 0.2),
        (0, "gated", 0.3),
        (1, "vanilla", 0.0),
        (1, "gated", 0.1),
        (1, "gated", 0.2),
        (1, "gated", 0.3),
    ]


def test_sweep_rows_and_files(tmp_path: Path) -> None:
    worker = FakeWorker()
    outcome = run_sweep(config(), tmp_path, runner=worker, progress=False)
    assert worker.calls == plan_sweep(config())
    report = outcome.report
    assert report is not None
    for name in ("sweep.json", "sweep.md", "sweep.png", "contact_sheet.png", "images/vanilla.png"):
        assert (tmp_path / name).is_file(), name
    with Image.open(tmp_path / "sweep.png") as plot:
        assert plot.width > 300 and plot.height > 200
    with Image.open(tmp_path / "contact_sheet.png") as sheet:
        assert sheet.width >= 4 * 200  # vanilla + three thresholds side by side
    saved = json.loads((tmp_path / "sweep.json").read_text())
    rows = saved["rows"]
    assert [r["threshold"] for r in rows] == [0.1, 0.2, 0.3]
    assert [r["skipped"] for r in rows] == [2, 4, 6]
    assert [r["pattern"] for r in rows] == [pattern_for(t) for t in (0.1, 0.2, 0.3)]
    ssims = [r["ssim"] for r in rows]
    assert all(0 < s < 1 for s in ssims)
    assert ssims == sorted(ssims, reverse=True)  # brighter shift, lower SSIM
    vanilla_loop = 0.1 * STEPS + 0.01
    for row in rows:
        computed = STEPS - row["skipped"]
        assert row["speedup"] == pytest.approx(vanilla_loop / (0.1 * computed + 0.01))
        assert row["ideal_speedup"] == pytest.approx(STEPS / computed)
        assert row["skipped_per_rep"] == [row["skipped"]] * 2
    assert "isolated" in saved["timing"] or "subprocess" in saved["timing"]


def test_identical_image_has_ssim_one(tmp_path: Path) -> None:
    outcome = run_sweep(
        config(thresholds=(0.0,), reps=1), tmp_path, runner=FakeWorker(), progress=False
    )
    assert outcome.report is not None
    assert outcome.report["rows"][0]["ssim"] == pytest.approx(1.0)
    assert outcome.report["rows"][0]["skipped"] == 0


def test_sweep_resumes(tmp_path: Path) -> None:
    first = FakeWorker()
    partial = run_sweep(config(), tmp_path, runner=first, progress=False, max_chunks=3)
    assert partial.report is None and partial.done == 3
    second = FakeWorker()
    done = run_sweep(config(), tmp_path, runner=second, progress=False)
    assert second.calls == plan_sweep(config())[3:]
    assert done.report is not None


def test_markdown_labels_speed_honestly(tmp_path: Path) -> None:
    from app.bench.sweep import build_sweep_report, sweep_markdown

    run_sweep(config(reps=1), tmp_path, runner=FakeWorker(), progress=False)
    text = (tmp_path / "sweep.md").read_text()
    assert "×" in text and "/12" in text
    # The in-process mode never shows a speed: its label says so.
    cfg = config(reps=1, timing="none")
    results = {
        "rep0-vanilla": {"pattern": "C" * STEPS, "loop_seconds": None},
        **{
            f"rep0-t{t:.4f}": {
                "pattern": pattern_for(t),
                "skipped": pattern_for(t).count("S"),
                "computed": STEPS - pattern_for(t).count("S"),
                "active_steps": STEPS,
                "longest_skip_streak": 1,
                "loop_seconds": None,
            }
            for t in (0.1, 0.2, 0.3)
        },
    }
    report = build_sweep_report(cfg, results, tmp_path / "images", {})
    assert report["timing"] == NOT_MEASURED
    assert all(row["speedup"] is None for row in report["rows"])
    assert "speed not measured" in sweep_markdown(report)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one"),
        ("0.1,abc", "numbers separated"),
        ("0.1,1.5", "between 0 and 1"),
        ("0.1,0.1", "twice"),
    ],
)
def test_bad_thresholds(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_thresholds(text)


def test_threshold_parsing_sorts() -> None:
    assert parse_thresholds("0.3, 0.05,0.1") == (0.05, 0.1, 0.3)
