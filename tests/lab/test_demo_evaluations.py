"""The committed full evaluations (lab/demo/results/eval-*.json, ``python -m lab.demo.evaluate``
through the real pipeline, 100 prompts) meet the issue's bars, and their summaries are the counts
of their own per-prompt records, so a summary cannot drift from the data it reports.

Reading JSON only: no model runs here. tests/lab/test_demo_quality.py renders a cheap slice to
guard that the shipped weights still produce what these files record.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.demo.prompt import parse_prompt
from app.variants import get_variant
from lab.demo.evaluate import eval_prompts
from lab.paths import DEMO_RESULTS

COLOUR_FLOOR, SHAPE_FLOOR, TURBO_MARGIN = 0.90, 0.80, 0.05  # the issue's bars
CRITERIA = ("colour", "shape", "position", "count", "all")
N = 100  # the issue's bars are over 100 random in-vocabulary prompts

# (file, variant): the shipped models at their default settings, and two diagnostics the README
# cites (the demo at 4 steps; the deblocking decoder).
EVALUATIONS = {
    "eval-demo.json": "demo",
    "eval-demo-turbo.json": "demo-turbo",
    "eval-demo-4step.json": "demo",
    "eval-demo-deblocked.json": "demo",
}


def _load(name: str) -> dict[str, Any]:
    return json.loads((DEMO_RESULTS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EVALUATIONS))
def test_summary_is_recounted_from_the_per_prompt_records(name: str) -> None:
    result = _load(name)
    records = result["per_prompt"]
    assert result["prompts"] == len(records) == N and result["first_prompt"] == 0
    # The reported set: the evaluation stream's prompts 0-99, in order.
    assert [r["prompt"] for r in records] == eval_prompts(N)
    for key in CRITERIA:
        assert result["scores"][key] == sum(bool(r[key]) for r in records) / N, key
    for record in records:  # "all" is every criterion at once
        assert record["all"] == all(record[k] for k in CRITERIA[:-1]), record


# The second hundred (prompts 100-199), the shipped models at their defaults: not the reported
# set, the check that a change holds beyond it (#31).
SECOND_HUNDRED = {
    "eval-demo-100-199.json": "demo",
    "eval-demo-turbo-100-199.json": "demo-turbo",
}


@pytest.mark.parametrize("name", sorted(SECOND_HUNDRED))
def test_second_hundred_is_recounted_from_its_records(name: str) -> None:
    result = _load(name)
    records = result["per_prompt"]
    assert result["variant"] == SECOND_HUNDRED[name]
    assert result["prompts"] == len(records) == N and result["first_prompt"] == N
    assert [r["prompt"] for r in records] == eval_prompts(N, N)
    for key in CRITERIA:
        assert result["scores"][key] == sum(bool(r[key]) for r in records) / N, key


@pytest.mark.parametrize("name", sorted(EVALUATIONS))
def test_shape_tables_count_the_prompts_clauses(name: str) -> None:
    # Clauses per asked shape, recounted by parsing the 100 prompts: both tables must cover
    # exactly those clauses. A clause is right when its shape covers over half of the clause's
    # object area (lab.demo.checker), which makes it the largest-area reading too: right clauses
    # are at most those read as their own shape (the deblocked run has 29 of 30 stars).
    result = _load(name)
    asked: dict[str, int] = {}
    for record in result["per_prompt"]:
        for clause in parse_prompt(record["prompt"]).clauses:
            if clause.shape is not None:
                asked[clause.shape] = asked.get(clause.shape, 0) + 1
    by_shape = result["shape_by_clause"]["shape"]
    seen_as = result["shape_seen_as"]
    assert {s: row["clauses"] for s, row in by_shape.items()} == asked
    assert {s: sum(row.values()) for s, row in seen_as.items()} == asked
    for shape, row in by_shape.items():
        assert row["right"] <= seen_as[shape].get(shape, 0), shape
        assert row["share"] == row["right"] / row["clauses"]
    # A prompt's shape verdict is all of its clauses right, so right clauses bound right prompts.
    right_prompts = sum(bool(r["shape"]) for r in result["per_prompt"])
    assert right_prompts <= sum(row["right"] for row in by_shape.values())


@pytest.mark.parametrize("name", ["eval-demo.json", "eval-demo-turbo.json"])
def test_shipped_evaluations_ran_at_the_variants_defaults(name: str) -> None:
    result = _load(name)
    variant = get_variant(EVALUATIONS[name])
    assert result["variant"] == variant.id
    assert (result["steps"], result["guidance"]) == (
        variant.default_steps,
        variant.default_guidance,
    )
    assert result["decode"] == "seamless" and "generate_image" in result["sampler"]


def test_demo_meets_the_issues_bars() -> None:
    scores = _load("eval-demo.json")["scores"]  # 0.99 colour, 0.85 shape
    assert scores["colour"] >= COLOUR_FLOOR, scores
    assert scores["shape"] >= SHAPE_FLOOR, scores


def test_turbo_is_within_five_points_of_the_demo() -> None:
    demo = _load("eval-demo.json")["scores"]
    turbo = _load("eval-demo-turbo.json")["scores"]  # 0.98 / 0.80 against 0.99 / 0.85
    for key in ("colour", "shape"):
        # Scores are counts over 100 prompts: 1e-9 absorbs only float subtraction's rounding
        # (0.85 - 0.05 = 0.7999999999999999), far below one prompt (0.01).
        assert turbo[key] >= demo[key] - TURBO_MARGIN - 1e-9, (key, turbo, demo)
