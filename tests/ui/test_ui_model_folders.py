"""File ▸ Add Model Folder…'s dialog (#27 items 3 and 12): typing never reads the disk, the
folder is examined off the GUI thread once the user pauses, presses Enter or chooses it, a folder
that cannot be read is a sentence in the dialog (never the main window's "Cannot generate"), and
every message is shown whole."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QLabel
from pytestqt.qtbot import QtBot
from ui_support import WindowFactory

from app.ui.model_folders_view import AddModelFolderDialog
from app.variants import folders, get_variant
from tests.fakes.hub import write_snapshot

# The modules that call ``inspect_folder`` by name (the model only exists since the fix).
_CALLERS = [
    name
    for name in ("app.ui.model_folders_view", "app.ui.model_folders_model")
    if importlib.util.find_spec(name) is not None
]


def spy_on_inspect(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every folder ``inspect_folder`` reads, and whether it ran on the GUI thread."""
    calls: list[tuple[str, bool]] = []
    real = folders.inspect_folder

    def spy(folder: str | Path) -> folders.FolderInfo:
        calls.append((str(folder), threading.current_thread() is threading.main_thread()))
        return real(folder)

    monkeypatch.setattr(folders, "inspect_folder", spy)
    for name in _CALLERS:
        monkeypatch.setattr(f"{name}.inspect_folder", spy, raising=False)
    return calls


def shown_whole(label: QLabel) -> bool:
    """The label is as tall as its wrapped text needs at its width (nothing cut off)."""
    return label.height() >= label.heightForWidth(label.width())


def test_typing_a_path_reads_nothing_and_the_pause_checks_it_off_the_gui_thread(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_snapshot(tmp_path / "schnell", get_variant("flux1-schnell"))
    calls = spy_on_inspect(monkeypatch)
    dialog = AddModelFolderDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.keyClicks(dialog.path, str(folder))
    assert calls == []  # each keystroke used to inspect its prefix ("/" summed the whole disk)
    add = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert not add.isEnabled()  # nothing checked yet: Enter cannot add an unchecked folder
    assert dialog.check_result.text() == "Checked once you stop typing or press Enter."
    qtbot.waitUntil(lambda: dialog.check_result.text().startswith("Complete"), timeout=10_000)
    assert calls == [(str(folder), False)]  # once, for the whole path, on a pool thread
    assert dialog.base_variant() == "flux1-schnell" and add.isEnabled()
    assert dialog.holds.text().startswith("Hugging Face snapshot, FLUX.1, full precision")


def test_enter_checks_at_once_and_a_check_of_an_older_text_is_dropped(
    qtbot: QtBot, tmp_path: Path
) -> None:
    dev = write_snapshot(tmp_path / "dev", get_variant("flux1-dev"))
    dialog = AddModelFolderDialog()
    qtbot.addWidget(dialog)
    dialog.path.setText(str(tmp_path / "nowhere"))
    with qtbot.waitSignal(dialog.checked, timeout=10_000) as shown:
        dialog.check_now()  # a check of the missing folder is under way…
        dialog.path.setText(str(dev))  # …when the field changes: only the new text's arrives
        qtbot.keyClick(dialog.path, Qt.Key.Key_Return)
    assert shown.args is not None and shown.args[0].folder == str(dev)
    assert dialog.check_result.text().startswith("Complete")


def test_a_folder_that_cannot_be_read_is_a_sentence_in_the_dialog_not_a_banner(
    qtbot: QtBot, make_window: WindowFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = make_window()
    proc = tmp_path / "proc"
    proc.mkdir()

    def denied(folder: str | Path) -> folders.FolderInfo:
        raise PermissionError(13, "Permission denied", "/proc/1/cwd")

    monkeypatch.setattr(folders, "inspect_folder", denied)
    for name in _CALLERS:
        monkeypatch.setattr(f"{name}.inspect_folder", denied, raising=False)
    dialog = AddModelFolderDialog(window, str(proc))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: "cannot be read" in dialog.check_result.text(), timeout=10_000)
    assert dialog.check_result.text() == f"{proc} cannot be read: Permission denied (/proc/1/cwd)"
    assert not dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()
    assert window.run.error is None  # the main window says nothing ("Cannot generate" before)


def test_a_long_message_is_shown_whole_the_dialog_grows(qtbot: QtBot, tmp_path: Path) -> None:
    """The walk's junk layout: the check's sentence ran to three lines and the dialog, sized
    when it opened, showed one and a half (#27 item 12)."""
    junk = tmp_path / "junk-model-folder-with-a-long-name"
    for sub in ("transformer", "vae", "text_encoder"):
        (junk / sub).mkdir(parents=True)
        (junk / sub / "diffusion_pytorch_model.safetensors").write_bytes(b"\0" * 64)
    dialog = AddModelFolderDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.path.setText(str(junk))
    qtbot.waitUntil(lambda: "incomplete or damaged" in dialog.check_result.text(), timeout=10_000)
    qtbot.waitUntil(lambda: shown_whole(dialog.check_result), timeout=2000)
    assert dialog.check_result.heightForWidth(dialog.check_result.width()) > 3 * 14  # 3+ lines
    assert shown_whole(dialog.holds)


def test_an_empty_folder_is_no_model_not_a_snapshot_of_0_mb(qtbot: QtBot, tmp_path: Path) -> None:
    dialog = AddModelFolderDialog(folder=str(tmp_path))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: "holds no model" in dialog.check_result.text(), timeout=10_000)
    assert dialog.holds.text() == "No model: there is no transformer/ folder"
