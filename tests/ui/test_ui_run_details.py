"""The plain summary line after a run and the "Details" disclosure: collapsed by default, the
technical figures only inside it, and its state remembered in the typed settings."""

from __future__ import annotations

from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory, run_to_end

from app.storage.settings import SettingsStore
from app.ui.plain_words import CHANGE_WORDS, picture_change, short_summary
from app.ui.run_model import RunStatus
from tests.fakes.engine import FakeEngine

TECHNICAL = ("SSIM", "R²", "rel-L1", "SHA-256", "Polynomial", "sigma")


def test_summary_line_speaks_plainly_after_a_run(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window(FakeEngine())
    details = window.run_details
    assert details.summary.full_text() == ""  # nothing to say before a run
    assert run_to_end(qtbot, window) is RunStatus.finished
    r = window.run
    steps = r.request.steps if r.request is not None else 0
    assert r.skips is not None and r.skips > 0  # engagement: the run skipped steps
    assert r.ssim is not None
    summary = details.summary.full_text()
    # Shown whole where it fits, else the short form (elided only where even that does not fit).
    shown = details.summary.text()
    assert shown in (summary, short_summary(summary)) or shown.endswith("…")
    assert r.local_diff is not None  # the report's measure, the one the summary words
    band = picture_change(r.ssim, r.local_diff)
    assert summary.startswith(f"TeaCache reused {r.skips} of {steps} steps; ")
    assert summary.endswith(CHANGE_WORDS[band]) or "one spot changed visibly" in summary
    assert details.summary.isVisible()
    assert not any(word in summary for word in TECHNICAL)
    # The speedup keeps its exact honesty label; the plain line does not replace it.
    assert window.compare.speedup_card.note.text() == r.speedup_label


def test_details_hide_the_figures_until_opened_and_are_remembered(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    assert SettingsStore().load().details_expanded is False
    window = make_window(FakeEngine())
    details = window.run_details
    assert run_to_end(qtbot, window) is RunStatus.finished
    figures = details.figures.text()
    assert f"SSIM against vanilla: {window.run.ssim:.4f}" in figures
    assert "Polynomial:" in figures and "Calibration:" in figures and "R²" in figures
    assert "SHA-256" not in figures  # the fake engine's report carries no digest
    assert not details.expanded and not details.figures_shown()  # collapsed by default

    with qtbot.waitSignal(details.expanded_changed, timeout=SIGNAL_TIMEOUT_MS) as opened:
        details.toggle.click()
    assert opened.args == [True]
    qtbot.waitUntil(details.figures_shown, timeout=SIGNAL_TIMEOUT_MS)
    qtbot.waitUntil(
        lambda: details.figures.height() > 0 and details.figures.isVisible(),
        timeout=SIGNAL_TIMEOUT_MS,
    )
    assert SettingsStore().load().details_expanded is True

    again = make_window(FakeEngine())  # a new window opens it as the user left it
    assert again.run_details.expanded and again.run_details.figures_shown()

    with qtbot.waitSignal(again.run_details.expanded_changed, timeout=SIGNAL_TIMEOUT_MS) as shut:
        again.run_details.toggle.click()
    assert shut.args == [False]
    qtbot.waitUntil(lambda: not again.run_details.figures_shown(), timeout=SIGNAL_TIMEOUT_MS)
    assert SettingsStore().load().details_expanded is False


DEVELOPER_WORDS = ("teacache-studio", "mean_tokens", "@ ", "lab.", "`", "|r_i|")


def test_the_calibration_box_speaks_plainly_and_its_provenance_is_under_details(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 24: under MagCache the sidebar's calibration box held developer text (the
    calibrate command, mean_tokens(|r_i| / |r_i-1|), "Zehong-Ma/MagCache @ df81cb1"); plain
    words there, the provenance under Details, before any run too."""
    window = make_window(FakeEngine())
    window.form.select_gate("magcache")
    assert window.form.gate == "magcache"
    box = window.controls.calibration
    qtbot.waitUntil(lambda: "MagCache" in box.text(), timeout=SIGNAL_TIMEOUT_MS)
    for text in (box.text(), box.toolTip()):
        assert text and not any(w in text for w in DEVELOPER_WORDS), text
    assert "Details" in box.toolTip()

    details = window.results.run_details
    details.set_expanded(True)
    qtbot.waitUntil(lambda: "MagCache table" in details.figures.text(), timeout=SIGNAL_TIMEOUT_MS)
    figures = details.figures.text()
    assert figures.startswith("No run yet.") and "teacache-studio calibrate" in figures
    window.form.select_gate("teacache")
    qtbot.waitUntil(
        lambda: (
            "MagCache" not in details.figures.text() and "Calibration:" in details.figures.text()
        ),
        timeout=SIGNAL_TIMEOUT_MS,
    )
    assert run_to_end(qtbot, window) is RunStatus.finished
    assert "SSIM against vanilla" in details.figures.text()


def test_a_gate_without_a_calibration_points_to_the_windows_calibrate(
    make_window: WindowFactory,
) -> None:
    """The picker's reason for a greyed-out gate named a command line; the window has its own
    way (Model ▸ Calibrate This Model…). The command line keeps its command."""
    from app.variants import get_variant

    window = make_window(FakeEngine())
    window.session.select_variant("flux1-krea-dev")  # TeaCache only
    picker = window.controls.gate_picker
    assert not picker.is_enabled("magcache")
    model = picker.combo.model()
    reason = model.item(picker.combo.findData("magcache")).toolTip()  # type: ignore[attr-defined]
    assert "Calibrate This Model" in reason and "teacache-studio" not in reason, reason
    cli = get_variant("flux1-krea-dev").gate_unavailable_reason("magcache")
    assert cli is not None and "teacache-studio calibrate" in cli
