"""The committed gate comparison (lab/gates/results/compare-demo.json): its summaries follow from
its raw rows, both gates ran on the same prompts, MagCache's patterns are its table's, and the
README's reading of it (and the demo's MagCache default) follows from the numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.gate import simulate_magcache
from app.variants import get_variant
from lab.demo.calibrate import choose_threshold
from lab.gates import compare
from lab.gates.compare import RESULTS, prompts, summarise
from tests.fakes.params import magcache_params

DOCUMENT = json.loads((RESULTS / "compare-demo.json").read_text(encoding="utf-8"))


def test_summaries_follow_from_the_rows_on_the_same_prompts() -> None:
    texts = DOCUMENT["prompts"]
    assert len(texts) >= 20 and texts == prompts(len(texts))
    for name, rows in DOCUMENT["quality"].items():
        assert {r["prompt"] for r in rows} == set(range(len(texts))), name
        recomputed, committed = summarise(rows), DOCUMENT["summary"][name]
        assert len(recomputed) == len(committed)
        for mine, theirs in zip(recomputed, committed, strict=True):
            assert mine == pytest.approx(theirs), name
        assert any(r["skipped"] > 0 for r in rows)  # engagement


def test_magcache_patterns_are_the_tables() -> None:
    params = magcache_params(get_variant("demo"))
    for row in DOCUMENT["quality"]["magcache"]:
        expected = simulate_magcache(params.with_threshold(row["threshold"]), 28)
        assert row["pattern"] == "".join(v.decision.letter for v in expected)


def test_what_the_readme_says() -> None:
    tea = {r["threshold"]: r for r in DOCUMENT["summary"]["teacache"]}
    mag = {r["threshold"]: r for r in DOCUMENT["summary"]["magcache"]}
    # At 10 skipped steps (TeaCache 0.1, MagCache 0.02), TeaCache keeps more of the image.
    assert tea[0.1]["mean_skipped"] == pytest.approx(mag[0.02]["mean_skipped"], abs=0.1)
    assert tea[0.1]["mean_ssim"] > mag[0.02]["mean_ssim"]
    assert tea[0.1]["min_ssim"] > mag[0.02]["min_ssim"]
    # MagCache skips the final steps at 0.3 (no trailing guard in the reference rule): a cliff.
    assert mag[0.3]["mean_ssim"] < 0.9 < mag[0.1]["mean_ssim"]


def test_the_demo_default_is_chosen_by_the_teacache_rule() -> None:
    rows = [{**r, "skip_share": r["mean_skipped"] / 28} for r in DOCUMENT["summary"]["magcache"]]
    chosen = choose_threshold(rows)
    assert chosen["threshold"] == magcache_params(get_variant("demo")).threshold


def test_the_probes_default_is_the_rule_on_its_demo_curve() -> None:
    """The probe's one default (every model's) is what the TeaCache rule picks on its demo curve
    (``app.gate.firstblock.DEFAULT_THRESHOLD``'s basis), and the figures its comment quotes."""
    from app.gate.firstblock import DEFAULT_THRESHOLD

    summary = DOCUMENT["summary"]["firstblock"]
    rows = [{**r, "skip_share": r["mean_skipped"] / 28} for r in summary]
    assert choose_threshold(rows)["threshold"] == DEFAULT_THRESHOLD
    at = {r["threshold"]: r for r in summary}
    assert at[DEFAULT_THRESHOLD]["mean_skipped"] > 3  # engagement, beside the quality figures
    assert at[DEFAULT_THRESHOLD]["min_ssim"] >= 0.95 > at[0.12]["min_ssim"]
    assert at[0.05]["mean_skipped"] < 1  # diffusers' default barely engages on the demo
    assert all(r["prompts"] == len(DOCUMENT["prompts"]) for r in summary)


# -- the speed panel: measured as the bench measures -----------------------------------------------


def _fake_runner(calls: list[tuple[str, str, float, int]]) -> Any:
    """A bench worker stand-in: vanilla steps take 100 ms; a gated run skips more the higher its
    threshold, its skipped steps cost 1 ms."""

    def run(spec: Any) -> dict[str, Any]:
        request = spec.request
        calls.append((spec.condition, request.gate, request.threshold, spec.rep))
        skips = 0 if spec.condition == "vanilla" else round(request.threshold * 100) % 13 + 3
        pattern = "F" + "S" * skips + "C" * (26 - skips) + "F"
        loop = sum(0.001 if c == "S" else 0.1 for c in pattern)
        return {
            "condition": spec.condition, "rep": spec.rep, "pattern": pattern,
            "loop_seconds": loop, "wall_seconds": loop + 0.2, "load_seconds": 1.0,
            "first_generation": {"loop_seconds": loop}, "active_steps": 28,
            "skipped": skips, "computed": 28 - skips, "longest_skip_streak": skips,
            "host_load_average": 0.5,
        }  # fmt: skip

    return run


def test_the_speed_panel_is_measured_as_the_bench_measures() -> None:
    calls: list[tuple[str, str, float, int]] = []
    texts = prompts(2)
    measured = compare.measure_speed(texts, 3, runner=_fake_runner(calls), quiet=True)
    per_prompt = 1 + sum(len(t) for t in compare.SPEED_THRESHOLDS.values())
    assert len(calls) == 2 * 3 * per_prompt  # every condition, every repetition, each prompt
    first, second = calls[:per_prompt], calls[per_prompt : 2 * per_prompt]
    assert first[0][0] == "vanilla" and second[-1][0] == "vanilla"  # order reversed per rep
    assert [c[1:3] for c in second] == [c[1:3] for c in reversed(first)]
    for gate, rows in measured["speed"].items():
        assert {r["threshold"] for r in rows} == set(compare.SPEED_THRESHOLDS[gate])
        for row in rows:
            computed = 28 - row["skipped"]
            assert row["skipped"] > 0  # engagement
            assert row["ideal_speedup"] == pytest.approx(28 / computed)
            assert row["speedup"] == pytest.approx(2.8 / (computed * 0.1 + row["skipped"] * 0.001))
            assert row["speedup"] < row["ideal_speedup"]  # skips cost 1 ms: under the ideal
            assert row["reps"] == 3
    assert measured["speed_reps"] == 3
    for gate, summary in measured["speed_summary"].items():
        for row in summary:
            assert row["prompts"] == 2 and row["median_over_ideal"] < 1, gate


def test_a_speed_row_above_its_ideal_is_reported_not_kept() -> None:
    rows = [
        {"prompt": 0, "threshold": 0.1, "speedup": 1.55, "ideal_speedup": 28 / 18},
        {"prompt": 1, "threshold": 0.2, "speedup": 4.28, "ideal_speedup": 28 / 11},
    ]
    assert compare.above_ideal({"speed": {"teacache": rows}}) == [
        "teacache 0.2, prompt 1: 4.28× against an ideal of 2.55×"
    ]


def test_speed_only_replaces_the_speed_panel_and_keeps_the_exact_quality_rows(
    tmp_path: Path,
) -> None:
    (tmp_path / "compare-demo.json").write_text(json.dumps(DOCUMENT), encoding="utf-8")
    calls: list[tuple[str, str, float, int]] = []
    document = compare.remeasure_speed(tmp_path, 1, 2, runner=_fake_runner(calls), quiet=True)
    assert len(calls) == 2 * (1 + sum(len(t) for t in compare.SPEED_THRESHOLDS.values()))
    written = json.loads((tmp_path / "compare-demo.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(document))
    assert (written["quality"], written["summary"]) == (DOCUMENT["quality"], DOCUMENT["summary"])
    assert "above_ideal_reason" not in written and written["speed_reps"] == 2
    assert {r["prompt"] for rows in written["speed"].values() for r in rows} == {0}
    assert compare.above_ideal(written) == []
    assert (tmp_path / "compare-demo.png").stat().st_size > 0
