"""The fill in the window: the choice beside the gate ("On a skipped step: reuse the last change /
forecast it"), remembered per variant, carried by the request; the timeline marks a forecast
skip and its tooltip says what the step added and how far off the fill was; Details say which
fill ran (pytest-qt, offscreen, the scripted fake engine)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.engine.events import Pass
from app.gate import Decision, StepEvent
from app.gate.fill import ERROR, REACH, REUSE_ERROR
from app.storage.settings import Settings, settings_from_json
from app.ui.fill_picker import FILL_PROMPT, FillPicker
from app.ui.job_slot import JobStatus
from app.ui.plain_words import fill_detail_lines, fill_step_lines
from app.ui.timeline import describe_step, forecast_mark
from tests.fakes.engine import FakeEngine


def pick(picker: FillPicker, fill: str) -> None:
    """What a user's choice does: select the row and emit ``activated``."""
    index = picker.combo.findData(fill)
    picker.combo.setCurrentIndex(index)
    picker.combo.activated.emit(index)


def step(index: int, decision: Decision, **fill: float) -> StepEvent:
    return StepEvent(index, 6, decision, threshold=0.2, seconds=0.01, gate="teacache", fill=fill)


def test_the_choice_beside_the_gate_reaches_the_request_and_is_remembered_per_variant(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    picker, form = window.controls.fill_picker, window.form
    assert picker.label.text() == FILL_PROMPT == "On a skipped step:"
    choices = [picker.combo.itemText(i) for i in range(picker.combo.count())]
    assert choices == ["reuse the last change", "forecast it"]
    assert form.fill == "reuse" and picker.current_fill() == "reuse"

    with qtbot.waitSignal(form.fill_changed):
        pick(picker, "forecast")
    assert form.fill == "forecast"
    assert "forecast of the change" in picker.combo.toolTip()
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert engine.requests[-1].fill == "forecast"
    details = window.run_details.figures.text()
    assert "On a skipped step: forecast it (adds a first-order forecast" in details

    assert window.session.select_variant("flux2-klein-base-4b")  # its own: the default
    assert form.fill == "reuse" and picker.current_fill() == "reuse"
    assert window.session.select_variant("demo")  # the demo's choice comes back
    assert form.fill == "forecast" and picker.current_fill() == "forecast"
    form.remember()
    assert form.settings.fills == {"demo": "forecast"}


def test_settings_keep_a_fill_per_variant_and_drop_an_unknown_one() -> None:
    settings, warnings = settings_from_json({"fills": {"demo": "forecast"}})
    assert settings.fills == {"demo": "forecast"} and warnings == []
    settings, warnings = settings_from_json({"fills": {"demo": "taylor"}})
    assert settings.fills == Settings().fills == {}
    assert warnings and "unknown fill 'taylor'" in warnings[0]


def test_the_timeline_marks_a_forecast_skip_and_says_what_each_step_added() -> None:
    forecast = step(3, Decision.skipped, **{REACH: 1.0})
    reused = step(1, Decision.skipped, **{REACH: 0.0})
    checked = step(4, Decision.computed, **{ERROR: 0.031, REUSE_ERROR: 0.052})
    assert forecast_mark(forecast) and not forecast_mark(reused) and not forecast_mark(checked)
    assert not forecast_mark(None)
    assert "added a forecast of the change, 1 step past the last computed one" in describe_step(
        forecast, Pass.gated
    )
    assert "added the last computed change as it was" in describe_step(reused, Pass.gated)
    assert fill_step_lines(checked) == [
        "fill check: the skipped steps before were off by up to 0.031 of this step's change "
        "(reusing: 0.052)"
    ]
    assert "fill check" not in describe_step(checked, Pass.vanilla)  # a vanilla step: none


def test_details_say_which_fill_ran_and_how_its_checks_went() -> None:
    steps = [
        step(0, Decision.forced),
        step(1, Decision.skipped, **{REACH: 0.0}),
        step(2, Decision.computed, **{ERROR: 0.05, REUSE_ERROR: 0.05}),
        step(3, Decision.skipped, **{REACH: 1.0}),
        step(4, Decision.computed, **{ERROR: 0.02, REUSE_ERROR: 0.06}),
        step(5, Decision.forced),
    ]
    lines = fill_detail_lines("forecast", steps)
    assert lines[0].startswith("On a skipped step: forecast it (adds a first-order forecast")
    assert lines[1] == "Forecast on 1 of 2 skipped steps"
    assert lines[2] == (
        "Fill check after 2 streaks (0 = exact, relative to the next computed step's change): "
        "worst 0.050 before step 3 (reusing: 0.050); mean 0.035 (reusing: 0.055)"
    )
    reuse = fill_detail_lines("reuse", [])
    assert reuse == ["On a skipped step: reuse the last change (adds the last computed step's "
                     "change unchanged)"]  # fmt: skip
