"""Issue #16 item 8: export with the extension added, metadata and a confirmation; every image can
be saved, copied and dragged out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QContextMenuEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory, image_rgb, run_to_end

from app.ui.images import IMAGE_NAMES
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow


def _finished(
    qtbot: QtBot, make_window: WindowFactory
) -> tuple[MainWindow, np.ndarray, np.ndarray]:
    window = make_window()
    assert run_to_end(qtbot, window) is JobStatus.finished, window.run.error
    gated, vanilla = window.run.gated_image, window.run.vanilla_image
    assert gated is not None and vanilla is not None
    return window, gated, vanilla


def _text_chunks(path: Path) -> dict[str, str]:
    with Image.open(path) as image:
        return dict(image.text)  # type: ignore[attr-defined]


def test_export_adds_png_writes_metadata_and_confirms_in_the_status_bar(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    window, _, _ = _finished(qtbot, make_window)
    out = window.export_current(tmp_path / "my export")
    assert out is not None and out == tmp_path / "my export.png" and out.is_file()
    assert window.statusBar().currentMessage() == f"Exported {out}"
    text = _text_chunks(out)
    request = window.run.request
    assert request is not None
    assert text["prompt"] == request.prompt and text["seed"] == str(request.seed)
    assert (text["variant"], text["steps"]) == (request.variant_id, str(request.steps))
    assert float(text["threshold"]) == request.threshold
    assert text["skips"] == str(window.run.skips)
    assert window.run.ssim is not None and float(text["ssim"]) == window.run.ssim
    assert window.run.gated_seconds is not None
    assert float(text["gated_seconds"]) == window.run.gated_seconds
    assert json.loads(text["teacache"])["variant"] == request.variant_id


def test_export_to_an_unwritable_place_says_so_once(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    window, _, _ = _finished(qtbot, make_window)
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    assert window.export_current(blocker / "inside.png") is None
    assert window.run.error is not None and "could not export" in window.run.error.message
    assert blocker.read_text() == "not a folder"  # nothing the user made is lost


def test_copy_puts_each_image_on_the_clipboard(qtbot: QtBot, make_window: WindowFactory) -> None:
    window, gated, vanilla = _finished(qtbot, make_window)
    compare = window.compare
    for index, array in enumerate((gated, vanilla)):
        QGuiApplication.clipboard().clear()
        menu = compare.image_menu(index)
        copy = next(a for a in menu.actions() if a.text().startswith("Copy"))
        assert copy.isEnabled()
        copy.trigger()
        assert np.array_equal(image_rgb(QGuiApplication.clipboard().image()), array)
        assert window.statusBar().currentMessage() == f"Copied the {IMAGE_NAMES[index]} image"
    difference = compare.rgb_image(2)
    assert difference is not None and difference.shape == (*gated.shape[:2], 3)


def test_save_writes_the_pane_with_the_runs_metadata(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    window, _, vanilla = _finished(qtbot, make_window)
    out = window.compare.save_image(1, tmp_path / "vanilla copy")
    assert out is not None and out == tmp_path / "vanilla copy.png"
    with Image.open(out) as image:
        assert np.array_equal(np.asarray(image.convert("RGB")), vanilla)
    text = _text_chunks(out)
    assert text["image"] == "Vanilla" and text["seed"] == str(window.form.seed)
    assert window.statusBar().currentMessage() == f"Saved {out}"


def test_drag_carries_the_image_and_a_png_file(qtbot: QtBot, make_window: WindowFactory) -> None:
    window, gated, _ = _finished(qtbot, make_window)
    data = window.compare.drag_data(0)
    assert data is not None and data.hasImage() and data.hasUrls()
    image = data.imageData()
    assert isinstance(image, QImage) and np.array_equal(image_rgb(image), gated)
    path = Path(data.urls()[0].toLocalFile())
    assert path.suffix == ".png"
    with Image.open(path) as png:
        assert np.array_equal(np.asarray(png.convert("RGB")), gated)
        assert dict(png.text)["image"] == "TeaCache"  # type: ignore[attr-defined]


def test_right_click_on_an_image_opens_its_menu(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window()
    viewport = window.compare.views[1].viewport()
    event = QContextMenuEvent(
        QContextMenuEvent.Reason.Mouse, QPoint(10, 10), viewport.mapToGlobal(QPoint(10, 10))
    )
    assert event.type() == QEvent.Type.ContextMenu
    QApplication.sendEvent(viewport, event)

    def menu_shown() -> None:
        menus = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMenu)]
        assert any(
            m.isVisible() and "Save Vanilla Image…" in [a.text() for a in m.actions()]
            for m in menus
        )

    qtbot.waitUntil(menu_shown, timeout=SIGNAL_TIMEOUT_MS)
    menu = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMenu) and w.isVisible())
    # No image yet: the actions are there but disabled (nothing to save or copy).
    assert not any(a.isEnabled() for a in menu.actions())
    menu.close()


def test_history_export_adds_png_and_confirms(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path
) -> None:
    window, _, _ = _finished(qtbot, make_window)
    qtbot.waitUntil(lambda: bool(window.run.saved_entry), timeout=SIGNAL_TIMEOUT_MS)
    dialog = window.show_history()
    qtbot.addWidget(dialog)
    dialog.list.setCurrentRow(0)
    out = dialog.export_selected(tmp_path / "from history")
    assert out is not None and out == tmp_path / "from history.png" and out.is_file()
    assert dialog.export_status.isVisible() and dialog.export_status.text() == f"Exported {out}"
    assert _text_chunks(out)["seed"] == str(window.form.seed)
    blocker = tmp_path / "a file"
    blocker.write_text("x")
    assert dialog.export_selected(blocker / "inside.png") is None
    assert dialog.export_status.text().startswith("Could not export to")


def test_export_is_off_until_there_is_a_result_and_never_says_cannot_generate(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Ctrl+E before any run was a red "Cannot generate" banner (#27 item 16)."""
    window = make_window()
    assert not window.export_action.isEnabled()
    window.export_action.trigger()  # Ctrl+E: a disabled action does nothing
    assert window.run.error is None
    assert not window.exporter.can_export()  # asked directly, it names the action that failed
    assert window.run.error is not None and window.run.error.title == "Cannot export"
    window.notices.dismiss("error")
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert window.export_action.isEnabled()


