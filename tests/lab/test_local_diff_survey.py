"""The committed survey behind the default local-difference bound says what its comment says."""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.request import DEFAULT_MAX_LOCAL_DIFF
from lab.target.local_diff_survey import LOST_CIRCLE

SURVEY = Path(__file__).parents[2] / "lab/target/results/local-diff-survey.json"


def test_the_default_bound_sits_between_drift_and_lost_objects() -> None:
    rows = json.loads(SURVEY.read_text())["rows"]
    assert len(rows) == 55
    drift = [r for r in rows if r["local_diff"] <= 0.165]
    between = [r for r in rows if 0.165 < r["local_diff"] < 0.39]
    losses = [r for r in rows if r["local_diff"] >= 0.39]
    assert (len(drift), len(between), len(losses)) == (47, 2, 6)
    assert max(r["local_diff"] for r in drift) < DEFAULT_MAX_LOCAL_DIFF < 0.39
    # The case: from threshold 0.1 on, one red circle is gone and the bound catches it.
    prompt, seed = LOST_CIRCLE
    lost = [r for r in rows if (r["prompt"], r["seed"]) == (prompt, seed) and r["threshold"] >= 0.1]
    assert lost and all(r["local_diff"] > DEFAULT_MAX_LOCAL_DIFF for r in lost)
    assert all(r["skipped"] > 0 for r in lost)  # engaged
