"""The committed gate comparison (lab/gates/results/compare-demo.json): its summaries follow from
its raw rows, both gates ran on the same prompts, MagCache's patterns are its table's, and the
README's reading of it (and the demo's MagCache default) follows from the numbers."""

from __future__ import annotations

import json

import pytest

from app.gate import simulate_magcache
from app.variants import get_variant
from lab.demo.calibrate import choose_threshold
from lab.gates.compare import RESULTS, prompts, summarise

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
    params = get_variant("demo").magcache_params()
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
    assert chosen["threshold"] == get_variant("demo").magcache_params().threshold
