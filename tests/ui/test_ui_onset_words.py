"""Every text that prints where skipping begins prints it as the threshold entry rounds it
(issue #39, finding 6).

The first-block probe's hint said "skipping begins above 0.0501" on the demo (seed 42, its onset
0.05005017…, rounded half up) while the gate plot said "above 0.0500" and 0.0501 is the first
entry that skips; the engine's notice printed the same onset as 0.050 and the threshold as 0.05.
An onset is printed by ``GateKind.format_onset``: the entry's value next to it is the first that
skips (above it where the rule compares strictly, at it where it skips at the onset).
"""

from __future__ import annotations

import re

import pytest

from app.engine.notices import engagement_warning
from app.gate import Engagement
from app.gate.kinds import GATE_KINDS, THRESHOLD_DECIMALS, gate_kind
from app.gate.magcache import onset as table_onset
from app.variants import get_variant

# The demo's first-block onset at seed 42 (the walk's), and values either side of an entry step.
ONSETS = (0.05005017077062201, 0.04996, 0.0008960306644439919, 0.123449, 0.2)
BEGINS = re.compile(r"skipping begins (above|at) (\d\.\d+)")
STEP = 10**-THRESHOLD_DECIMALS


def _first_skipping(kind_name: str, onset: float) -> float:
    return gate_kind(kind_name).smallest_engaging(onset)  # type: ignore[return-value]


@pytest.mark.parametrize("gate", sorted(GATE_KINDS))
@pytest.mark.parametrize("onset", ONSETS)
def test_the_hint_prints_the_onset_as_the_entry_rounds_it(gate: str, onset: float) -> None:
    kind = gate_kind(gate)
    variant = get_variant("demo")
    params = kind.params(kind.calibration_of(variant), 0.1)
    hint = kind.threshold_hint(params, 28, measured=True, onset=onset)
    if gate == "magcache":  # its hint reads its own table, exact for every run of 28 steps
        _, onset, _ = table_onset(params.with_threshold(0.1), 28)  # type: ignore[arg-type]
        assert onset is not None
    ((where, value),) = BEGINS.findall(hint)
    assert value == kind.format_onset(onset)
    first = _first_skipping(gate, onset)
    step = 0.0 if where == "at" else STEP
    assert round(float(value) + step, THRESHOLD_DECIMALS) == pytest.approx(first)


@pytest.mark.parametrize("gate", sorted(GATE_KINDS))
@pytest.mark.parametrize("onset", ONSETS)
def test_the_engines_notice_prints_onset_and_threshold_at_the_entrys_decimals(
    gate: str, onset: float
) -> None:
    kind = gate_kind(gate)
    params = kind.params(kind.calibration_of(get_variant("demo")), 0.0501)
    warning = engagement_warning(1, params, Engagement(20, onset, 12))
    found = re.search(r"eligible steps is (\d\.\d+)", warning.message)
    assert found is not None, warning.message
    assert found[1] == kind.format_onset(onset)
    assert "current threshold 0.0501 " in warning.message  # as the entry holds it, not 0.05
