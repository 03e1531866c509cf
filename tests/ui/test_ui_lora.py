"""The form's LoRA list against the fake engine: it reaches the request, the gate plot says the
calibration was fitted without it, the settings remember it per variant, and the demo refuses it."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from PIL import Image
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory, run_to_end

from app.engine.request import LoraSpec
from app.ui.history_view import entry_summary
from app.ui.job_slot import JobStatus
from app.ui.lora_list import UNAVAILABLE
from tests.fakes.engine import FakeEngine

KLEIN_BASE = "flux2-klein-base-4b"


def _lora_file(folder: Path, name: str = "ink.safetensors") -> Path:
    path = folder / name
    mx.save_safetensors(
        str(path), {"transformer_blocks.0.attn.to_q.lora_A.weight": mx.zeros((1, 4))}
    )
    return path


def test_a_lora_added_in_the_form_reaches_the_request_the_plot_note_and_the_export(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    loras = window.controls.loras
    assert not loras.isEnabled() and loras.add_button.toolTip() == UNAVAILABLE  # the demo
    window.session.select_variant(KLEIN_BASE)
    window.form.steps = 8
    window.form.size = (128, 128)  # the fake engine draws at this size: keep it small
    assert loras.isEnabled() and loras.add_button.isEnabled()
    path = _lora_file(tmp_path)
    loras.add_file(path)
    [row] = loras.rows
    row.scale.setValue(0.75)
    assert window.form.loras == (LoraSpec(str(path.resolve()), 0.75),)
    # TeaCache was calibrated without the LoRA: the form moved to the probe; the user's own pick
    # of TeaCache stays, and its plot says what its calibration was made on.
    assert window.form.gate == "firstblock"
    window.form.select_gate("teacache")
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert engine.requests[-1].loras == (LoraSpec(str(path.resolve()), 0.75),)
    qtbot.waitUntil(lambda: window.gate_plot.note.isVisible(), timeout=SIGNAL_TIMEOUT_MS)
    assert "Calibrated without this LoRA (ink.safetensors × 0.75)" in window.gate_plot.note.text()
    assert "TeaCache's calibration was made on the base model" in window.gate_plot.note.text()

    [saved] = window.history.entries()  # the run as the history keeps it
    assert saved.request.loras == (LoraSpec(str(path.resolve()), 0.75),)
    assert "LoRA ink.safetensors × 0.75" in entry_summary(saved)

    out = window.export_current(tmp_path / "side-by-side.png")
    assert out is not None
    with Image.open(out) as image:
        assert dict(image.text)["loras"] == "ink.safetensors × 0.75"  # type: ignore[attr-defined]

    # Removing it: the shown run is now stale, and its caption names the LoRA that made it.
    row.remove.click()
    assert window.form.loras == () and loras.rows == []
    assert "LoRA ink.safetensors × 0.75" in window.session.result_caption()


def test_loras_are_remembered_per_variant_and_never_for_the_demo(
    make_window: WindowFactory, tmp_path: Path
) -> None:
    window = make_window()
    window.session.select_variant(KLEIN_BASE)
    window.controls.loras.add_file(_lora_file(tmp_path))
    window.session.select_variant("demo")
    assert window.form.loras == () and window.form.request().loras == ()
    window.session.select_variant(KLEIN_BASE)
    assert [spec.name for spec in window.form.loras] == ["ink.safetensors"]
    window.close()
    again = make_window()
    assert again.form.variant_id == KLEIN_BASE
    assert [row.name.text() for row in again.controls.loras.rows] == ["ink"]


def test_a_lora_file_that_has_gone_is_shown_and_generate_says_so(
    make_window: WindowFactory, tmp_path: Path
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    window.session.select_variant(KLEIN_BASE)
    path = _lora_file(tmp_path)
    window.controls.loras.add_file(path)
    path.unlink()
    window.close()
    again = make_window(engine)
    assert again.controls.loras.rows[0].name.text() == "ink (missing)"
    assert again.session.generate() is None
    assert again.run.error is not None and "does not exist" in again.run.error.message
    assert engine.requests == []


def test_a_junk_lora_file_is_refused_when_it_is_picked(
    make_window: WindowFactory, tmp_path: Path
) -> None:
    """The walk's 2 KB of random bytes named .safetensors was listed and refused only at
    Generate; the command line refuses it at once (#27 item 11)."""
    window = make_window()
    window.session.select_variant(KLEIN_BASE)
    loras = window.controls.loras
    junk = tmp_path / "junk-lora.safetensors"
    junk.write_bytes(bytes(range(256)) * 8)
    assert not loras.add_file(junk)
    assert window.form.loras == () and loras.rows == []
    assert loras.problem.isVisible()
    assert loras.problem.text() == (
        f"junk-lora.safetensors was not added: the LoRA file {junk.resolve()} is not a "
        "readable .safetensors file."
    )
    assert loras.add_file(_lora_file(tmp_path))  # a good one goes in, and the note goes
    assert [spec.name for spec in window.form.loras] == ["ink.safetensors"]
    assert not loras.problem.isVisible()


def test_the_lora_note_names_the_calibration_of_the_gate_that_ran(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    """Under MagCache the note said "the gate's polynomial" (MagCache's calibration is a
    table): it names the calibration of the gate that ran, in words true of either."""
    window = make_window(FakeEngine())
    window.session.select_variant("flux1-dev")  # calibrated for MagCache (the published table)
    window.form.select_gate("magcache")
    assert window.form.gate == "magcache"
    window.form.steps = 8
    window.form.size = (128, 128)
    window.controls.loras.add_file(_lora_file(tmp_path))
    assert window.form.gate == "firstblock"  # the LoRA moved the form to the probe...
    window.form.select_gate("magcache")  # ...and the user picks MagCache again
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    note = window.gate_plot.note.text()
    assert "Calibrated without this LoRA" in note
    assert "polynomial" not in note
    assert "MagCache's calibration was made on the base model" in note


def test_under_the_probe_a_lora_gets_no_calibration_caveat(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    """The probe needs no calibration, so a run of it under a LoRA carries no "calibrated
    without this LoRA" caveat; the sidebar says in one line why the form is on the probe."""
    window = make_window(FakeEngine())
    window.session.select_variant("flux1-dev")
    window.form.steps = 8
    window.form.size = (128, 128)
    window.controls.loras.add_file(_lora_file(tmp_path))
    assert window.form.gate == "firstblock"
    assert window.form.gate_note.startswith("TeaCache was calibrated without this LoRA")
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    assert window.run.report is not None and window.run.report.request.gate == "firstblock"
    assert window.gate_plot.note.text() == "" and not window.gate_plot.note.isVisible()
