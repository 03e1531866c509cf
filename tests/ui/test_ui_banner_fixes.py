"""Issue #16 item 5: the schedule banner names the real cause, and offers only fixes that the gate
simulation or the variant's calibration says would skip a step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.gate import Decision, Engagement, StepEvent
from app.gate.simulator import simulate
from app.ui.analysis import (
    FixKind,
    Notice,
    NoticeKind,
    engagement_band,
    schedule_notice,
    steps_that_skip,
)
from app.ui.defaults import default_threshold
from app.variants import VARIANTS, Variant, check_schedule, get_variant

THRESHOLDS = (0.01, 0.05, 0.1, 0.113, 0.17, 0.2, 0.3, 0.5)
STEP_COUNTS = (1, 2, 3, 4, 6, 8, 9, 16, 28)


def _fixes(notice: Notice | None, kind: FixKind) -> list[int | float]:
    if notice is None:
        return []
    out: list[int | float] = []
    for action in notice.actions:
        if action.fix.kind is kind:
            value = action.fix.steps if kind is FixKind.steps else action.fix.threshold
            assert value is not None
            out.append(value)
    return out


def _vanilla(variant_id: str, rel_l1: list[float | None]) -> tuple[StepEvent, ...]:
    n = len(rel_l1)
    return tuple(
        StepEvent(i, n, Decision.computed, r, None, None, 0.0, 0.01) for i, r in enumerate(rel_l1)
    )


def test_turbo_at_its_form_threshold_offers_no_step_count() -> None:
    """The issue: 'Use 8 steps' skipped nothing at 0.1 and then offered 16. At 0.1 the turbo's
    polynomial never predicts a change that low, so no step count can skip."""
    turbo = get_variant("demo-turbo")
    for steps in STEP_COUNTS:
        notice = schedule_notice(turbo, steps, 0.1)
        assert notice is not None and notice.kind is NoticeKind.warning
        assert _fixes(notice, FixKind.steps) == []


def test_no_eligible_step_is_named_as_the_cause() -> None:
    """At 2 steps the banner blamed a smallest prediction of 0.029 below the threshold 0.113."""
    turbo = get_variant("demo-turbo")
    measured = Engagement(eligible_steps=0, onset_threshold=0.029, onset_step=None)
    for engagement in (None, measured):
        notice = schedule_notice(turbo, 2, 0.113, engagement=engagement)
        assert notice is not None and notice.kind is NoticeKind.warning
        assert "no step is eligible" in notice.message
        assert "0.0290" not in notice.message and "smallest" not in notice.message
        assert "has no step the gate may skip" in notice.title
        assert _fixes(notice, FixKind.threshold) == []  # no threshold helps without a step


def test_every_prediction_above_the_threshold_is_named_with_its_number() -> None:
    turbo = get_variant("demo-turbo")
    notice = schedule_notice(turbo, 4, 0.1)
    assert notice is not None
    assert "every prediction is above it" in notice.title
    floor = turbo.min_predicted_change
    assert floor is not None and f"{floor:.3f}" in notice.message
    # The calibration measured this smallest prediction at 4 steps: just above it, it skips.
    assert _fixes(notice, FixKind.threshold) == [pytest.approx(floor + 1e-4)]


def test_turbo_notice_agrees_with_the_threshold_field_and_reset() -> None:
    turbo = get_variant("demo-turbo")
    form = default_threshold(turbo)
    assert form == get_variant("demo").default_threshold  # what the field and Reset show
    for steps, threshold in ((2, form), (4, form), (4, 0.3)):
        notice = schedule_notice(turbo, steps, threshold)
        assert notice is not None
        assert "off by default" not in notice.message
        assert f"threshold field and Reset use {form:.3f}, borrowed from Demo shapes" in (
            notice.message
        )


def test_threshold_zero_is_named_and_offers_nothing() -> None:
    for variant in VARIANTS.values():
        notice = schedule_notice(variant, variant.default_steps, 0.0)
        assert notice is not None and notice.title == "Skipping is off" and notice.actions == ()


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=lambda v: v.id)
def test_every_offered_fix_would_skip(variant: Variant) -> None:
    """Applying any offered steps or threshold fix leaves a schedule that check_schedule and the
    calibration let skip (no blocking banner), and a step fix has eligible steps."""
    offered = 0
    for steps in STEP_COUNTS:
        for threshold in THRESHOLDS:
            notice = schedule_notice(variant, steps, threshold)
            for n in _fixes(notice, FixKind.steps):
                offered += 1
                assert isinstance(n, int) and n != steps
                assert variant.teacache_params(threshold).eligible_steps(n) > 0
                after = schedule_notice(variant, n, threshold)
                assert after is None or after.kind is NoticeKind.info, (steps, threshold, n)
            for t in _fixes(notice, FixKind.threshold):
                offered += 1
                assert t > threshold
                assert check_schedule(variant, steps, t).can_skip, (steps, threshold, t)
                after = schedule_notice(variant, steps, t)
                assert after is None or after.kind is NoticeKind.info, (steps, threshold, t)
    if variant.id in ("demo", "demo-turbo"):
        assert offered > 0  # the rule does offer fixes where they work


def test_steps_fix_follows_the_calibration() -> None:
    turbo = get_variant("demo-turbo")
    assert turbo.min_predicted_change is not None
    assert steps_that_skip(turbo, 2, 0.3) == turbo.default_steps  # 0.175 < 0.3: skips at 4
    assert steps_that_skip(turbo, 2, 0.17) is None  # below the smallest measured prediction
    assert steps_that_skip(turbo, 4, 0.3) is None  # already there
    demo = get_variant("demo")
    assert demo.default_threshold is not None
    assert steps_that_skip(demo, 2, demo.default_threshold) == demo.default_steps
    assert steps_that_skip(demo, 2, demo.default_threshold / 2) is None  # nothing measured there


def test_threshold_fix_from_a_measured_trace_skips_on_that_trace() -> None:
    """After a run, the suggested threshold is exact on the vanilla trace: the simulator skips a
    step there, and skips none at the threshold that was blocked."""
    demo = get_variant("demo")
    # Changes where the demo's polynomial predicts 0.06–0.17: above the threshold 0.05 (itself
    # above the polynomial's floor, so the measured trace is what blocks).
    trace: list[float | None] = [None, 0.2, 0.05, 0.03, 0.02, 0.05, 0.2, 0.2]
    steps = len(trace)
    blocked_at = 0.05
    band = engagement_band(demo, blocked_at, _vanilla(demo.id, trace))
    assert band is not None and band.onset is not None and band.onset >= blocked_at
    notice = schedule_notice(demo, steps, blocked_at, measured=band)
    assert notice is not None and notice.kind is NoticeKind.warning
    assert "measured on the last vanilla run" in notice.message
    (suggested,) = _fixes(notice, FixKind.threshold)
    params = demo.teacache_params(blocked_at)
    skipped = [v for v in simulate(replace(params, rel_l1_thresh=suggested), trace)]
    assert any(v.decision is Decision.skipped for v in skipped)
    assert not any(v.decision is Decision.skipped for v in simulate(params, trace))
