"""View-model contract, widgets in isolation, and the headless launch modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS

from app.engine.events import (
    LoadProgress,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFinished,
    RunWarning,
    StepDone,
)
from app.engine.request import make_request
from app.gate import Decision, Engagement, StepEvent
from app.ui.analysis import (
    BannerFix,
    FixKind,
    Notice,
    NoticeAction,
    NoticeKind,
    schedule_notice,
)
from app.ui.banner import Banner
from app.ui.job_slot import JobStatus
from app.ui.launch import launch
from app.ui.observable import Prop, bind
from app.ui.run_model import RunModel
from app.ui.timeline import StepTimeline
from app.variants import get_variant
from tests.fakes.engine import FakeEngine, FakeFailure, FakeScript, minimal_report
from tests.fakes.steps import tea_step


class _Model(QObject):
    value_changed = Signal(object)
    image_changed = Signal(object)
    value = Prop(1)
    image = Prop[np.ndarray | None](None)


def test_properties_emit_only_on_change(qtbot: QtBot) -> None:
    model = _Model()
    seen: list[object] = []
    model.value_changed.connect(seen.append)
    model.value = 1
    model.value = 2
    model.value = 2
    model.value = 3
    assert seen == [2, 3]
    images: list[object] = []
    model.image_changed.connect(images.append)
    a = np.zeros(3)
    model.image = a
    model.image = a  # the same array: no signal
    model.image = np.zeros(3)  # an equal but new array: a signal (arrays compare by identity)
    assert len(images) == 2


def test_a_property_without_its_signal_is_rejected() -> None:
    # Python 3.11 wraps errors raised in __set_name__ in a RuntimeError (3.12 does not).
    with pytest.raises((TypeError, RuntimeError)) as caught:

        class _Broken(QObject):
            broken = Prop(0)

    cause = caught.value.__cause__ or caught.value
    assert "needs a broken_changed" in str(cause)


def test_bind_is_two_way_and_disconnects(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QSpinBox

    model = _Model()
    spin = QSpinBox()
    qtbot.addWidget(spin)
    binding = bind(model, "value", spin.setValue, spin.valueChanged)
    assert spin.value() == 1
    model.value = 5
    assert spin.value() == 5
    spin.setValue(7)
    assert model.value == 7
    binding.disconnect()
    model.value = 9
    assert spin.value() == 7


def _step(index: int, n: int, decision: Decision) -> StepEvent:
    return tea_step(index, n, decision, 0.05, 0.04, 0.09, 0.1, 0.012)


def test_run_model_applies_events_in_one_handler(qtbot: QtBot) -> None:
    model = RunModel()
    request = make_request("demo", "a red star", steps=3)
    model.begin(7, request)
    assert model.status is JobStatus.loading and model.progress == -1.0
    model.handle_event(LoadProgress("demo", "loading…"))
    model.handle_event(PassStarted(7, Pass.vanilla, 3))
    assert model.status is JobStatus.running
    for i in range(3):
        model.handle_event(StepDone(7, Pass.vanilla, _step(i, 3, Decision.computed)))
    image = np.zeros((128, 128, 3), np.uint8)
    model.handle_event(PassFinished(7, Pass.vanilla, image, 0.3, model.vanilla_steps))  # type: ignore[arg-type]
    assert model.progress == pytest.approx(0.5)
    model.handle_event(StepDone(6, Pass.gated, _step(0, 3, Decision.forced)))  # stale run: ignored
    assert model.gated_steps == (None, None, None)
    model.handle_event(PassStarted(7, Pass.gated, 3))
    for i, d in enumerate((Decision.forced, Decision.skipped, Decision.forced)):
        model.handle_event(StepDone(7, Pass.gated, _step(i, 3, d)))
    assert model.skips == 1
    found = Engagement(eligible_steps=1, onset_threshold=0.3, onset_step=1)
    model.handle_event(RunWarning(7, "engagement", "m", {"onset_threshold": 0.3}, found))
    assert model.engagement == found
    assert model.notices == ()  # folded into the schedule banner
    model.handle_event(RunWarning(7, "other", "something else"))
    assert [n.key for n in model.notices] == ["other"]
    model.handle_event(PassFinished(7, Pass.gated, image, 0.2, model.gated_steps))  # type: ignore[arg-type]
    model.handle_event(RunFinished(7, minimal_report(request, gated_seconds=0.2)))
    assert model.status is JobStatus.finished
    assert model.speedup == pytest.approx(1.5)
    assert model.speedup_label == "measured"
    assert model.progress == 1.0


def test_run_model_cancel(qtbot: QtBot) -> None:
    model = RunModel()
    model.begin(1, make_request("demo", "a red star", steps=3))
    model.mark_cancelling()
    assert model.status is JobStatus.cancelling
    model.handle_event(RunCancelled(1, 1))
    assert model.status is JobStatus.cancelled and model.phase == "Cancelled at step 2"


def test_speedup_of_a_resumed_pass_is_flagged_as_an_estimate() -> None:
    # 3 steps, 1 skipped: at most 1.5× (the ideal)
    plain = minimal_report(gated_seconds=1.0, vanilla_seconds=1.5)
    assert (plain.speedup, plain.speedup_estimated) == (1.5, False)
    resumed = minimal_report(gated_seconds=1.0, vanilla_seconds=1.5, resumed_from=2)
    assert (resumed.speedup, resumed.speedup_estimated) == (1.5, True)
    alone = minimal_report(gated_seconds=1.0, vanilla_seconds=None)
    assert (alone.speedup, alone.speedup_estimated) == (None, False)


def test_schedule_notice_numbers() -> None:
    klein = get_variant("flux2-klein-4b")
    notice = schedule_notice(klein, 4, 0.17)
    assert notice is not None and notice.kind is NoticeKind.warning
    assert "2 of 4 steps could be skipped at all" in notice.message
    assert "0.261" in notice.message and "0.170" in notice.message
    # The base variant at the schedule its calibrated threshold skips on (issue #27 item 8).
    base = BannerFix.use_variant("flux2-klein-base-4b", steps=50, threshold=0.17)
    assert {a.fix for a in notice.actions} >= {base}
    assert schedule_notice(get_variant("flux1-dev"), 25, 0.2) is None
    off = schedule_notice(get_variant("demo"), 28, 0.0)
    assert off is not None and off.kind is NoticeKind.info


def test_timeline_tooltip_shows_the_numbers(qtbot: QtBot) -> None:
    timeline = StepTimeline()
    qtbot.addWidget(timeline)
    timeline.resize(600, timeline.sizeHint().height())
    steps = (_step(0, 3, Decision.forced), _step(1, 3, Decision.skipped), None)
    timeline.set_rows(steps, (*steps[:2], None), active=Pass.gated)
    assert timeline.pattern() == "FS·"
    text = timeline.tooltip_at(timeline.cell_rect(Pass.gated, 1).center().toPoint())
    assert text is not None
    for expected in (
        "Step 2 of 3",
        "Skipped",
        "rel-L1",
        "0.0500",
        "predicted",
        "0.0400",
        "accumulated: 0.0900",
        "vs threshold 0.1<br>",
        "12.0 ms",
    ):
        assert expected in text
    pending = timeline.tooltip_at(timeline.cell_rect(Pass.gated, 2).center().toPoint())
    assert pending is not None and "not run yet" in pending
    timeline.grab()  # paints without error


def test_banner_copy_and_actions(qtbot: QtBot) -> None:
    notice = Notice(
        NoticeKind.warning,
        "Title",
        "Message",
        "details here",
        (NoticeAction("Do it", BannerFix.use_steps(8)),),
        key="k",
    )
    banner = Banner(notice)
    qtbot.addWidget(banner)
    with qtbot.waitSignal(banner.action_triggered) as blocker:
        banner.action_buttons[0].click()
    assert blocker.args == [BannerFix(FixKind.steps, steps=8)]
    banner.copy_button.click()
    assert QGuiApplication.clipboard().text() == "Title\nMessage\n\ndetails here"
    with qtbot.waitSignal(banner.dismissed) as dismissed:
        banner.close_button.click()
    assert dismissed.args == ["k"]


def test_screenshot_mode_saves_a_large_grab(qtbot: QtBot, tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    code = launch(screenshot=str(out), engine_factory=lambda: FakeEngine())
    assert code == 0
    with Image.open(out) as image:
        assert image.size[0] >= 900 and image.size[1] >= 600


def test_smoke_test_mode_reports_a_failed_generation(qtbot: QtBot) -> None:
    failing = FakeScript(failure=FakeFailure("no weights for the demo"))
    assert launch(smoke_test=True, engine_factory=lambda: FakeEngine(failing)) == 1
    assert launch(smoke_test=True, engine_factory=lambda: FakeEngine()) == 0


def test_signal_timeout_is_generous() -> None:
    assert SIGNAL_TIMEOUT_MS >= 10_000


def test_threshold_control_is_finer_near_zero_and_exact_in_its_entry(qtbot: QtBot) -> None:
    from app.ui.form_view import ThresholdControl

    control = ThresholdControl()
    qtbot.addWidget(control)
    seen: list[float] = []
    control.valueChanged.connect(seen.append)
    control.setValue(0.0125)
    assert control.value() == 0.0125 and control.spin.value() == 0.0125
    assert control.slider.value() == 112  # sqrt scale: 0.0125 sits at 11% of the track
    control.slider.setValue(500)
    assert control.value() == 0.25
    control.spin.setValue(0.3)
    assert control.slider.value() == ThresholdControl.to_position(0.3)
    control.setValue(0.3)  # unchanged: no signal
    assert seen == [0.0125, 0.25, 0.3]
    for position in (0, 1, 37, 999, 1000):
        value = ThresholdControl.from_position(position)
        assert abs(ThresholdControl.to_position(value) - position) <= 1


def test_the_cards_show_the_reports_label_and_no_resume_where_nothing_was_replayed(
    qtbot: QtBot,
) -> None:
    from app.ui.images import ComparePanel

    panel = ComparePanel()
    qtbot.addWidget(panel)
    stats = {"ssim": 0.99, "gated_seconds": 0.5, "vanilla_seconds": 0.8, "skips": 2, "steps": 8}
    request = make_request("demo", "a red star", steps=8)
    measured = minimal_report(request, resumed_from=0, gated_seconds=0.5, vanilla_seconds=0.8)
    panel.set_stats(
        **stats,
        speedup=measured.speedup,
        speedup_label=measured.speedup_label,
        vanilla_cached=False,
        resumed_from=0,
    )
    assert panel.speedup_card.note.text() == "measured"
    assert panel.gated_time_card.note.text() == ""  # re-seeded at step 0: every step ran
    replayed = minimal_report(request, resumed_from=3, gated_seconds=0.5, vanilla_seconds=0.8)
    panel.set_stats(
        **stats,
        speedup=replayed.speedup,
        speedup_label=replayed.speedup_label,
        vanilla_cached=False,
        resumed_from=3,
    )
    assert panel.speedup_card.note.text() == "estimate (3 of 8 steps replayed)"
    assert "estimate (3 of 8 steps replayed)" in panel.speedup_card.toolTip()
    assert panel.gated_time_card.note.text() == "first 3 steps shared with vanilla"
    assert panel.ssim_card.caption.text() == "Similarity"
    assert panel.ssim_card.note.text() == "changed very little"  # the summary line's band
    assert "SSIM" in panel.ssim_card.toolTip()  # the technical name stays one hover away


def test_the_ssim_card_names_a_spot_that_differs_more_than_the_bound(qtbot: QtBot) -> None:
    from app.ui.images import ComparePanel

    panel = ComparePanel()
    qtbot.addWidget(panel)
    common = {
        "ssim": 0.99, "gated_seconds": 0.5, "vanilla_seconds": 0.8, "speedup": 1.6,
        "speedup_label": "measured", "skips": 2, "steps": 8, "vanilla_cached": False,
        "resumed_from": None,
    }  # fmt: skip
    panel.set_stats(**common, local_diff=0.04)
    assert panel.ssim_card.note.text() == "changed very little"
    assert "0.040" in panel.ssim_card.toolTip()
    panel.set_stats(**common, local_diff=0.83)  # the lost-circle case: SSIM alone says fine
    assert panel.ssim_card.note.text() == "one spot differs (0.83)"
    assert "0.830" in panel.ssim_card.toolTip() and "SSIM" in panel.ssim_card.toolTip()
    panel.set_stats(**common)
    assert panel.ssim_card.note.text() == "changed very little"
    # The card and the summary line read the same measure against the same bound.
    from app.engine.request import DEFAULT_MAX_LOCAL_DIFF
    from app.ui.plain_words import run_summary

    for local in (DEFAULT_MAX_LOCAL_DIFF, DEFAULT_MAX_LOCAL_DIFF + 0.01):
        panel.set_stats(**common, local_diff=local)
        card_spot = panel.ssim_card.note.text().startswith("one spot differs")
        assert card_spot is ("one spot" in run_summary(2, 8, 0.99, local))
        assert card_spot is (local > DEFAULT_MAX_LOCAL_DIFF)
