"""The live-preview cost benchmark (lab/bench/previews.py): a tiny CPU dry run (structure, skip
counts next to the times, the preview made on every step of the previews-on runs only) and the
committed CPU figures re-derived from their own runs. No timing is asserted on the dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.bench import previews

# A lab benchmark's dry run (minutes on two cores): the lab_slow step runs it
pytestmark = pytest.mark.lab_slow

RESULTS = Path(__file__).parents[2] / "lab" / "bench" / "results"


def test_tiny_dry_run_times_previews_on_and_off_with_skip_counts(tmp_path: Path) -> None:
    out = tmp_path / "previews.json"
    argv = ["--variant", "flux2-klein-4b", "--random-weights", "tiny", "--dtype", "float32"]
    argv += ["--size", "64x64", "--steps", "6", "--reps", "1", "--warmup-steps", "2"]
    assert previews.main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    runs = report["runs"]
    assert sorted(r["previews"] for r in runs) == [False, True]
    for run in runs:
        assert run["pattern"] == "FSCSCF" and run["skipped"] == 2  # engagement
        assert len(run["step_seconds"]) == 6
        assert len(run["preview_seconds"]) == (6 if run["previews"] else 0)
    assert report["summary"]["preview_shapes"] == [[8, 8, 3]]  # 64² at an eighth
    assert report["summary"]["preview_fraction_of_computed_step"] > 0


def test_committed_cpu_figures_follow_from_their_runs() -> None:
    report = json.loads((RESULTS / "previews-demo-cpu.json").read_text())
    summary = json.loads(json.dumps(previews.summarise(report["runs"])))  # tuples as lists
    assert summary == report["summary"]
    assert report["spec"]["variant"] == "demo" and report["reps"] == len(report["runs"]) // 2
    assert all(r["skipped"] > 0 for r in report["runs"])  # engagement next to every time
    assert summary["preview_shapes"] == [[128, 128, 3]]  # the demo's exact, full-size decode
    # The README's figure: 1.8 ms, 1.0 % of a computed step on this machine.
    assert summary["median_preview_seconds"] == pytest.approx(0.00181, abs=5e-6)
    assert summary["preview_fraction_of_computed_step"] == pytest.approx(0.0100, abs=5e-5)
