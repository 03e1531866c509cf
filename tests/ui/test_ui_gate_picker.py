"""The gate picker in the window (pytest-qt, offscreen, the scripted fake engine)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory, run_to_end

from app.gate.kinds import gate_kind
from app.ui.form_model import ui_default_threshold
from app.ui.gate_picker import GatePicker
from app.ui.run_model import RunStatus
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

    assert run_to_end(qtbot, window) is RunStatus.finished
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
