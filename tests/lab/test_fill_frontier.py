"""The fill frontier's code on a tiny grid of real demo runs (lab/gates/fill.py; not the committed
numbers): the runs engage and forecast, quality is measured against vanilla, each fill's frontier
is exactly its non-dominated settings, and the reading compares the two frontiers it was given."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from lab.gates import fill as study

# One prompt and seed; TeaCache at a threshold that skips and one that skips more, the
# first-block probe at one: six real gated passes at 28 steps, 128².
GRID = {"teacache": (0.15, 0.3), "firstblock": (0.2,)}
SEEDS = (42,)


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    texts = study.eval_texts(1)
    rows = study.measure(texts, SEEDS, GRID)
    return study.frontier_document(rows, texts, SEEDS, GRID)


def test_every_run_is_measured_and_engaged(document: dict[str, Any]) -> None:
    rows = document["rows"]
    assert len(rows) == 3 * len(study.FILLS)
    for row in rows:
        assert row["computed"] + row["skipped"] == study.STEPS == len(row["pattern"])
        assert row["skipped"] > 0  # engagement: every threshold here skips
        assert row["ssim"] < 1.0 and row["ssimulacra2"] < 100.0  # a skipped step changed it
        assert row["gated_seconds"] > 0 and row["vanilla_seconds"] > 0
        if row["fill"] == "forecast":
            assert 0 < row["forecast_steps"] <= row["skipped"]
        else:
            assert row["forecast_steps"] == 0
    # The fill reached the picture: on the same setting, forecast and reuse differ.
    by_setting: dict[tuple[str, float], dict[str, float]] = {}
    for row in rows:
        by_setting.setdefault((row["gate"], row["threshold"]), {})[row["fill"]] = row["ssim"]
    assert all(found["reuse"] != found["forecast"] for found in by_setting.values())
    assert document["host"]["cpu"] and document["host"]["cores"] >= 1


def test_each_frontier_is_its_non_dominated_settings(document: dict[str, Any]) -> None:
    for fill in study.FILLS:
        points = document["settings"][fill]
        assert len(points) == 3
        for quality in study.QUALITIES:
            front = document["frontier"][fill][quality]
            key = f"mean_{quality}"
            assert front  # at least the setting keeping the most quality
            for p in front:  # no setting dominates a frontier point
                assert not any(study.dominates(q, p, quality) for q in points)
            for p in points:  # every setting off the frontier is dominated by a point on it
                if p not in front:
                    assert any(study.dominates(q, p, quality) for q in front)
            # Along the frontier, computing more steps buys more quality (ties: equal settings).
            for a, b in itertools.pairwise(front):
                assert a["mean_computed"] <= b["mean_computed"] and a[key] <= b[key]
                assert (a["mean_computed"] == b["mean_computed"]) == (a[key] == b[key])


def test_the_reading_compares_the_two_frontiers(document: dict[str, Any]) -> None:
    for quality in study.QUALITIES:
        key = f"mean_{quality}"
        fronts = {fill: document["frontier"][fill][quality] for fill in study.FILLS}
        for row in document["moved"][quality]["at_budget"]:
            for fill, front in fronts.items():
                within = [p[key] for p in front if p["mean_computed"] <= row["computed"]]
                assert row[fill] == (max(within) if within else None)
            if row["gain"] is not None:
                assert row["gain"] == pytest.approx(row["forecast"] - row["reuse"])
        for row in document["moved"][quality]["at_bar"]:
            for fill, front in fronts.items():
                meeting = [p for p in front if p[key] >= row["bar"]]
                if not meeting:
                    assert row[fill] is None
                else:
                    assert row[fill]["mean_computed"] == min(p["mean_computed"] for p in meeting)


def test_dominance_on_hand_made_points() -> None:
    a = {"mean_computed": 14.0, "mean_ssim": 0.99}
    b = {"mean_computed": 16.0, "mean_ssim": 0.98}
    c = {"mean_computed": 12.0, "mean_ssim": 0.95}
    same = dict(a)
    assert study.dominates(a, b, "ssim") and not study.dominates(b, a, "ssim")
    assert not study.dominates(a, same, "ssim")  # equal on both: neither strictly better
    assert study.pareto([a, b, c, same], "ssim") == [c, a, same]
