"""Calibrate This Model… in the window (``app.ui.calibrate_model``, ``app.ui.calibrate_view``):
open the dialog from the Model menu or the calibration note, start, follow the progress and the
time left, and at the end the picker holds ``<variant>+<name>``, selected with TeaCache as its
gate; Cancel, a model that does not load and bad input save nothing. The scripted fake engine
behind the real engine thread, and once the real demo engine."""

from __future__ import annotations

import json
import struct
from html import escape
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, FakeModelStore, WindowFactory

from app.engine.request import LoraSpec
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.gate.kinds import gate_kind
from app.ui.calibrate_model import ModelCalibrator, format_duration
from app.ui.calibrate_view import CalibrateDialog
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow
from app.variants import all_variants
from app.variants.user import calibrations_dir
from tests.fakes.engine import FakeEngine, FakeFailure, FakeScript, StepGate
from tests.fakes.steps import tea_step

PROMPTS = "\n".join(DEMO_PROMPTS[:4])


def _open(window: MainWindow, *, steps: int = 8) -> CalibrateDialog:
    window.form.steps = steps
    window.calibrate_action.trigger()  # Model ▸ Calibrate This Model…
    dialog = window.calibrate_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def _start(qtbot: QtBot, window: MainWindow, dialog: CalibrateDialog, name: str) -> None:
    dialog.prompts.setPlainText(PROMPTS)
    dialog.name.setText(name)
    with qtbot.waitSignal(window.host.busy_changed, timeout=SIGNAL_TIMEOUT_MS):
        dialog.start_button.click()


def _wait_idle(qtbot: QtBot, window: MainWindow) -> None:
    if window.host.busy:
        with qtbot.waitSignal(
            window.host.busy_changed,
            check_params_cb=lambda busy: not busy,
            timeout=SIGNAL_TIMEOUT_MS,
        ):
            pass
    window.host.flush()


def _nothing_saved() -> bool:
    folder = calibrations_dir()
    return not folder.exists() or not any(folder.glob("*.json"))


