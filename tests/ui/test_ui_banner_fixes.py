"""Issue #16 item 5: the schedule banner names the real cause, and offers only fixes that the gate
simulation or the variant's calibration says would skip a step."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from app.gate import Decision, Engagement, StepEvent
from app.gate.events import VANILLA
from app.gate.kinds import gate_kind
from app.gate.simulator import simulate
from app.ui.analysis import (
    EngagementBand,
    FixKind,
    Notice,
    NoticeAction,
    NoticeKind,
    engagement_band,
    schedule_notice,
    steps_that_skip,
)
from app.ui.defaults import default_threshold
from app.variants import VARIANTS, Variant, check_schedule, get_variant
from tests.fakes.params import teacache_params
from tests.fakes.steps import tea_step

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
        tea_step(i, n, Decision.computed, r, None, None, 0.0, 0.01, gate=VANILLA)
        for i, r in enumerate(rel_l1)
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
                assert teacache_params(variant, threshold).eligible_steps(n) > 0
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
    params = teacache_params(demo, blocked_at)
    skipped = [v for v in simulate(replace(params, rel_l1_thresh=suggested), trace)]
    assert any(v.decision is Decision.skipped for v in skipped)
    assert not any(v.decision is Decision.skipped for v in simulate(params, trace))


# -- issue #27 item 8: a fix produces what it promises -------------------------------------------


def _threshold_actions(notice: Notice | None) -> list[NoticeAction]:
    if notice is None:
        return []
    return [a for a in notice.actions if a.fix.kind is FixKind.threshold]


def _named_smallest(notice: Notice) -> float:
    found = re.search(r"the smallest is (\d+\.\d+)", notice.message)
    assert found is not None, notice.message
    return float(found.group(1))


@pytest.mark.parametrize(
    ("variant_id", "steps", "threshold"),
    [("demo-turbo", 4, 0.1), ("flux2-klein-4b", 4, 0.17), ("flux1-schnell", 4, 0.1)],
)
def test_text_and_button_name_the_same_bound(variant_id: str, steps: int, threshold: float) -> None:
    """FLUX.2 Klein 4B said "the smallest is 0.261" above a button "Threshold 0.4239" (the
    polynomial's floor): the number the text names is the one the offered threshold clears, by
    the entry's last decimal."""
    variant = get_variant(variant_id)
    notice = schedule_notice(variant, steps, threshold)
    assert notice is not None
    (action,) = _threshold_actions(notice)
    offered = action.fix.threshold
    assert offered is not None
    named = _named_smallest(notice)
    assert named < offered <= named + 1e-4 + 1e-9, (named, offered)


def test_a_guess_from_the_calibration_says_so() -> None:
    """Before a run the only evidence for the turbo is its calibration (other prompts): the fix
    is offered as a guess, in its label and in the text."""
    turbo = get_variant("demo-turbo")
    notice = schedule_notice(turbo, 4, 0.1)
    assert notice is not None
    (action,) = _threshold_actions(notice)
    assert action.guess and "guess" in action.label.lower()
    assert "a guess from the calibration data" in notice.message


def _turbo_band(trace: list[float | None], threshold: float) -> EngagementBand:
    turbo = get_variant("demo-turbo")
    band = engagement_band(turbo, threshold, _vanilla(turbo.id, trace))
    assert band is not None
    return band


def test_a_measured_fix_is_simulated_on_its_trace_and_says_what_it_skips() -> None:
    """After a run the fix comes from the run's own vanilla trace: the simulator skips a step
    there at the offered threshold (not a guess), the text says how many, and the number named
    as the smallest is below the offered threshold (the walk: "the smallest is 0.277" above a
    button "Threshold 0.2766")."""
    turbo = get_variant("demo-turbo")
    trace: list[float | None] = [None, 0.18062, 0.15264, 0.31205]  # a calibration prompt's
    band = _turbo_band(trace, 0.1)
    engagement = Engagement(2, band.onset, band.onset_step)
    notice = schedule_notice(turbo, 4, 0.1, measured=band, engagement=engagement)
    assert notice is not None and notice.kind is NoticeKind.warning
    (action,) = _threshold_actions(notice)
    assert not action.guess and "guess" not in action.label.lower()
    offered = action.fix.threshold
    assert offered is not None and band.onset is not None and offered > band.onset
    skipped = sum(
        v.decision is Decision.skipped for v in simulate(teacache_params(turbo, offered), trace)
    )
    assert skipped > 0
    assert f"skips {skipped} of 4 steps" in notice.message
    assert _named_smallest(notice) < offered


def test_an_exact_kind_offers_a_simulated_fix_before_any_run() -> None:
    """MagCache reads only its table and the step count, so its simulation is exact before a
    run: below the table's onset it offers the threshold that skips, and says how many steps."""
    turbo = get_variant("demo-turbo")
    notice = schedule_notice(turbo, 4, 0.01, gate="magcache")
    assert notice is not None and notice.kind is NoticeKind.warning
    (action,) = _threshold_actions(notice)
    assert not action.guess
    offered = action.fix.threshold
    assert offered is not None
    kind = gate_kind("magcache")
    skipped = kind.skipped(turbo.params_for("magcache", offered), [None] * 4)
    assert skipped > 0 and f"skips {skipped} of 4 steps" in notice.message


@pytest.mark.parametrize("gate", ["teacache", "magcache"])
def test_the_hint_names_an_onset_the_fix_clears(gate: str) -> None:
    """The walk: at threshold 0.2766 the hint read "skipping begins above 0.277". The onset is
    written at the entry's four decimals, rounded to the side that keeps the sentence true."""
    kind = gate_kind(gate)
    turbo = get_variant("demo-turbo")
    onset = 0.27655
    hint = kind.onset_words(onset)
    value = float(re.findall(r"\d+\.\d+", hint)[-1])
    smallest_that_skips = (
        math.ceil(onset * 10_000) / 10_000
        if kind.skips_at_onset
        else math.floor(onset * 10_000 + 1) / 10_000
    )
    assert kind.engages(smallest_that_skips, onset)
    if kind.skips_at_onset:  # "skipping begins at X": X itself skips
        assert value == smallest_that_skips
    else:  # "skipping begins above X": X does not, the next entry value does
        assert not kind.engages(value, onset) and value < smallest_that_skips
    params = turbo.params_for(gate, 0.2766)
    # The hint words its onset the same way (MagCache's is its table's, exact for 4 steps).
    shown = onset if not kind.exact_simulation else kind.schedule(params, 4).floor
    assert shown is not None
    assert kind.onset_words(shown) in kind.threshold_hint(params, 4, measured=True, onset=onset)
