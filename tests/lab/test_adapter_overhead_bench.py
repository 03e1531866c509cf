"""The GPU overhead benchmark (lab/bench/adapter_overhead.py), dry-run on tiny CPU shells:
structure, skip counts next to the times, and the ratios it reports. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.bench import adapter_overhead

# A lab benchmark's dry run (minutes on two cores): the lab_slow step runs it
pytestmark = pytest.mark.lab_slow


def test_tiny_dry_run_reports_every_condition_with_skip_counts(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    argv = ["--out", str(out), "--tiny", "--cases", "flux2:full:64"]
    assert adapter_overhead.main([*argv, "--steps", "6", "--reps", "1", "--text-tokens", "8"]) == 0
    report = json.loads(out.read_text())
    (case,) = report["cases"]
    conditions = case["conditions"]
    assert set(conditions) == {
        "vanilla",
        "vanilla_eager",
        "gate_threshold_0",
        "gate_observe",
        "gate_computing",
        "forced_skips",
    }
    assert conditions["forced_skips"]["pattern"] == "FSCSCF"
    assert conditions["forced_skips"]["skipped_per_run"] == [2]
    assert conditions["forced_skips"]["median_skipped_step_s"] > 0
    for name in ("vanilla", "gate_threshold_0", "gate_observe"):
        assert (
            conditions[name]["skipped_per_run"] == [0] and conditions[name]["pattern"] == "CCCCCC"
        )
    assert conditions["gate_computing"]["pattern"] == "FCCCCF"
    assert all(c["all_finite"] for c in conditions.values())
    ratios = case["ratios"]
    assert ratios["baseline"] == "vanilla_eager"
    assert ratios["skipped_step_cost_vs_baseline_step"] > 0
    assert "gate_computing_overhead_per_computed_step" in ratios
    assert report["hardware"]["mlx"] and report["method"]


def test_flux1_full_depth_extrapolation() -> None:
    """Vanilla steps extrapolate linearly in depth; the gate's own cost and a skipped step's do
    not grow with depth and are taken as measured (the larger of the two)."""

    def case(joint: int, computed: float, added: float, skipped: float) -> dict:
        conditions = {
            "vanilla": {"median_computed_step_s": computed},
            "gate_observe": {"median_computed_step_s": computed + added / 2},
            "gate_computing": {"median_computed_step_s": computed + added},
            "forced_skips": {"median_computed_step_s": computed, "median_skipped_step_s": skipped},
        }
        return {
            "family": "flux1",
            "blocks": [joint, 2 * joint],
            "size": 512,
            "conditions": conditions,
        }

    # 0.1 s fixed + 0.05 s per joint block (with its two single blocks).
    cases = [case(2, 0.2, 0.002, 0.010), case(4, 0.3, 0.001, 0.012)]
    (row,) = adapter_overhead.flux1_full_depth(cases)
    full = 0.1 + 0.05 * 19
    assert abs(row["vanilla_computed_step_s_at_19_plus_38"] - full) < 1e-12
    assert abs(row["gate_computing_overhead_per_computed_step"] - 0.002 / full) < 1e-12
    assert abs(row["skipped_step_cost_vs_computed_step"] - 0.012 / full) < 1e-12


def test_rederive_reproduces_a_saved_report(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    argv = ["--out", str(out), "--tiny", "--cases", "flux2:full:64"]
    adapter_overhead.main([*argv, "--steps", "4", "--reps", "1", "--text-tokens", "8"])
    again = tmp_path / "again.json"
    assert adapter_overhead.main(["--rederive", str(out), "--out", str(again)]) == 0
    assert json.loads(again.read_text())["cases"] == json.loads(out.read_text())["cases"]