def test_calibrate_follows_progress_and_selects_the_saved_calibration(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    gate = StepGate()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _open(window)
    assert dialog.calibrator.base_variant().id == "demo"
    assert dialog.prompts.toPlainText() == "\n".join(DEMO_PROMPTS)  # the suggested prompts
    assert dialog.name.text().startswith("cal-")
    assert "8 steps" in dialog.target.text()
    _start(qtbot, window, dialog, "mine")
    calibrator = window.calibrator
    assert calibrator.status is JobStatus.running
    assert not dialog.prompts.isEnabled() and dialog.cancel_button.isEnabled()
    assert not window.controls.generate_button.isEnabled()  # the engine is busy

    # Hold the engine in the second prompt: the bar and the line follow the steps.
    gate.release(8 + 3)
    qtbot.waitUntil(lambda: calibrator.prompts_done == 1 and calibrator.steps_done == 3,
                    timeout=SIGNAL_TIMEOUT_MS)  # fmt: skip
    assert calibrator.progress() == pytest.approx((1 + 3 / 8) / 4)
    qtbot.waitUntil(lambda: dialog.progress.value() == round(1000 * (1 + 3 / 8) / 4))
    assert dialog.status.text().startswith("Prompt 2 of 4 · about ")
    assert dialog.status.text().endswith(" left for the prompts")  # the thresholds follow

    gate.open()
    _wait_idle(qtbot, window)
    assert calibrator.status is JobStatus.finished
    # The picker lists it and it is selected, TeaCache its gate at its own threshold.
    picker = window.controls.variant_picker
    assert "demo+mine" in picker.variant_rows() and picker.current_variant_id() == "demo+mine"
    assert window.form.variant_id == "demo+mine" and window.form.gate == "teacache"
    assert window.form.steps == 8
    assert window.settings.last_variant == "demo+mine"
    text = dialog.result_text.text()
    assert "TeaCache" in text and "MagCache" in text and "Saved as" in text
    assert "R²" not in text  # plain words; the figures are the Details
    dialog.details_button.click()
    assert dialog.details.isVisible() and "R²" in dialog.details.text()
    assert "Provenance: teacache-studio calibrate" in dialog.details.text()
    assert dialog.start_button.text() == "Calibrate Again" and dialog.name.text() != "mine"


def test_the_dialog_says_which_threshold_was_chosen_and_why(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """After the prompts, the dialog follows the threshold trials (how many is known at their
    end: the bar is busy), then says each gate's threshold and where it comes from; the window
    opens on the chosen one."""
    gate = StepGate()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _open(window, steps=12)
    _start(qtbot, window, dialog, "chosen")
    calibrator = window.calibrator
    gate.release(4 * 12)  # every prompt's vanilla pass; the trials then wait
    qtbot.waitUntil(lambda: calibrator.choosing, timeout=SIGNAL_TIMEOUT_MS)
    qtbot.waitUntil(lambda: calibrator.trying is not None, timeout=SIGNAL_TIMEOUT_MS)
    qtbot.waitUntil(
        lambda: dialog.status.text().startswith("Choosing thresholds on your prompts: "),
        timeout=SIGNAL_TIMEOUT_MS,
    )
    assert " of 4 (0 passes done)" in dialog.status.text()
    assert calibrator.progress() == -1.0 and dialog.progress.maximum() == 0  # busy
    gate.open()
    _wait_idle(qtbot, window)
    assert calibrator.status is JobStatus.finished
    result = calibrator.result
    assert result is not None and calibrator.trials_done > 0
    text = dialog.result_text.text()
    assert "carried over" not in text
    for choice in result.choices:
        assert escape(f"{gate_kind(choice.gate).label}'s threshold: ") in text
        assert escape(choice.reason[1:]) in text  # the sentence, capitalised
    teacache = next(c for c in result.choices if c.gate == "teacache")
    assert teacache.threshold is not None and teacache.source == "rule"
    assert window.form.gate == "teacache" and window.form.threshold == teacache.threshold
    assert f"at threshold {teacache.threshold:g}." in text
    assert dialog.status.text().startswith(f"Done: 4 prompts measured and {calibrator.trials_done}")
    dialog.details_button.click()
    assert "TeaCache threshold, by the most skipped steps" in dialog.details.text()


def _click_start(dialog: CalibrateDialog, name: str) -> None:
    """Start with the prompts and ``name``; whether it started is the caller's to check."""
    dialog.prompts.setPlainText(PROMPTS)
    dialog.name.setText(name)
    dialog.start_button.click()


def test_calibrate_again_on_a_user_calibration_replaces_it_and_a_cancel_keeps_it(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """With a user calibration selected (the one just made), Calibrate Again measures its base
    again: it runs, saves the new one and selects it; cancelled, it keeps the one selected."""
    gate = StepGate()
    gate.open()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _open(window)
    _start(qtbot, window, dialog, "mine")
    _wait_idle(qtbot, window)
    assert window.form.variant_id == "demo+mine"
    assert dialog.start_button.text() == "Calibrate Again"

    _click_start(dialog, "again")
    assert window.calibrator.status is JobStatus.running, dialog.error.text()
    _wait_idle(qtbot, window)
    calibrator = window.calibrator
    assert calibrator.status is JobStatus.finished, dialog.error.text()
    assert calibrator.job is not None and calibrator.job.request.variant_id == "demo"  # the base
    assert window.form.variant_id == "demo+again" and window.form.gate == "teacache"
    assert {"demo+mine", "demo+again"} <= set(all_variants())
    assert dialog.start_button.text() == "Calibrate Again"

    gate.hold()
    _click_start(dialog, "halfway")
    assert calibrator.status is JobStatus.running, dialog.error.text()
    qtbot.waitUntil(lambda: gate.waiting_at is not None, timeout=SIGNAL_TIMEOUT_MS)  # held
    dialog.cancel_button.click()
    _wait_idle(qtbot, window)
    assert calibrator.status is JobStatus.cancelled
    assert window.form.variant_id == "demo+again" and "demo+halfway" not in all_variants()


@pytest.mark.parametrize("ending", ["finished", "cancelled"])
def test_a_reopened_dialog_does_not_show_the_last_run_as_current(
    qtbot: QtBot, make_window: WindowFactory, ending: str
) -> None:
    """Walk #39 item 9: closed after a calibration and opened again, the dialog still showed
    that run's progress, its "Done: …" or "Cancelled" line and its fit as if they were now."""
    gate = StepGate()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _open(window)
    _start(qtbot, window, dialog, "before")
    if ending == "cancelled":
        gate.release(2)
        qtbot.waitUntil(lambda: window.calibrator.steps_done == 2, timeout=SIGNAL_TIMEOUT_MS)
        dialog.cancel_button.click()
    else:
        gate.open()
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus(ending)
    assert dialog.status.isVisible() or dialog.error.isVisible()  # shown while it is current
    dialog.close()

    window.calibrate_action.trigger()  # Model ▸ Calibrate This Model… again
    assert window.calibrate_dialog is dialog and dialog.isVisible()
    for widget in (dialog.progress, dialog.status, dialog.error, dialog.outcome):
        assert not widget.isVisible(), widget
    assert dialog.start_button.text() == "Calibrate" and dialog.start_button.isEnabled()
    assert dialog.name.text() != "before"  # a free name again


def test_cancel_midway_saves_nothing(qtbot: QtBot, make_window: WindowFactory) -> None:
    gate = StepGate()
    window = make_window(FakeEngine(step_gate=gate))
    dialog = _open(window)
    _start(qtbot, window, dialog, "halfway")
    gate.release(8 + 2)
    qtbot.waitUntil(lambda: window.calibrator.prompts_done == 1, timeout=SIGNAL_TIMEOUT_MS)
    dialog.cancel_button.click()
    assert window.calibrator.status is JobStatus.cancelling
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.cancelled
    assert dialog.error.isVisible() and "nothing was saved" in dialog.error.text()
    assert _nothing_saved() and "demo+halfway" not in all_variants()
    assert "demo+halfway" not in window.controls.variant_picker.variant_rows()
    assert window.form.variant_id == "demo"


# A model folder's path as the real loader reports it ("checking the files in <root>"): one line
# wider than the dialog.
LONG_LOAD_LINE = (
    "checking the files in /Users/someone/Library/Application Support/Models/"
    "flux1-dev-my-own-finetune-of-the-autumn-leaves-series-saved-with-mflux-save-at-4-bit"
)


def test_the_dialog_keeps_its_width_from_idle_through_a_run_to_done(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """The dialog is as wide while a run loads, measures and ends as it was before: the status
    line wraps (a long load line included) instead of widening the dialog."""
    gate = StepGate()
    slow_load = FakeScript(load_seconds=60.0, load_messages=(LONG_LOAD_LINE,))
    window = make_window(FakeEngine(scripts=[slow_load], step_gate=gate))
    dialog = _open(window)
    qtbot.waitExposed(dialog)
    idle = dialog.width()
    widths: dict[str, int] = {}

    def settle(state: str) -> None:
        qtbot.wait(50)  # the layout's resize is a posted event
        widths[state] = dialog.width()

    _start(qtbot, window, dialog, "wide")
    qtbot.waitUntil(lambda: "Users/someone" in dialog.status.text(), timeout=SIGNAL_TIMEOUT_MS)
    settle("loading")
    dialog.cancel_button.click()  # the load waits on cancel
    _wait_idle(qtbot, window)
    settle("cancelled")
    _start(qtbot, window, dialog, "wide")  # loads again, quickly, then holds before each step
    gate.release(3)
    qtbot.waitUntil(lambda: window.calibrator.steps_done == 3, timeout=SIGNAL_TIMEOUT_MS)
    settle("measuring")
    gate.open()
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.finished
    settle("done")
    assert widths == dict.fromkeys(("loading", "cancelled", "measuring", "done"), idle)


def test_a_model_that_fails_to_load_is_one_sentence(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    sentence = "mflux could not load the model: a weight file is damaged"
    window = make_window(FakeEngine(FakeScript(failure=FakeFailure(sentence, which=None))))
    dialog = _open(window)
    _start(qtbot, window, dialog, "broken")
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.failed
    assert dialog.error.text() == "Mflux could not load the model: a weight file is damaged. " \
        "Nothing was saved."  # fmt: skip
    assert _nothing_saved() and window.form.variant_id == "demo"


@pytest.mark.parametrize(
    ("prompts", "name", "message"),
    [
        (DEMO_PROMPTS[0], "one", "At least 2 prompts, got 1"),
        (PROMPTS, "Bad Name", "Calibration name 'Bad Name'"),
        (DEMO_PROMPTS[0] + "\na purple elephant", "zoo", "elephant"),
    ],
)
def test_bad_input_is_refused_in_one_sentence_before_anything_runs(
    make_window: WindowFactory, prompts: str, name: str, message: str
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    dialog = _open(window)
    dialog.prompts.setPlainText(prompts)
    dialog.name.setText(name)
    dialog.start_button.click()
    assert window.calibrator.run_id is None and not window.host.busy and engine.requests == []
    assert dialog.error.isVisible() and message.lower() in dialog.error.text().lower()
    assert _nothing_saved()


def test_a_name_taken_is_refused(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window()
    dialog = _open(window)
    _start(qtbot, window, dialog, "taken")
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.finished
    window.session.select_variant("demo")
    window.show_calibration()
    assert dialog.name.text() != "taken"  # the default is always a free name
    dialog.name.setText("taken")
    dialog.start_button.click()
    assert window.calibrator.status is JobStatus.idle
    assert "'taken' already exists for demo" in dialog.error.text()


def test_a_name_with_a_space_says_why_before_and_when_it_is_refused(
    make_window: WindowFactory,
) -> None:
    """Walk #39 item 11: "my cal" showed "Will be saved as demo+my cal", a name it would then
    refuse. The line under the name says at once why it cannot be saved and which name would do;
    Calibrate refuses it in the same words and runs nothing; the suggested name saves."""
    engine = FakeEngine()
    window = make_window(engine)
    dialog = _open(window)
    dialog.prompts.setPlainText(PROMPTS)
    dialog.name.setText("my cal")
    line = dialog.saved_as.text()
    assert "demo+my cal" not in line and "no spaces" in line and "'my-cal' would do" in line
    dialog.start_button.click()
    assert window.calibrator.run_id is None and engine.requests == [] and _nothing_saved()
    assert dialog.error.isVisible() and dialog.error.text() == line
    dialog.name.setText("my-cal")
    assert dialog.saved_as.text() == "Will be saved as demo+my-cal"


def _lora_file(path: Path) -> Path:
    header = json.dumps({"__metadata__": {}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def test_a_calibration_under_a_lora_set_keeps_it_and_says_so(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    window = make_window(store=FakeModelStore())
    window.session.select_variant("flux1-dev")
    lora = LoraSpec(str(_lora_file(tmp_path / "ink.safetensors").resolve()), 0.75)
    window.form.loras = (lora,)
    window.form.quantize = 4
    window.form.size = (256, 256)  # the fake's SSIM at 1024² would cost seconds a prompt
    assert window.form.gate == "firstblock"  # the LoRA moved the form to the probe
    window.form.select_gate("teacache")  # TeaCache picked under the LoRA: its plot's caveat
    assert "Calibrated without this LoRA" in window.gate_advice.gate_plot_note()
    dialog = _open(window, steps=10)
    assert "With LoRA ink.safetensors × 0.75" in dialog.scope.text()
    dialog.prompts.setPlainText("a cat\na dog\na tree")
    dialog.name.setText("ink")
    with qtbot.waitSignal(window.host.busy_changed, timeout=SIGNAL_TIMEOUT_MS):
        dialog.start_button.click()
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.finished, dialog.error.text()
    assert window.form.variant_id == "flux1-dev+ink"
    assert window.form.loras == (lora,) and window.form.quantize == 4
    assert window.gate_advice.gate_plot_note() == ""  # calibrated for exactly this set
    assert "Made with LoRA ink.safetensors × 0.75" in window.controls.calibration.text()
    window.form.loras = ()
    assert window.form.gate == "firstblock"  # not calibrated for no LoRA: back on the probe
    window.form.select_gate("teacache")
    assert "Calibrated with LoRA ink.safetensors × 0.75, not with this set" in (
        window.gate_advice.gate_plot_note()
    )


def test_calibrating_from_the_probe_measures_teacache_and_opens_on_it(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    """A LoRA set opens the form on the first-block probe (TeaCache was fitted without it); the
    probe needs no calibration, so Calibrate This Model… measures the gates that do (TeaCache and
    MagCache) for that set, and the saved calibration opens on TeaCache with no note. Without the
    LoRA the form is back on the probe, saying why in one line."""
    from app.gate.kinds import calibrated_gates

    window = make_window(store=FakeModelStore())
    window.session.select_variant("flux1-dev")
    lora = LoraSpec(str(_lora_file(tmp_path / "ink.safetensors").resolve()), 0.75)
    window.form.loras = (lora,)
    window.form.size = (256, 256)
    assert window.form.gate == "firstblock" and window.form.gate_note
    dialog = _open(window, steps=10)
    dialog.prompts.setPlainText("a cat\na dog\na tree")
    dialog.name.setText("ink")
    with qtbot.waitSignal(window.host.busy_changed, timeout=SIGNAL_TIMEOUT_MS):
        dialog.start_button.click()
    _wait_idle(qtbot, window)
    assert window.calibrator.status is JobStatus.finished, dialog.error.text()
    job = window.calibrator.job
    assert job is not None and job.gates == calibrated_gates() == ("teacache", "magcache")
    assert window.form.variant_id == "flux1-dev+ink" and window.form.loras == (lora,)
    assert window.form.gate == "teacache" and window.form.gate_note == ""
    assert "TeaCache is its gate" in dialog.result_text.text()
    window.form.loras = ()
    assert window.form.gate == "firstblock"
    assert window.form.gate_note == (
        "TeaCache was calibrated with LoRA ink.safetensors × 0.75, and this run has none, so the "
        "First-block probe (which needs no calibration) is the default"
    )
    assert window.controls.calibration.text() == window.form.gate_note


def test_a_model_not_on_disk_is_refused_before_anything_runs(
    make_window: WindowFactory,
) -> None:
    window = make_window(store=FakeModelStore(missing={"flux1-dev"}))
    window.session.select_variant("flux1-dev")
    dialog = _open(window)
    dialog.prompts.setPlainText("a cat\na dog")
    dialog.start_button.click()
    assert not window.host.busy
    assert "is not on this machine: download it first" in dialog.error.text()


def test_the_time_left_follows_the_pace() -> None:
    """The estimate is elapsed × left / done, by the same measure as the bar (a fake clock)."""

    class Link:
        busy = False

        def submit(self, job: object) -> int:
            return 1

        def cancel(self) -> bool:
            return True

    from app.engine import events as ev
    from app.gate import Decision

    now = [100.0]
    form, availability = _form_stub(), _availability_stub()
    calibrator = ModelCalibrator(
        form,  # type: ignore[arg-type]
        availability,  # type: ignore[arg-type]
        Link(),  # type: ignore[arg-type]
        adopt=lambda _variant_id, _job: True,
        clock=lambda: now[0],
    )
    assert calibrator.start("\n".join(DEMO_PROMPTS[:2]), "pace") == 1
    calibrator.handle_event(ev.PassStarted(1, ev.Pass.vanilla, 10))
    assert calibrator.progress() == -1.0 and calibrator.seconds_left() is None
    for index in range(5):  # half of the first prompt, 1 s a step
        now[0] += 1.0
        step = tea_step(index, 10, Decision.computed, None, None, None, 0.0, 1.0)
        calibrator.handle_event(ev.StepDone(1, ev.Pass.vanilla, step))
    assert calibrator.progress() == pytest.approx(0.25)
    assert calibrator.seconds_left() == pytest.approx(15.0)  # 5 s for a quarter: 15 s left
    assert calibrator.progress_text() == "Prompt 1 of 2 · about 15 s left for the prompts"
    assert format_duration(125) == "2 min" and format_duration(3900) == "1 h 5 min"


def _form_stub() -> object:
    """The least of a form the calibrator reads: the demo at 10 steps."""
    from app.engine.request import make_request

    class Form:
        variant_id = "demo"
        steps, seed, size, guidance, loras, quantize = 10, 42, (128, 128), 3.0, (), None

        def request(self) -> object:
            return make_request("demo", DEMO_PROMPTS[0], steps=10)

    return Form()


def _availability_stub() -> object:
    """Every model on disk."""

    class Availability:
        def is_available(self, variant_id: str) -> bool:
            return True

    return Availability()


@pytest.mark.slow
def test_calibrate_in_the_window_on_the_real_demo_engine(
    qtbot: QtBot, make_real_window: object
) -> None:
    window = make_real_window(6)  # type: ignore[operator]
    dialog = _open(window, steps=6)
    dialog.prompts.setPlainText("\n".join(DEMO_PROMPTS[:3]))
    dialog.name.setText("real")
    with qtbot.waitSignal(window.host.busy_changed, timeout=SIGNAL_TIMEOUT_MS):
        dialog.start_button.click()
    with qtbot.waitSignal(
        window.host.busy_changed, check_params_cb=lambda busy: not busy, timeout=120_000
    ):
        pass
    window.host.flush()
    assert window.calibrator.status is JobStatus.finished, dialog.error.text()
    assert window.controls.variant_picker.current_variant_id() == "demo+real"
    data = json.loads((calibrations_dir() / "demo+real.json").read_text(encoding="utf-8"))
    assert len(data["pairs"]["x"]) == 3 * 5 and len(data["magcache"]["ratios"]) == 6
