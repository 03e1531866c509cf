"""The window's "Start from a picture" panel (``InputModel`` / ``InputPanel``): choosing, dropping
and clearing a picture, the strength slider where the model has one, the size following the
picture, the run from it on the scripted engine with the timeline marking the steps strength
left out, and a run reopened from the history bringing its picture back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.engine.request import DEFAULT_STRENGTH
from app.paths import DEMO_SKETCH
from app.storage.settings import Settings
from app.ui.form_model import FormModel
from app.ui.input_model import InputModel
from app.ui.job_slot import JobStatus
from app.ui.theme import NOT_RUN_LABEL

STEPS = 10


def _picture(tmp_path: Path, size: tuple[int, int] = (200, 120), name: str = "photo.png") -> Path:
    path = tmp_path / name
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
    return path


def _models() -> tuple[FormModel, InputModel]:
    form = FormModel(Settings(), memory_bytes=64 * 1024**3)
    return form, InputModel(form)


def test_a_chosen_picture_goes_into_the_request_with_its_strength(qtbot: QtBot) -> None:
    form, inputs = _models()
    form.select_variant("demo")
    form.steps = STEPS
    assert form.request().images == ()  # from noise until a picture is chosen
    assert inputs.use_sample()
    request = form.request()
    assert request.images[0].path == str(DEMO_SKETCH.resolve())
    assert request.strength == DEFAULT_STRENGTH == inputs.strength
    assert inputs.label() == "sketch.png · 128 × 128"
    assert inputs.note == (
        "Strength 0.60: the first 4 of 10 steps never run; the gate decides among the last 6."
    )
    inputs.set_strength(0.3)
    assert form.request().strength == 0.3 and "first 7 of 10" in inputs.note
    form.steps = 20
    assert "first 14 of 20" in inputs.note  # the note follows the steps
    inputs.clear()
    assert inputs.picture is None and form.request().images == () and inputs.note == ""


def test_a_refused_file_says_why_in_one_sentence_and_keeps_the_picture(
    qtbot: QtBot, tmp_path: Path
) -> None:
    _form, inputs = _models()
    assert inputs.use_sample()
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    assert not inputs.choose(text)
    assert inputs.message.startswith("The picture") and inputs.message.endswith(".")
    assert "\n" not in inputs.message
    assert inputs.picture is not None and inputs.picture.name == "sketch.png"
    assert inputs.use_sample() and inputs.message == ""


def test_the_size_follows_the_picture_where_the_model_draws_any_size(
    qtbot: QtBot, tmp_path: Path
) -> None:
    form, inputs = _models()
    form.select_variant("flux2-klein-base-4b")
    assert inputs.choose(_picture(tmp_path, (200, 120)))
    assert form.size == (192, 112)  # mflux's rule: down to 16s
    form.size = (512, 512)  # a size set afterwards stays
    assert form.request().width == 512
    form.select_variant("demo")
    assert inputs.choose(_picture(tmp_path, (300, 200), "big.png"))
    assert form.size == (128, 128)  # the demo draws one size


def test_a_model_without_img2img_keeps_the_picture_but_does_not_use_it(
    qtbot: QtBot, tmp_path: Path
) -> None:
    form, inputs = _models()
    assert inputs.use_sample()
    form.select_variant("flux3-image-klein")
    assert not inputs.offered
    assert "cannot start from a picture" in inputs.unused and inputs.note == ""
    assert form.request().images == ()
    form.select_variant("demo")
    assert inputs.offered and inputs.unused == "" and form.request().images


def test_the_panel_binds_to_the_model(make_window: WindowFactory, qtbot: QtBot) -> None:
    window = make_window()
    panel, inputs = window.input_panel, window.studio.inputs
    window.form.select_variant("demo")
    assert not panel.clear_button.isVisible() and not panel.strength_row.isVisible()
    qtbot.mouseClick(panel.sample_button, Qt.MouseButton.LeftButton)
    assert inputs.picture is not None
    assert panel.name.text() == "sketch.png · 128 × 128"
    assert not panel.thumbnail.pixmap().isNull()
    assert panel.clear_button.isVisible() and panel.strength_row.isVisible()
    panel.strength.setValue(45)
    assert inputs.strength == 0.45 and panel.strength_value.text() == "0.45"
    inputs.set_strength(0.8)
    assert panel.strength.value() == 80
    window.form.select_variant("flux3-image-klein")
    assert not panel.strength_row.isVisible() and panel.unused.isVisible()
    window.form.select_variant("demo")
    qtbot.mouseClick(panel.clear_button, Qt.MouseButton.LeftButton)
    assert inputs.picture is None and panel.name.text() == "From noise: no picture."


def test_a_picture_dropped_on_the_window_is_chosen(
    make_window: WindowFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    window = make_window()
    window.form.select_variant("demo")
    path = _picture(tmp_path, (128, 128))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    target = window.timeline  # a part of the window that takes no drops itself
    at = target.rect().center()
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(at, Qt.DropAction.CopyAction, mime, buttons, keys)
    QApplication.sendEvent(target, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(at), Qt.DropAction.CopyAction, mime, buttons, keys)
    QApplication.sendEvent(target, drop)
    assert window.studio.inputs.picture is not None
    assert window.studio.inputs.picture.path == str(path.resolve())


def test_a_run_from_a_picture_marks_the_steps_strength_left_out(
    make_window: WindowFactory, qtbot: QtBot
) -> None:
    window = make_window()
    window.form.select_variant("demo")
    window.form.steps = STEPS
    window.studio.inputs.use_sample()
    window.studio.inputs.set_strength(0.6)
    assert run_to_end(qtbot, window) is JobStatus.finished
    request = window.run.request
    assert request is not None and request.images and request.steps_left_out == 4
    # both passes ran the steps after the strength's, side by side as from noise
    assert len(window.run.gated_steps) == len(window.run.vanilla_steps) == 6
    assert window.run.gated_image is not None and window.run.vanilla_image is not None
    window.results.refresh_timeline()
    timeline = window.timeline
    assert timeline.left_out == 4
    first = timeline.cell_rect(timeline_pass(), 0).center().toPoint()
    tip = timeline.tooltip_at(first) or ""
    assert NOT_RUN_LABEL.lower() in tip and "step 5" in tip
    ran = timeline.cell_rect(timeline_pass(), 4).center().toPoint()
    assert "Step 5 of 10" in (timeline.tooltip_at(ran) or "")
    assert window.legend.not_run_label.isVisible()
    window.results.refresh_plot()
    assert window.gate_plot.not_run.isVisible()
    assert window.gate_plot.not_run.getRegion() == pytest.approx((0.5, 4.5))
    # the banner says before the next run what strength leaves the gate
    texts = " ".join(n.message for n in window.notices.notices())
    assert "the first 4 of the 10 steps never run" in texts


def timeline_pass():  # the gated row
    from app.engine.events import Pass

    return Pass.gated


def test_a_reopened_run_brings_its_picture_back(make_window: WindowFactory, qtbot: QtBot) -> None:
    window = make_window()
    window.form.select_variant("demo")
    window.form.steps = STEPS
    inputs = window.studio.inputs
    inputs.use_sample()
    inputs.set_strength(0.7)
    assert run_to_end(qtbot, window) is JobStatus.finished
    inputs.clear()
    inputs.set_strength(0.3)
    [entry] = window.history.entries()
    assert (entry.folder / "input-0.png").is_file()
    assert window.open_history_entry(entry)
    assert inputs.picture is not None and inputs.picture.name == "sketch.png"
    assert inputs.strength == 0.7
    assert window.session.result_caption() == ""  # the inputs are the run's again
    inputs.clear()  # the caption says what made the shown result
    assert window.session.result_caption().endswith("from sketch.png at strength 0.7")
