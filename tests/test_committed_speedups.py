"""Every committed result that carries a speedup stays within what skipping can deliver (issue #32).

Skipping k of n active steps makes a run at most n / (n − k) times faster (the ideal: a skipped
step that costs nothing). This reads every JSON result committed under ``resources/benchmarks/``
and ``lab/**/results/`` that mentions a speedup (benches, window timing, the gate comparison,
target-search and compare records), finds each speedup figure with its ideal (stated beside it,
or from the skip pattern or the skip count beside it), and fails where a figure exceeds its ideal
by more than 5% without saying why: a ``speedup_spread`` beside it that covers the excess (the
run's own measured spread), or an ``above_ideal_reason`` in the record or around it.

A figure this test cannot pair with an ideal fails too, so a new result format cannot slip by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.05  # the bound for a committed figure without a stated reason
# The figures a reader takes for "how much faster than vanilla". Left out on purpose:
# ``speedup_unscaled`` (the plain ratio a re-timed report keeps beside its figure; the report's
# ``speedup_kind`` says why it is not the figure), ``gated_vs_gate_off`` and its ``/ ideal``
# (the bench's split of the gain between our path and the gating, not a speedup over vanilla),
# and a summary's ``min_speedup`` / ``max_speedup`` (the range of rows checked one by one).
SPEEDUP_KEYS = (
    "speedup",
    "gated_vs_vanilla",
    "wall_gated_vs_vanilla",
    "window_speedup",
    "cli_speedup",
    "bench_speedup",
    "median_speedup",
    "window_speedup_median",
    "cli_speedup_median",
)
IDEAL_KEYS = (
    "speedup_ideal",
    "ideal_speedup",
    "mean_ideal_speedup",
    "bench_ideal_speedup",
    "ideal",
)
REASON_KEY = "above_ideal_reason"


@dataclass(frozen=True)
class Figure:
    where: str
    speedup: float
    ideal: float | None
    spread: float
    reason: str | None

    @property
    def excess(self) -> float:
        return self.speedup / self.ideal - 1 if self.ideal else 0.0


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ideal(node: Mapping[str, Any]) -> float | None:
    for key in IDEAL_KEYS:
        if (value := _number(node.get(key))) is not None:
            return value
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern and set(pattern) <= set("CFSN"):
        computed = sum(letter != "S" for letter in pattern)
        return len(pattern) / computed if computed else None
    steps, skipped = _number(node.get("steps")), _number(node.get("skipped"))
    if steps and skipped is not None and steps > skipped:
        return steps / (steps - skipped)
    return None


def figures(node: object, where: str = "", reason: str | None = None) -> Iterator[Figure]:
    """Every speedup figure under ``node`` with its ideal, spread and the reason in scope."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from figures(item, f"{where}[{i}]", reason)
        return
    if not isinstance(node, dict):
        return
    stated = node.get(REASON_KEY)
    reason = stated if isinstance(stated, str) and stated.strip() else reason
    ideal = _ideal(node)
    for key in SPEEDUP_KEYS:
        if (value := _number(node.get(key))) is not None:
            spread = _number(node.get("speedup_spread")) or 0.0
            yield Figure(f"{where}.{key}", value, ideal, spread, reason)
    for key, child in node.items():
        yield from figures(child, f"{where}.{key}" if where else key, reason)


def committed_results() -> list[Path]:
    found = {*ROOT.glob("resources/benchmarks/**/*.json"), *ROOT.glob("lab/**/results/**/*.json")}
    return sorted(p for p in found if "speedup" in p.read_text(encoding="utf-8"))


RESULTS = committed_results()


def test_the_committed_results_with_a_speedup_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in RESULTS}
    # one of each kind the issue names: bench, window timing, gate comparison, target records
    assert "resources/benchmarks/demo-cpu-2core.json" in names
    assert "lab/bench/results/window-timing-linux-2core.json" in names
    assert "lab/gates/results/compare-demo.json" in names
    assert "lab/target/results/target-search-demo-teacache.json" in names


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_committed_speedup_exceeds_its_ideal_without_saying_why(path: Path) -> None:
    found = list(figures(json.loads(path.read_text(encoding="utf-8"))))
    assert found, f"{path.name} mentions a speedup but holds no speedup figure this test reads"
    unpaired = [f.where for f in found if f.ideal is None]
    assert not unpaired, (
        f"speedups with no ideal, skip pattern or skip count beside them: {unpaired}"
    )
    over = [
        f"{f.where} = {f.speedup:.3f}× against an ideal of {f.ideal:.3f}× (+{f.excess:.1%})"
        for f in found
        if f.excess > max(TOLERANCE, f.spread) and f.reason is None
    ]
    assert not over, "above the ideal without a reason:\n" + "\n".join(over)


def test_the_reader_catches_a_figure_above_its_ideal_and_accepts_a_reason() -> None:
    """The oracle checked on known records: it flags what it must and nothing else."""
    fast = {"speedup": 2.12, "pattern": "F" + "SC" * 13 + "F"}  # 13 of 28 skipped: ideal 1.87
    [figure] = figures(fast)
    assert figure.ideal == pytest.approx(28 / 15) and figure.excess > TOLERANCE
    [excused] = figures({"above_ideal_reason": "measured under load", "rows": [fast]})
    assert excused.reason == "measured under load"
    [within] = figures({**fast, "speedup_spread": 0.2})
    assert within.excess < within.spread
    bench = {"speedup": {"gated_vs_vanilla": 1.6, "ideal": 1.5}}
    assert [(f.speedup, f.ideal) for f in figures(bench)] == [(1.6, 1.5)]
    counted = {"bench_speedup": 1.7, "window_speedup_median": 1.5, "steps": 28, "skipped": 10}
    assert [f.ideal for f in figures(counted)] == pytest.approx([28 / 18, 28 / 18])
