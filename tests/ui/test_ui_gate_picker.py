"""The gate picker in the window (pytest-qt, offscreen, the scripted fake engine)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.gate.kinds import gate_kind
from app.ui.form_model import ui_default_threshold
from app.ui.gate_picker import GatePicker
from app.ui.job_slot import JobStatus
from app.variants import get_variant
from tests.fakes.engine import FakeEngine


def pick(picker: GatePicker, gate: str) -> None:
    """What a user's choice does: select the row and emit ``activated``."""
    index = picker.combo.findData(gate)
    picker.combo.setCurrentIndex(index)
    picker.combo.activated.emit(index)


def test_picking_magcache_changes_the_threshold_meaning_and_the_request(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    picker = window.controls.gate_picker
    form = window.form
    assert form.variant_id == "demo" and form.gate == "teacache"
    assert picker.meaning.text() == gate_kind("teacache").threshold_meaning
    assert picker.is_enabled("magcache")  # the demo ships a MagCache table
    teacache_threshold = form.threshold

    with qtbot.waitSignal(form.gate_changed):
        pick(picker, "magcache")
    assert form.gate == "magcache"
    assert form.threshold == ui_default_threshold(get_variant("demo"), "magcache")
    assert picker.meaning.text() == gate_kind("magcache").threshold_meaning
    assert "accumulated magnitude drift" in picker.meaning.text()
    assert "MagCache-eligible" in window.controls.threshold_hint.text()

    assert run_to_end(qtbot, window) is JobStatus.finished
    assert engine.requests[-1].gate == "magcache"
    assert engine.requests[-1].threshold == form.threshold

    form.threshold = 0.03  # remembered per gate: back on TeaCache the TeaCache value returns
    pick(picker, "teacache")
    assert (form.gate, form.threshold) == ("teacache", teacache_threshold)
    pick(picker, "magcache")
    assert (form.gate, form.threshold) == ("magcache", 0.03)


def test_a_variant_without_a_table_disables_magcache_with_the_reason(
    make_window: WindowFactory,
) -> None:
    window = make_window()
    picker = window.controls.gate_picker
    pick(picker, "magcache")
    assert window.form.gate == "magcache"
    assert window.session.select_variant("flux2-klein-base-4b")
    assert window.form.gate == "teacache"  # every variant has TeaCache numbers
    assert picker.current_gate() == "teacache"
    assert not picker.is_enabled("magcache")
    tooltip = picker.combo.itemData(picker.combo.findData("magcache"), Qt.ItemDataRole.ToolTipRole)
    assert "no MagCache calibration yet" in tooltip
    # How to unlock it, the window's way (#27 item 24; the command line names its command).
    assert tooltip.endswith("make one with Model ▸ Calibrate This Model…")
    pick(picker, "magcache")  # a disabled row that still got activated is refused
    assert window.form.gate == "teacache"
    assert window.session.select_variant("flux1-dev")  # a published table: enabled again
    assert picker.is_enabled("magcache")


# -- the first-block probe (issue #28) -------------------------------------------------------------


def test_the_probe_is_in_the_picker_on_every_variant_and_runs(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = FakeEngine()
    window = make_window(engine)
    picker, form = window.controls.gate_picker, window.form
    assert picker.combo.itemText(picker.combo.findData("firstblock")) == "First-block probe"
    with qtbot.waitSignal(form.gate_changed):
        pick(picker, "firstblock")
    assert form.gate == "firstblock"
    assert form.threshold == ui_default_threshold(get_variant("demo"), "firstblock")
    assert "first block may change" in picker.meaning.text()
    assert "never the first 4 or the last" in window.controls.threshold_hint.text()
    assert run_to_end(qtbot, window) is JobStatus.finished
    request = engine.requests[-1]
    assert request.gate == "firstblock" and request.threshold == form.threshold
    assert window.run.report is not None and window.run.report.gated.skipped > 0  # engagement
    for variant_id in ("flux2-klein-base-4b", "z-image-turbo", "qwen-image"):
        assert window.session.select_variant(variant_id)
        assert picker.is_enabled("firstblock"), variant_id


def test_a_lora_set_opens_on_the_probe_and_says_why(make_window: WindowFactory) -> None:
    from app.engine.request import LoraSpec

    window = make_window()
    form, calibration = window.form, window.controls.calibration
    assert window.session.select_variant("flux1-dev")
    assert form.gate == "teacache" and form.gate_note == ""
    form.loras = (LoraSpec("/loras/style.safetensors", 1.0),)
    assert form.gate == "firstblock"
    assert form.gate_note.startswith("TeaCache was calibrated without this LoRA")
    assert calibration.text() == form.gate_note
    assert window.controls.gate_picker.current_gate() == "firstblock"
    form.loras = ()  # without the LoRA, TeaCache's calibration fits again: back to it
    assert form.gate == "teacache" and form.gate_note == ""
    assert calibration.text() != "" and "without this LoRA" not in calibration.text()


def test_a_variant_without_teacache_numbers_opens_on_the_probe(
    make_window: WindowFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from app import variants

    window = make_window()
    bare = replace(get_variant("flux1-dev"), id="bare-model", display_name="Bare model",
                   coefficients=None, magcache=None)  # fmt: skip
    monkeypatch.setitem(variants.VARIANTS, bare.id, bare)
    picker, form = window.controls.gate_picker, window.form
    assert window.session.select_variant(bare.id)
    assert form.gate == "firstblock" and picker.current_gate() == "firstblock"
    assert form.gate_note == (
        "Bare model has no TeaCache calibration, so the First-block probe (which needs none) "
        "is the default"
    )
    assert not picker.is_enabled("teacache") and picker.is_enabled("firstblock")
    pick(picker, "teacache")  # refused: no numbers
    assert form.gate == "firstblock"
