"""The committed survey behind the default local-difference bound says what its comment says."""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.request import DEFAULT_MAX_LOCAL_DIFF
from lab.target.local_diff_survey import DRIFT_UP_TO, LOSS_FROM, LOST_CIRCLE, RESULT

SURVEY = Path(__file__).parents[2] / "lab/target/results/local-diff-survey.json"


def test_the_default_bound_sits_between_drift_and_lost_objects() -> None:
    rows = json.loads(SURVEY.read_text())["rows"]
    assert len(rows) == 55
    assert RESULT == SURVEY
    drift = [r for r in rows if r["local_diff"] <= DRIFT_UP_TO]
    between = [r for r in rows if DRIFT_UP_TO < r["local_diff"] < LOSS_FROM]
    losses = [r for r in rows if r["local_diff"] >= LOSS_FROM]
    assert (DRIFT_UP_TO, LOSS_FROM) == (0.165, 0.39)  # the classes as inspected
    assert (len(drift), len(between), len(losses)) == (47, 2, 6)
    assert max(r["local_diff"] for r in drift) < DEFAULT_MAX_LOCAL_DIFF < LOSS_FROM
    # The case: from threshold 0.1 on, one red circle is gone and the bound catches it.
    prompt, seed = LOST_CIRCLE
    lost = [r for r in rows if (r["prompt"], r["seed"]) == (prompt, seed) and r["threshold"] >= 0.1]
    assert lost and all(r["local_diff"] > DEFAULT_MAX_LOCAL_DIFF for r in lost)
    assert all(r["skipped"] > 0 for r in lost)  # engaged
