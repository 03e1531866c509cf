"""The schedule banner's count of steps that can skip, and which steps always compute, come from
the gate's own numbers (issue #39, finding 3).

The banner said "(the first and last are always computed)" whatever the gate: the first-block
probe computes its first four steps (warm-up) and the last, MagCache its retention window and
not the last, so on Z-Image Turbo the probe's banner read "4 of 9 steps could be skipped at all
(the first and last are always computed)" beside a timeline of five forced steps.
"""

from __future__ import annotations

import re

import pytest

from app.gate.kinds import GATE_KINDS, gate_kind
from app.ui.analysis import schedule_notice
from app.ui.defaults import default_threshold
from app.variants import all_variants, check_schedule

SENTENCE = re.compile(r"(\d+) of (\d+) steps could be skipped at all(?: \(([^)]*)\))?\.")


def _window(words: str, side: str) -> int:
    """How many steps the words say ``side`` ("first", "last") always computes."""
    found = re.search(rf"\b{side}(?: (\d+))?\b", words)
    return 0 if found is None else int(found[1] or 1)


def _always_computed(gate: str, params: object, steps: int) -> tuple[int, int]:
    """The leading and trailing steps the gate never skips, read off its parameters (the test's
    own account of each rule, not the code under test)."""
    if gate == "teacache":
        return params.skip_first, params.skip_last  # type: ignore[attr-defined]
    if gate == "firstblock":
        return params.warmup_steps, params.skip_last  # type: ignore[attr-defined]
    assert gate == "magcache"
    return max(params.first_eligible(steps), 1), 0  # type: ignore[attr-defined]


CASES = [
    (variant.id, gate, steps)
    for variant in all_variants().values()
    if variant.distilled
    for gate in GATE_KINDS
    if variant.gate_unavailable_reason(gate) is None
    and gate_kind(gate).calibration_of(variant) is not None
    for steps in sorted({variant.default_steps, 9, 12})
]


def test_every_distilled_variant_and_gate_is_covered() -> None:
    gates = {gate for _, gate, _ in CASES}
    assert gates == set(GATE_KINDS)  # the rule of every kind is held here


@pytest.mark.parametrize(("variant_id", "gate", "steps"), CASES)
def test_the_sentence_counts_what_the_gate_computes(variant_id: str, gate: str, steps: int) -> None:
    variant = all_variants()[variant_id]
    threshold = default_threshold(variant, gate)
    notice = schedule_notice(variant, steps, threshold, gate=gate)
    assert notice is not None  # a distilled schedule always gets its banner
    found = SENTENCE.search(notice.message)
    assert found is not None, notice.message
    eligible, total, words = int(found[1]), int(found[2]), found[3] or ""
    check = check_schedule(variant, steps, threshold, gate=gate)
    assert (eligible, total) == (check.eligible_steps, steps)
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    first, last = _always_computed(gate, kind.params(calibration, threshold), steps)
    assert words  # every kind's rule accounts for the steps it never skips
    said = _window(words, "first"), _window(words, "last")
    assert sum(said) + eligible == steps, words  # they add up
    if eligible:  # and they are these (with none eligible, the windows may overlap)
        assert said == (first, last), words
