"""The shipped demo calibrations keep their calibrated range at full precision: exactly the
smallest and largest signal change among the committed calibration pairs
(lab/demo/results/<variant>.calibration-pairs.json, written by ``python -m lab.demo.calibrate``).

A rounded range would move the edge where the gate stops pricing a change (above it a step always
computes): a change inside the rounding gap would be priced instead of computed, or the reverse.
"""

from __future__ import annotations

import json

import pytest

from app.paths import DEMO_DIR
from app.variants import get_variant
from lab.paths import DEMO_RESULTS


@pytest.mark.parametrize("variant", ["demo", "demo-turbo"])
def test_shipped_range_is_the_pairs_exact_min_and_max(variant: str) -> None:
    pairs = json.loads((DEMO_RESULTS / f"{variant}.calibration-pairs.json").read_text("utf-8"))
    xs = [pair["x"] for run in pairs["pairs"] for pair in run]
    assert len(xs) == len(pairs["prompts"]) * (pairs["steps"] - 1)  # every consecutive-step pair
    shipped = json.loads((DEMO_DIR / f"{variant}.calibration.json").read_text("utf-8"))
    assert shipped["calibrated_range"] == [min(xs), max(xs)]  # float equality: no rounding
    # ... and that is the range the gate runs with.
    assert get_variant(variant).teacache_params(threshold=0.1).calibrated_range == (
        min(xs),
        max(xs),
    )
