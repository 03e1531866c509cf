"""Which variants are on disk, how big the others are, and downloading them (off the GUI thread).

The window codes against ``ModelStore``; ``DefaultModelStore`` adapts ``app.variants.weights``:
``snapshot_status`` (no network) for "on disk", ``estimated_download_bytes`` for the size shown in
the picker (asking the Hub for the exact size would block the GUI thread), and ``ensure_snapshot``
for the download itself, with progress and cancel. Tests pass a fake store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.errors import DownloadCancelled, UserFacingError
from app.variants import Variant

log = logging.getLogger(__name__)

Progress = Callable[[int | None, int | None, str], None]


class ModelStore(Protocol):
    def is_available(self, variant: Variant) -> bool: ...

    def download_size(self, variant: Variant) -> int | None: ...

    def download(self, variant: Variant, progress: Progress, cancel: threading.Event) -> None: ...


class DefaultModelStore:
    """Variants whose weights ship with the app are always there; the rest ask
    ``app.variants.weights``."""

    def __init__(self) -> None:
        self._loading: Any = None
        self._status: dict[str, bool] = {}
        try:  # a build without the Hub client still opens, with the shipped models only
            from app.variants import weights
        except ImportError:
            log.info("app.variants.weights is not available: real models cannot be downloaded")
        else:
            self._loading = weights

    def is_available(self, variant: Variant) -> bool:
        if variant.family.weights_shipped:
            return True
        if self._loading is None:
            return False
        if self._status.get(variant.id):
            return True  # a complete snapshot was checked (safetensors headers read) already
        try:
            on_disk = bool(self._loading.snapshot_status(variant).on_disk)
        except Exception:  # a broken check must not break the picker
            log.exception("snapshot_status(%s) failed", variant.id)
            return False
        if on_disk:
            self._status[variant.id] = True  # "missing" is cheap to re-check: never cached
        return on_disk

    def download_size(self, variant: Variant) -> int | None:
        if variant.family.weights_shipped:
            return 0
        estimate = getattr(self._loading, "estimated_download_bytes", None)
        if callable(estimate):
            value = estimate(variant)
            return int(value) if isinstance(value, int | float) else None
        return int(variant.params_billion * 2e9)  # 16-bit weights

    def download(self, variant: Variant, progress: Progress, cancel: threading.Event) -> None:
        if self._loading is None:
            raise RuntimeError(
                "this build cannot download models (app.variants.weights is missing)"
            )
        self._status.pop(variant.id, None)
        try:
            self._loading.ensure_snapshot(variant, progress=progress, cancel=cancel)
        finally:
            self._status.pop(variant.id, None)


def default_model_store() -> ModelStore:
    return DefaultModelStore()


def format_bytes(size: int | None) -> str:
    if size is None:
        return "unknown size"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit in ("B", "KB") else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


class _DownloadWorker(QObject):
    progressed = Signal(object, object, str)
    done = Signal(str, str)  # variant id, "" on success / "cancelled" / the error message

    def __init__(self, store: ModelStore, variant: Variant, cancel: threading.Event) -> None:
        super().__init__()
        self._store = store
        self._variant = variant
        self._cancel = cancel

    @Slot()
    def work(self) -> None:
        def progress(done: int | None, total: int | None, message: str = "") -> None:
            if self._cancel.is_set():
                raise DownloadCancelled
            self.progressed.emit(done, total, message)

        outcome = ""
        try:
            self._store.download(self._variant, progress, self._cancel)
            if self._cancel.is_set():
                outcome = "cancelled"
        except DownloadCancelled:
            outcome = "cancelled"
        except UserFacingError as exc:  # expected (offline, gated, disk full): one line, inline
            log.warning("download of %s failed: %s", self._variant.id, exc)
            outcome = "cancelled" if self._cancel.is_set() else str(exc)
        except Exception as exc:  # a bug: its traceback goes to the log; shown inline
            log.exception("download of %s failed", self._variant.id)
            outcome = "cancelled" if self._cancel.is_set() else (str(exc) or type(exc).__name__)
        self.done.emit(self._variant.id, outcome)


class DownloadController(QObject):
    """One download at a time on its own thread (downloads never touch MLX)."""

    started = Signal(str)
    progressed = Signal(str, object, object, str)  # variant id, done, total, message
    finished = Signal(str)
    cancelled = Signal(str)
    failed = Signal(str, str)

    def __init__(self, store: ModelStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._thread: QThread | None = None
        self._worker: _DownloadWorker | None = None
        self._cancel: threading.Event | None = None
        self.variant_id: str | None = None

    @property
    def busy(self) -> bool:
        return self.variant_id is not None

    def start(self, variant: Variant) -> bool:
        if self.busy:
            return False
        self.variant_id = variant.id
        self._cancel = threading.Event()
        thread = QThread()
        thread.setObjectName(f"download-{variant.id}")
        worker = _DownloadWorker(self.store, variant, self._cancel)
        worker.moveToThread(thread)
        thread.started.connect(worker.work)
        worker.progressed.connect(lambda d, t, m: self.progressed.emit(variant.id, d, t, m))
        worker.done.connect(self._on_done)
        self._thread, self._worker = thread, worker
        thread.start()
        self.started.emit(variant.id)
        return True

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def shutdown(self, timeout_ms: int = 3000) -> None:
        self.cancel()
        if self._thread is not None:
            self._thread.quit()
            if not self._thread.wait(timeout_ms):
                from app.ui.worker import STRAGGLERS

                STRAGGLERS.append(self._thread)

    @Slot(str, str)
    def _on_done(self, variant_id: str, outcome: str) -> None:
        if self._thread is not None:
            self._thread.quit()  # the worker has returned: its event loop stops at once
            if not self._thread.wait(5000):
                from app.ui.worker import STRAGGLERS

                STRAGGLERS.append(self._thread)
        self._thread, self._worker, self._cancel = None, None, None
        self.variant_id = None
        if not outcome:
            self.finished.emit(variant_id)
        elif outcome == "cancelled":
            self.cancelled.emit(variant_id)
        else:
            self.failed.emit(variant_id, outcome)
