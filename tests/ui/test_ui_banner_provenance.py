"""A banner calls a threshold "calibrated" only where a calibration measured it, and otherwise
says where the default comes from (issue #39, finding 4).

FLUX.3 Image Klein's banner offered "FLUX.3 Image Klein base at 50 steps and its calibrated
threshold 0.100", but nothing was calibrated on the base: 0.1 is the first-block probe's default
for every model, whose basis the probe's settings carry (their provenance).
"""

from __future__ import annotations

import pytest

from app.gate.kinds import GATE_KINDS, gate_kind
from app.ui.analysis import schedule_notice
from app.ui.defaults import default_threshold
from app.variants import all_variants

PAIRS = [
    (variant.id, gate)
    for variant in all_variants().values()
    if variant.base_variant and variant.distilled
    for gate in GATE_KINDS
    if variant.gate_unavailable_reason(gate) is None
    and all_variants()[variant.base_variant].default_threshold_for(gate) is not None
]


def _banner(variant_id: str, gate: str):  # type: ignore[no-untyped-def]
    variant = all_variants()[variant_id]
    notice = schedule_notice(
        variant, variant.default_steps, default_threshold(variant, gate), gate=gate
    )
    assert notice is not None
    return notice


def _base_is_calibrated(variant_id: str, gate: str) -> bool:
    kind = gate_kind(gate)
    base = all_variants()[all_variants()[variant_id].base_variant]  # type: ignore[index]
    return kind.calibration_of(base) is not kind.uncalibrated


def test_both_kinds_of_base_are_covered() -> None:
    assert ("flux3-image-klein", "firstblock") in PAIRS
    assert {_base_is_calibrated(*pair) for pair in PAIRS} == {True, False}


@pytest.mark.parametrize(("variant_id", "gate"), PAIRS)
def test_the_base_offer_says_where_its_threshold_comes_from(variant_id: str, gate: str) -> None:
    notice = _banner(variant_id, gate)
    base = all_variants()[all_variants()[variant_id].base_variant]  # type: ignore[index]
    kind = gate_kind(gate)
    assert f"use {base.display_name}" in notice.message
    if _base_is_calibrated(variant_id, gate):
        assert "its calibrated threshold" in notice.message
    else:
        assert "calibrated threshold" not in notice.message, notice.message
        assert f"the {kind.label}'s default for every model" in notice.message
        basis = kind.provenance_text(kind.calibration_of(base))
        assert basis in notice.details  # the basis: the banner's tooltip and its Copy
        assert basis in notice.copy_text
