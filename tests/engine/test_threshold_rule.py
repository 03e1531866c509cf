"""The shipped defaults' threshold rule (``app.engine.threshold_rule``): it is the rule that chose
the demo's committed TeaCache default, and a calibration's walk over the grid reaches the answer
the rule gives on every threshold of the grid while measuring fewer of them; a prompt that skips
nothing costs no pass, and an exact kind's repeated pattern is measured once."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pytest

from app.engine.threshold_rule import (
    GRID,
    MIN_SSIM,
    SKIP_SHARE_BAND,
    RuleRow,
    ThresholdWalk,
    choose,
    rule_choice,
)
from app.gate.kinds import MAGCACHE_KIND, TEACACHE_KIND
from app.gate.kinds.teacache import TeaCacheCalibration
from app.gate.provenance import Provenance
from app.variants import get_variant
from lab.paths import DEMO_RESULTS

Measure = Callable[[float, int, int], tuple[int, float]]  # (threshold, prompt, skips) → result


def _row(threshold: float, skipped: float, min_ssim: float, steps: int = 28) -> RuleRow:
    return RuleRow(threshold, skipped, skipped / steps, min_ssim, min_ssim)


def test_it_is_the_rule_that_chose_the_demos_shipped_default() -> None:
    sweep = json.loads((DEMO_RESULTS / "demo.threshold-sweep.json").read_text(encoding="utf-8"))
    rows = [
        RuleRow(r["threshold"], r["mean_skipped"], r["skip_share"], r["mean_ssim"], r["min_ssim"])
        for r in sweep["rows"]
    ]
    assert tuple(r.threshold for r in rows) == GRID
    chosen = choose(rows)
    assert chosen is not None and chosen.mean_skipped > 0  # engagement
    assert chosen.threshold == sweep["chosen"] == get_variant("demo").default_threshold
    assert chosen.min_ssim >= MIN_SSIM and chosen.in_band


def test_the_rule_prefers_the_band_then_the_floor_then_nothing() -> None:
    # In the band: the most skips that keep the floor (an equal share: the smaller threshold).
    rows = [_row(0.04, 4, 0.99), _row(0.06, 8, 0.97), _row(0.08, 8, 0.96), _row(0.1, 11, 0.89)]
    assert choose(rows) == rows[1]
    # None in the band keeps the floor: the largest threshold that does.
    rows = [_row(0.04, 4, 0.95), _row(0.06, 8, 0.85), _row(0.1, 13, 0.8)]
    assert choose(rows) == rows[0]
    # Skipping nothing is no answer, nor is a floor broken everywhere.
    assert choose([_row(0.01, 0, 1.0), _row(0.1, 9, 0.7)]) is None


def _teacache_walk(traces: Sequence[Sequence[float | None]]) -> ThresholdWalk:
    """TeaCache with the identity polynomial: the predicted change is the signal's change."""
    calibration = TeaCacheCalibration(
        (0.0, 0.0, 0.0, 1.0, 0.0), None, None, Provenance(source="test")
    )
    steps = len(traces[0])
    return ThresholdWalk("teacache", TEACACHE_KIND, calibration, traces, steps)


def _trace(level: float, steps: int = 28) -> list[float | None]:
    """A run whose steps change by ``level``, more at the start and at the end."""
    return [None] + [level * (1.0 + 3.0 * abs(i / steps - 0.5) ** 2) for i in range(1, steps)]


def _walk(walk: ThresholdWalk, measure: Measure) -> tuple[list[float], int]:
    """Run the walk as the calibration does, ``measure`` standing for a pass: the thresholds it
    measured and the passes it ran."""
    tried, passes = [], 0
    while (threshold := walk.next_threshold()) is not None:
        tried.append(threshold)
        for prompt in range(len(walk.traces)):
            for t in walk.plan([threshold], prompt):
                simulated = walk.kind.skipped(
                    walk.kind.params(walk.calibration, t), walk.traces[prompt]
                )
                walk.record(t, prompt, *measure(t, prompt, simulated))
                passes += 1
    return tried, passes


