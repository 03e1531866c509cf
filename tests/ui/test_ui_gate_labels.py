"""Issue #27 items 4–7: every label, export, banner and setting names the gate it belongs to.

A MagCache run is captioned, exported, saved, summarised, narrated in the status bar, detailed and
listed in the history as MagCache (not TeaCache); switching the picker to MagCache judges the
schedule and draws the plot in MagCache's own numbers (not TeaCache's onset); the gate and each
gate's threshold survive a restart. pytest-qt, offscreen, the scripted fake engine (the labels
come from the request and the gate's kind, so no real pass is needed)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory, run_to_end

from app.storage.settings import SettingsStore
from app.ui.gate_picker import GatePicker
from app.ui.history_view import entry_summary
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow
from tests.fakes.engine import FakeEngine


def pick(picker: GatePicker, gate: str) -> None:
    """What a user's choice does: select the row and emit ``activated``."""
    index = picker.combo.findData(gate)
    picker.combo.setCurrentIndex(index)
    picker.combo.activated.emit(index)


def _text_chunks(path: Path) -> dict[str, str]:
    with Image.open(path) as image:
        return dict(image.text)  # type: ignore[attr-defined]


def _magcache_run(qtbot: QtBot, make_window: WindowFactory) -> tuple[MainWindow, list[str]]:
    """A finished MagCache run on the demo, and every phase the status bar was given."""
    window = make_window(FakeEngine())
    pick(window.controls.gate_picker, "magcache")
    assert window.form.gate == "magcache"
    phases: list[str] = []
    window.run.phase_changed.connect(lambda phase: phases.append(str(phase)))
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    request = window.run.request
    assert request is not None and request.gate == "magcache"
    return window, phases


