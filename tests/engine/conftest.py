"""Engine-test fixtures shared by the engine's own tests and its timing tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from app import variants


@pytest.fixture
def forced_variant(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A FLUX.2 base variant whose polynomial predicts a constant 0.01 per step: at threshold
    0.05 the gate must skip four steps in a row, then compute (a scripted, known pattern)."""
    base = variants.get_variant("flux2-klein-base-4b")
    variant = replace(
        base,
        id="test-flux2-forced",
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.01),
        calibrated_range=None,
        default_size=(128, 128),
    )
    monkeypatch.setitem(variants.VARIANTS, variant.id, variant)
    yield variant.id
