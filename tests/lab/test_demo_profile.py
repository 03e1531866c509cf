"""The CPU profile of a demo transformer call (lab.demo.profile_cpu) runs and measures the model
it names. Its times are a measurement for the README, never asserted here."""

from __future__ import annotations

import math

from app.demo.model import VARIANT_FILES, load_model
from app.paths import DEMO_DIR
from lab.demo.profile_cpu import profile


def test_profile_times_every_part_of_the_shipped_demo() -> None:
    result = profile(reps=2)
    model = load_model(DEMO_DIR / VARIANT_FILES["demo"])
    assert result["single_blocks"] == len(model.transformer.single_transformer_blocks)
    assert result["double_blocks"] == len(model.transformer.transformer_blocks)
    timings = {k: v for k, v in result.items() if k.endswith("_ms")}
    assert len(timings) == 11
    assert all(math.isfinite(v) and v > 0 for v in timings.values()), timings