def _full_grid(walk: ThresholdWalk, measure: Measure) -> RuleRow | None:
    """The rule on every threshold of the grid, each measured on every prompt."""
    rows = []
    for t in GRID:
        results = []
        for prompt, trace in enumerate(walk.traces):
            simulated = walk.kind.skipped(walk.kind.params(walk.calibration, t), trace)
            results.append(measure(t, prompt, simulated) if simulated else (0, 1.0))
        skipped = sum(r[0] for r in results) / len(results)
        ssims = [r[1] for r in results]
        rows.append(RuleRow(t, skipped, skipped / walk.steps, sum(ssims) / len(ssims), min(ssims)))
    return choose(rows)


@pytest.mark.parametrize(
    ("cost", "expected"),
    [
        (0.004, "in the band"),  # mild: the band's most skips keep the floor
        (0.012, "below the band"),  # harsh: no threshold in the band keeps it
        (0.2, "none"),  # one skip already breaks the floor
    ],
)
def test_the_walk_reaches_the_rules_answer_on_the_whole_grid(cost: float, expected: str) -> None:
    traces = [_trace(level) for level in (0.05, 0.07, 0.09)]

    def measure(threshold: float, prompt: int, skipped: int) -> tuple[int, float]:
        return skipped, 1.0 - cost * skipped * (1.0 + 0.2 * prompt)

    walk = _teacache_walk(traces)
    tried, passes = _walk(walk, measure)
    answer = _full_grid(_teacache_walk(traces), measure)
    chosen = choose(walk.rows())
    assert chosen == answer
    assert len(tried) < len(walk.engaging) and 0 < passes <= len(tried) * len(traces)
    choice = rule_choice(walk, len(traces))
    if expected == "none":
        assert chosen is None and choice.threshold is None
        assert choice.reason.startswith("none: no threshold tried keeps every one of your 3")
        return
    assert chosen is not None and chosen.mean_skipped > 0 and chosen.min_ssim >= MIN_SSIM
    assert chosen.in_band is (expected == "in the band")
    assert choice.threshold == chosen.threshold and choice.source == "rule"
    assert choice.reason.startswith(f"{chosen.threshold:g}, chosen on your 3 prompts by the rule")
    low, high = SKIP_SHARE_BAND
    assert (f"the most steps skipped within {low:.0%}–{high:.0%}" in choice.reason) is (
        expected == "in the band"
    )


def test_a_prompt_that_skips_nothing_costs_no_pass() -> None:
    """One prompt changes too much to skip anywhere: its trials are its vanilla run (SSIM 1,
    none skipped), measured by no pass, and they count in the rule's means."""
    traces = [_trace(0.05), [None] + [2.0] * 27]
    walk = _teacache_walk(traces)
    tried, passes = _walk(walk, lambda t, p, skipped: (skipped, 1.0 - 0.002 * skipped))
    assert passes == len(tried)  # the first prompt's only
    quiet = [walk.results[(t, 1)] for t in tried]
    assert all(not q.ran and q.skipped == 0 and q.ssim == 1.0 for q in quiet)
    row = next(r for r in walk.rows() if r.threshold == tried[0])
    assert row.mean_skipped == walk.results[(tried[0], 0)].skipped / 2


def test_an_exact_kinds_repeated_pattern_is_measured_once() -> None:
    """MagCache's pattern is its table's: thresholds with the same pattern on a prompt share one
    pass (the demo's table has such runs of thresholds)."""
    calibration = get_variant("demo").magcache
    assert calibration is not None
    traces = [[None] * 28 for _ in range(2)]
    walk = ThresholdWalk("magcache", MAGCACHE_KIND, calibration, traces, 28)
    patterns: dict[float, str] = {}

    def measure(threshold: float, prompt: int, skipped: int) -> tuple[int, float]:
        params = MAGCACHE_KIND.params(calibration, threshold)
        pattern = "".join(v.decision.letter for v in MAGCACHE_KIND.simulate(params, traces[0]))
        assert pattern not in {p for t, p in patterns.items() if t != threshold}
        patterns[threshold] = pattern
        return skipped, 1.0 - 0.004 * skipped

    tried, passes = _walk(walk, measure)
    shared = [t for t in tried if not walk.results[(t, 0)].ran]
    assert shared and passes == (len(tried) - len(shared)) * 2
    assert choose(walk.rows()) == _full_grid(walk, lambda t, p, s: (s, 1.0 - 0.004 * s))
