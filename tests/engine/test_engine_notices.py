"""The engagement notice after a distilled or short schedule's vanilla pass, shared by both engines:
its words must agree with what the gate then does (the simulator is exact up to the first skip)."""

from __future__ import annotations

import pytest

from app.engine.notices import engagement_warning
from app.gate import Decision, kind_of
from app.gate.simulator import engagement, simulate
from app.variants import get_variant
from tests.fakes.params import teacache_params

# A 4-step trace inside demo-turbo's calibrated signal range (0.12–0.35): two eligible steps.
TRACE = (None, 0.30, 0.20, 0.25)


def _onset() -> float:
    params = teacache_params(get_variant("demo-turbo"), threshold=0.01)
    onset = engagement(params, TRACE).onset_threshold
    assert onset is not None and 0.0 < onset < 1.0
    return onset


@pytest.mark.parametrize("side", ["below", "above"])
def test_notice_says_what_the_gate_does_at_the_current_threshold(side: str) -> None:
    onset = _onset()
    threshold = onset * 0.9 if side == "below" else min(1.0, onset * 1.1)
    params = teacache_params(get_variant("demo-turbo"), threshold=threshold)
    notice = engagement_warning(7, params, kind_of(params).engagement(params, TRACE))
    skipped = sum(v.decision is Decision.skipped for v in simulate(params, TRACE))
    assert notice.kind == "engagement" and notice.run_id == 7
    # As the threshold entry rounds it (#39: it was printed at 3 decimals, the threshold at 2).
    assert kind_of(params).format_onset(onset) in notice.message
    assert notice.details["onset_threshold"] == pytest.approx(onset)
    if side == "below":
        assert skipped == 0
        assert "nothing is skipped" in notice.message
    else:
        assert skipped > 0
        assert "the gate skips" in notice.message


def test_no_eligible_step_says_so() -> None:
    params = teacache_params(get_variant("demo-turbo"), threshold=0.3)
    notice = engagement_warning(
        1, params, kind_of(params).engagement(params, (None, None, None, None))
    )
    assert "no step was gate-eligible" in notice.message
    assert notice.details["onset_threshold"] is None


def test_the_notice_carries_the_engagement_typed() -> None:
    """The window computes with the engagement, never with the notice's words: the same object
    the report carries."""
    params = teacache_params(get_variant("demo-turbo"), threshold=0.1)
    found = kind_of(params).engagement(params, TRACE)
    notice = engagement_warning(3, params, found)
    assert notice.engagement is found
    assert found.eligible_steps == 2 and found.onset_threshold == pytest.approx(_onset())
