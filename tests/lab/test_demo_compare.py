"""Uncertainty of the demo evaluation figures (lab/demo/compare.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lab.demo.compare import Z95, compare, paired_difference, wilson_interval
from lab.paths import DEMO_RESULTS


@pytest.mark.parametrize(("right", "total"), [(68, 100), (1, 30), (99, 100), (50, 100)])
def test_wilson_bounds_are_where_the_score_test_reaches_z(right: int, total: int) -> None:
    # The Wilson interval is the set of p0 that a score test at 95% does not reject; at each bound
    # the statistic |p̂ − p0| / sqrt(p0 (1 − p0) / n) equals z exactly.
    low, high = wilson_interval(right, total)
    share = right / total
    assert 0.0 <= low < share < high <= 1.0
    for bound in (low, high):
        statistic = abs(share - bound) / math.sqrt(bound * (1 - bound) / total)
        assert statistic == pytest.approx(Z95, rel=1e-9)


def test_paired_difference_counts_the_prompts_that_changed() -> None:
    a = [True] * 60 + [False] * 40
    assert paired_difference(a, a) == {
        "difference": 0.0,
        "low": 0.0,
        "high": 0.0,
        "only_a": 0,
        "only_b": 0,
    }
    b = [True] * 60 + [True] * 10 + [False] * 30  # ten more prompts right, none lost
    result = paired_difference(a, b)
    assert result["difference"] == pytest.approx(0.10)
    assert (result["only_a"], result["only_b"]) == (0, 10)
    assert 0.0 < result["low"] < 0.10 < result["high"] <= 0.20


def test_turbo_against_demo_on_the_committed_evaluations() -> None:
    result = compare(DEMO_RESULTS / "eval-demo.json", DEMO_RESULTS / "eval-demo-turbo.json")
    shape = result["b_minus_a"]["shape"]
    committed = [
        json.loads((DEMO_RESULTS / name).read_text(encoding="utf-8"))["scores"]["shape"]
        for name in ("eval-demo.json", "eval-demo-turbo.json")
    ]
    assert shape["difference"] == pytest.approx(committed[1] - committed[0])
    assert shape["low"] <= shape["difference"] <= shape["high"]
    assert shape["only_b"] - shape["only_a"] == round(100 * shape["difference"])


def test_different_prompt_lists_are_one_clear_line(tmp_path: Path) -> None:
    report = json.loads((DEMO_RESULTS / "eval-demo.json").read_text(encoding="utf-8"))
    report["per_prompt"] = report["per_prompt"][::-1]
    other = tmp_path / "reversed.json"
    other.write_text(json.dumps(report), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "lab.demo.compare", str(DEMO_RESULTS / "eval-demo.json"), other],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "do not score the same prompts" in run.stderr
    assert "Traceback" not in run.stderr
