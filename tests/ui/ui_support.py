"""Helpers shared by the window tests (importable; conftest only holds fixtures)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from app.ui.downloads import Progress
from app.ui.job_slot import JobStatus
from app.ui.window import MainWindow
from app.variants import Variant

SIGNAL_TIMEOUT_MS = 15_000  # generous for a loaded 2-core CI machine; runs take milliseconds


def image_rgb(image: QImage) -> np.ndarray:
    """A QImage's pixels as an (height, width, 3) uint8 array (a copy: the image may go)."""
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h = image.width(), image.height()
    raw = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())  # type: ignore[call-overload]
    return raw.reshape(h, image.bytesPerLine())[:, : 3 * w].reshape(h, w, 3).copy()


class FakeModelStore:
    """Every variant is on disk unless listed in ``missing``; downloads are scripted."""

    def __init__(
        self,
        missing: set[str] | None = None,
        *,
        hold: bool = False,
        fail: str | None = None,
        error: Exception | None = None,
    ) -> None:
        self.missing = set(missing or ())
        self.hold = hold
        self.fail = fail
        self.error = error  # raised as is (an expected failure, e.g. offline)
        self.downloads: list[str] = []
        self.release = threading.Event()

    def is_available(self, variant: Variant) -> bool:
        return variant.id not in self.missing

    def download_size(self, variant: Variant) -> int | None:
        return 1_500_000_000

    def download(self, variant: Variant, progress: Progress, cancel: threading.Event) -> None:
        self.downloads.append(variant.id)
        progress(0, 100, "starting")
        if self.hold:
            while not self.release.wait(0.005):
                if cancel.is_set():
                    progress(None, None, "")  # raises: the controller reports "cancelled"
        if self.error is not None:
            raise self.error
        if self.fail:
            raise RuntimeError(self.fail)
        progress(100, 100, "done")
        self.missing.discard(variant.id)


WindowFactory = Callable[..., MainWindow]


def run_to_end(qtbot: QtBot, window: MainWindow) -> JobStatus:
    """Press Generate and wait for the run's end; returns how it ended."""
    with qtbot.waitSignal(window.run_ended, timeout=SIGNAL_TIMEOUT_MS) as blocker:
        assert window.session.generate() is not None
    return blocker.args[0]  # type: ignore[index]