def test_a_magcache_export_and_save_name_and_record_their_gate(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    """#27 item 4: the side-by-side is captioned "MagCache t=…", its PNG and a right-click
    Save record ``gate``, and the default file names differ from TeaCache's."""
    window, _ = _magcache_run(qtbot, make_window)
    threshold = window.form.threshold
    exporter = window.exporter
    caption = exporter.export_captions()["gated_caption"]
    assert caption.startswith(f"MagCache  t={threshold:.4g}") and "TeaCache" not in caption

    exported = window.export_current(tmp_path / "side by side")
    assert exported is not None
    text = _text_chunks(exported)
    assert text["gate"] == "magcache"
    assert json.loads(text["teacache"])["gate"] == "magcache"

    saved = window.compare.save_image(0, tmp_path / "gated")
    assert saved is not None
    saved_text = _text_chunks(saved)
    assert saved_text["gate"] == "magcache" and saved_text["image"] == "MagCache"

    # The history's own export (History ▸ Export Side-by-Side…) says the same.
    entry = window.history.get(Path(str(window.run.saved_entry)).name)
    assert entry is not None
    from app.storage.export import entry_captions, export_entry

    assert entry_captions(entry)["gated_caption"].startswith("MagCache")
    history_export = export_entry(entry, tmp_path / "from history")
    assert _text_chunks(history_export)["gate"] == "magcache"

    magcache_names = (exporter.suggested_export_name(), window.compare.suggested_name(0))
    assert all("magcache" in name for name in magcache_names)
    pick(window.controls.gate_picker, "teacache")
    assert run_to_end(qtbot, window) is JobStatus.finished
    teacache_names = (exporter.suggested_export_name(), window.compare.suggested_name(0))
    assert all("magcache" not in name for name in teacache_names)
    assert set(magcache_names).isdisjoint(teacache_names)
    assert exporter.export_captions()["gated_caption"].startswith("TeaCache")
    assert _text_chunks(window.export_current(tmp_path / "tea"))["gate"] == "teacache"  # type: ignore[arg-type]


def test_a_magcache_run_is_named_magcache_in_summary_status_details_and_history(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 5: the summary line, the status bar during the gated pass, Details (the
    threshold's meaning and MagCache's own provenance, no TeaCache polynomial) and the history
    rows name the gate that ran."""
    window, phases = _magcache_run(qtbot, make_window)
    summary = window.run_details.summary.full_text()
    assert summary.startswith("MagCache reused "), summary
    assert "TeaCache" not in summary

    gated_phases = [p for p in phases if " pass" in p and not p.startswith("Vanilla")]
    assert gated_phases and all(p.startswith("MagCache pass") for p in gated_phases), phases
    assert not any("TeaCache" in p for p in phases)

    figures = window.run_details.figures.text()
    assert "Polynomial:" not in figures and "rel-L1" not in figures
    assert "MagCache table:" in figures  # the table's own provenance
    assert "magnitude" in figures  # the threshold's meaning: accumulated magnitude error

    rows = [entry_summary(e) for e in window.history.entries()]
    assert any(f"MagCache t={window.form.threshold:.4g}" in row for row in rows), rows


def test_switching_to_magcache_judges_the_schedule_by_magcache_not_teacaches_onset(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 6: after a TeaCache run whose vanilla trace starts skipping only above the
    MagCache default (0.049 here against 0.02), picking MagCache raises no "cannot skip" banner:
    MagCache's table skips at 0.02. The plot redraws in MagCache's terms at its threshold."""
    window = make_window(FakeEngine())
    assert window.form.gate == "teacache"
    assert run_to_end(qtbot, window) is JobStatus.finished
    band = window.run.band
    assert band is not None and band.onset is not None
    pick(window.controls.gate_picker, "magcache")
    threshold = window.form.threshold
    assert band.onset > threshold  # TeaCache's onset would block MagCache's threshold
    assert window.gate_advice.schedule_notice() is None
    assert not [n for n in window.notices.notices() if n.key == "schedule"]
    assert "skipping begins at" in window.controls.threshold_hint.text()  # MagCache's table

    axis = window.gate_plot.plot.getPlotItem().getAxis("left")  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: axis.labelText == "accumulated error", timeout=SIGNAL_TIMEOUT_MS)
    assert window.gate_plot.threshold_line.value() == threshold  # on MagCache's axis

    assert run_to_end(qtbot, window) is JobStatus.finished  # and the run does skip
    assert window.run.skips is not None and window.run.skips > 0


def test_the_gate_and_each_gates_threshold_survive_a_restart(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 7: the typed settings keep the gate picked last and each gate's threshold."""
    window = make_window(FakeEngine())
    window.form.threshold = 0.12  # TeaCache's, remembered per variant
    pick(window.controls.gate_picker, "magcache")
    window.form.threshold = 0.03  # MagCache's, remembered beside it
    assert window.shutdown()

    again = make_window(FakeEngine())
    assert (again.form.gate, again.form.threshold) == ("magcache", 0.03)
    assert again.controls.gate_picker.current_gate() == "magcache"
    pick(again.controls.gate_picker, "teacache")
    assert again.form.threshold == 0.12
    assert again.shutdown()
    assert SettingsStore().load().thresholds["demo"] == 0.12


def test_every_tooltip_of_a_magcache_result_names_magcache(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """The cards' tooltips said "Vanilla time ÷ TeaCache time", "Steps TeaCache did not
    compute", … for any gate; so did the re-run box and the comparison's hint."""
    window, _ = _magcache_run(qtbot, make_window)
    compare = window.compare
    tips = {
        "similarity": compare.ssim_card.toolTip(),
        "gated time": compare.gated_time_card.toolTip(),
        "vanilla time": compare.vanilla_time_card.toolTip(),
        "speedup": compare.speedup_card.toolTip(),
        "skips": compare.skips_card.toolTip(),
        "re-run": window.controls.rerun.toolTip(),
        "comparison": window.show_comparison().hint.text(),
        "LoRA": window.controls.loras.toolTip(),
    }
    named = {name: "TeaCache" in tip for name, tip in tips.items()}
    assert not any(named.values()), tips
    for name in ("similarity", "gated time", "vanilla time", "speedup", "skips", "re-run"):
        assert "MagCache" in tips[name], (name, tips[name])
    from app.ui.theme import DECISION_HELP

    assert not any("TeaCache" in text for text in DECISION_HELP.values())


def test_the_timeline_row_names_the_picked_gate_before_a_run(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Picking MagCache before any run left the timeline's gated row labelled "TeaCache"."""
    window = make_window(FakeEngine())
    assert window.timeline.gate_name == "TeaCache"
    pick(window.controls.gate_picker, "magcache")
    qtbot.waitUntil(lambda: window.timeline.gate_name == "MagCache", timeout=SIGNAL_TIMEOUT_MS)
    assert window.compare.titles[0].text() == "MagCache"
    assert window.compare.gated_time_card.caption.text() == "MagCache time"