def test_show_folder_that_cannot_be_opened_says_so_with_the_path(
    qtbot: QtBot, make_window: WindowFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History ▸ Show Folder did nothing visible where no file manager answers (#27 item 14)."""
    from PySide6.QtGui import QDesktopServices

    window, _, _ = _finished(qtbot, make_window)
    qtbot.waitUntil(lambda: bool(window.run.saved_entry), timeout=SIGNAL_TIMEOUT_MS)
    dialog = window.show_history()
    qtbot.addWidget(dialog)
    dialog.list.setCurrentRow(0)
    opened: list[str] = []

    def no_launcher(url: object) -> bool:
        opened.append(url.toLocalFile())  # type: ignore[attr-defined]
        return False

    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(no_launcher))
    dialog.reveal_button.click()
    entry = dialog.selected()
    assert entry is not None and opened == [str(entry.folder)]
    assert dialog.export_status.isVisible()
    assert dialog.export_status.text() == (
        f"Could not open a file manager here; the run is saved in {entry.folder}"
    )


def test_history_rows_fit_the_dialog_and_read_as_the_cards_do(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """History rows were wider than the dialog (the speedup and date behind a scroll bar), had no
    local difference, and read "0 skipped · is identical" (#27 item 23)."""
    from app.ui.history_view import entry_summary

    window = make_window()
    window.form.prompt = (  # a long prompt: its row must wrap too
        "two small red stars at the left and a large striped blue circle at the right on a "
        "white background"
    )
    window.form.threshold = 0.0  # nothing skipped, the picture identical
    assert run_to_end(qtbot, window) is JobStatus.finished
    qtbot.waitUntil(lambda: bool(window.run.saved_entry), timeout=SIGNAL_TIMEOUT_MS)
    dialog = window.show_history()
    qtbot.addWidget(dialog)
    dialog.resize(480, 400)  # narrower than a row's line, whatever the font (the walk's: 720)
    qtbot.waitExposed(dialog)
    [entry] = dialog.entries
    summary = entry_summary(entry)
    assert "is identical" not in summary and f"0 of {entry.request.steps} skipped" in summary
    report = entry.report
    assert report.ssim == 1.0 and report.local_diff_value == 0.0  # what the row is about
    assert "identical (SSIM 1.000, SSIMULACRA2 100, local difference 0.000)" in summary
    # The card's word, repeated, with the SSIMULACRA2 score the row shows too.
    assert window.compare.ssim_card.note.text() == "identical · SSIMULACRA2 100"
    item = dialog.list.item(0)
    longest = max(
        dialog.list.fontMetrics().horizontalAdvance(line) for line in item.text().split("\n")
    )
    viewport = dialog.list.viewport().width()
    assert longest > viewport  # the row's text is wider than the list …
    qtbot.waitUntil(lambda: dialog.list.visualItemRect(item).right() <= viewport)  # … it wraps
    assert not dialog.list.horizontalScrollBar().isVisible()
    assert dialog.list.visualItemRect(item).height() > 3 * dialog.list.fontMetrics().height()


def test_the_history_export_is_named_as_the_window_export(
    qtbot: QtBot, make_window: WindowFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two naming schemes: the window suggested teacache-demo-s42.png, History the entry's id,
    20261201-223444-497971-demo-s42.png (#27 item 20)."""
    from PySide6.QtWidgets import QFileDialog

    window, _, _ = _finished(qtbot, make_window)
    qtbot.waitUntil(lambda: bool(window.run.saved_entry), timeout=SIGNAL_TIMEOUT_MS)
    suggested: list[str] = []

    def save_dialog(_parent: object, _title: str, name: str, _filter: str) -> tuple[str, str]:
        suggested.append(Path(name).name)
        return "", ""  # the user cancels

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_dialog))
    assert window.export_current() is None
    dialog = window.show_history()
    qtbot.addWidget(dialog)
    dialog.list.setCurrentRow(0)
    assert dialog.export_selected() is None
    entry = dialog.selected()
    assert entry is not None
    assert suggested == [window.exporter.suggested_export_name()] * 2
    assert entry.id not in suggested[1]
