"""The window's menus and their shortcuts (File: History, Export, model folders, Quit; Model:
Calibrate This Model…; Run: Generate, Cancel, Random Seed, Reset Threshold, Compare Thresholds).
What each does is wired by the window to the Qt-free actions (``app.ui.app``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.ui.model_folders_model import ModelFolders
from app.ui.model_folders_view import ModelFolderActions


@dataclass(frozen=True)
class WindowActions:
    history: QAction
    export: QAction
    quit: QAction
    generate: QAction
    cancel: QAction
    random_seed: QAction
    reset_threshold: QAction
    compare: QAction
    calibrate: QAction
    model_folders: ModelFolderActions


def build_menus(
    window: QMainWindow, folders: ModelFolders, model_folders_changed: Callable[[], None]
) -> WindowActions:
    def action(text: str, *keys: QKeySequence | QKeySequence.StandardKey) -> QAction:
        made = QAction(text, window)
        made.setShortcuts([QKeySequence(k) for k in keys])
        return made

    menu = window.menuBar()
    file_menu = menu.addMenu("&File")
    history = action("History…", QKeySequence("Ctrl+Y"))
    export = action("Export Side-by-Side…", QKeySequence("Ctrl+E"))
    quit_action = action("Quit", QKeySequence.StandardKey.Quit)
    quit_action.setMenuRole(QAction.MenuRole.QuitRole)
    file_menu.addAction(history)
    file_menu.addAction(export)
    file_menu.addSeparator()
    model_folders = ModelFolderActions(window, folders, model_folders_changed)
    model_folders.install(file_menu)
    file_menu.addSeparator()
    file_menu.addAction(quit_action)

    model_menu = menu.addMenu("&Model")
    calibrate = action("Calibrate This Model…")
    calibrate.setToolTip("Measure this model's own pace for TeaCache and MagCache")
    model_menu.addAction(calibrate)

    run_menu = menu.addMenu("&Run")
    actions = WindowActions(
        history=history,
        export=export,
        quit=quit_action,
        generate=action("Generate", QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")),
        cancel=action("Cancel", QKeySequence(Qt.Key.Key_Escape)),
        random_seed=action("Random Seed", QKeySequence("Ctrl+R")),
        reset_threshold=action("Reset Threshold", QKeySequence("Ctrl+0")),
        compare=action("Compare Thresholds…", QKeySequence("Ctrl+Shift+T")),
        calibrate=calibrate,
        model_folders=model_folders,
    )
    for item in (
        actions.generate,
        actions.cancel,
        actions.random_seed,
        actions.reset_threshold,
        actions.compare,
    ):
        run_menu.addAction(item)
        window.addAction(item)  # shortcuts work even where the menu bar is hidden
    for item in (history, export):
        window.addAction(item)
    return actions
