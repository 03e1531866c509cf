"""The window's size, position and splitter positions, kept in the config folder's window.ini
between sessions (Qt's own state blobs)."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from app import paths


def _store() -> QSettings:
    return QSettings(str(paths.config_dir() / "window.ini"), QSettings.Format.IniFormat)


def save_geometry(window: QMainWindow, splitters: dict[str, QSplitter]) -> None:
    store = _store()
    store.setValue("geometry", window.saveGeometry())
    for key, splitter in splitters.items():
        store.setValue(key, splitter.saveState())
    store.sync()


def restore_geometry(window: QMainWindow, splitters: dict[str, QSplitter]) -> None:
    store = _store()
    geometry = store.value("geometry")
    if isinstance(geometry, QByteArray | bytes):
        window.restoreGeometry(QByteArray(geometry))
    for key, splitter in splitters.items():
        state = store.value(key)
        if isinstance(state, QByteArray | bytes):
            splitter.restoreState(QByteArray(state))
