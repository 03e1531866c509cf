"""The sampling sweep (lab/demo/sampling.py): its rows are the evaluation's, setting for setting."""

from __future__ import annotations

import json

from lab.demo.sampling import sweep
from lab.paths import DEMO_RESULTS


def test_default_row_reproduces_the_committed_evaluation() -> None:
    # Same pipeline, prompts and seeds as lab/demo/results/eval-demo.json (guidance 3, 28 steps):
    # the checker's verdicts on the first prompts must be the committed ones, so a sweep row
    # compares settings and nothing else (a swapped steps/guidance argument would break this).
    committed = json.loads((DEMO_RESULTS / "eval-demo.json").read_text(encoding="utf-8"))
    assert (committed["guidance"], committed["steps"]) == (3.0, 28)
    result = sweep(((3.0, 28), (1.0, 4)), n_prompts=3)
    default, other = result["rows"]
    assert default["per_prompt"] == committed["per_prompt"][:3]
    assert (other["guidance"], other["steps"]) == (1.0, 4)
    assert [row["prompt"] for row in other["per_prompt"]] == [
        row["prompt"] for row in committed["per_prompt"][:3]
    ]
