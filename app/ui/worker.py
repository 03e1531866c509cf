"""One long-lived engine thread.

``EngineHost`` (GUI thread) owns a ``QThread`` and an ``EngineWorker`` moved onto it, wired like
superqt's ``new_worker_qthread``. The worker builds the engine on its own thread through a factory
(MLX streams are thread-local) and runs every job there through the one job runner
(``app.engine.jobs.run_job``). Events cross back through one queued signal. Cancel is a
``threading.Event`` handed to the runner: the worker's event loop is blocked while it generates,
so a queued "cancel" slot would arrive too late.

After a run the worker (still off the GUI thread) computes the difference image, saves the engine's
``RunReport`` to the history and only then forwards ``RunFinished``, so closing the window can
never lose a finished run. It measures nothing itself and keeps no cache: the report holds both
passes, and the engine keeps the one vanilla cache.
"""

from __future__ import annotations

import functools
import gc
import importlib
import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer, Signal, Slot

from app.engine.comparison import ComparisonResult
from app.engine.events import (
    CalibrationFinished,
    ComparisonFinished,
    EngineEvent,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
)
from app.engine.jobs import Job, run_job
from app.engine.protocol import EngineProtocol
from app.engine.report import RunReport
from app.storage.history import HistoryEntry
from app.ui.analysis import RunAnalysis, RunSaved, difference_map

log = logging.getLogger(__name__)

EngineFactory = Callable[[], EngineProtocol]
# A finished run's report and its warnings → its history entry.
SaveRun = Callable[[RunReport, tuple[dict[str, object], ...]], HistoryEntry]
# A threshold comparison's finished entries and its warnings → its one history entry.
SaveComparison = Callable[[ComparisonResult, tuple[dict[str, object], ...]], HistoryEntry]
TERMINAL = (RunFinished, RunCancelled, RunFailed, ComparisonFinished, CalibrationFinished)
DRAIN_BUDGET_MS = 8  # GUI time spent applying engine events before yielding to the event loop
# Imported on the engine thread as soon as it starts (SSIM, the engine with MLX, the demo pipeline
# with mflux), so that the first generation does not pay for them while the GUI waits on the GIL.
WARM_IMPORTS = ("skimage.metrics", "app.engine.engine", "app.demo.pipeline")
# Threads that did not stop within the close bound: kept referenced so Qt never destroys a running
# QThread (which aborts the process); the launcher exits hard if any are left.
STRAGGLERS: list[QThread] = []


@dataclass
class _Collector:
    """One run's warnings (saved with it) and whether it has ended."""

    run_id: int
    job: Job
    warnings: list[RunWarning] = field(default_factory=list)
    terminal: EngineEvent | None = None


class EngineWorker(QObject):
    """Lives on the engine thread. Never raises into Qt: every failure becomes ``RunFailed``."""

    relayed = Signal(object)
    warmed_up = Signal(float)  # seconds the warm-up imports took

    def __init__(
        self,
        factory: EngineFactory,
        save: SaveRun | None = None,
        warm_imports: tuple[str, ...] = (),
        save_comparison: SaveComparison | None = None,
    ) -> None:
        super().__init__()
        self._factory = factory
        self._warm_imports = warm_imports
        self._save = save
        self._save_comparison = save_comparison
        self._engine: EngineProtocol | None = None

    @Slot()
    def warm_up(self) -> None:
        """Import what the first run needs while the window is idle: an import holds the GIL in
        long stretches, which would stall the GUI thread in the middle of a generation."""
        started = time.perf_counter()
        for name in self._warm_imports:
            try:
                importlib.import_module(name)
            except Exception as exc:  # the run itself will report a real problem
                log.info("warm-up import of %s failed: %s", name, exc)
        # Everything imported so far lives as long as the app: keep it out of the cyclic
        # collector, whose full passes over a large heap would pause the GUI thread too.
        gc.freeze()
        self.warmed_up.emit(time.perf_counter() - started)

    @Slot(int, object, object)
    def run(self, run_id: int, job: Job, cancel: threading.Event) -> None:
        collector = _Collector(run_id, job)
        try:
            if self._engine is None:
                self._engine = self._factory()
            run_job(self._engine, run_id, job, functools.partial(self._relay, collector), cancel)
        except Exception as exc:  # the UI must see every failure
            log.exception("engine run %s failed", run_id)
            self._relay(collector, RunFailed(run_id, _one_line(exc), traceback.format_exc()))
        if collector.terminal is None:
            self._relay(
                collector,
                RunFailed(
                    run_id, "the engine stopped without reporting a result", "protocol violation"
                ),
            )

    @Slot()
    def close(self) -> None:
        try:
            if self._engine is not None:
                self._engine.close()
        except Exception:  # closing must finish
            log.exception("engine close failed")
        finally:
            self._engine = None
            app = QCoreApplication.instance()
            if app is not None:
                self.moveToThread(app.thread())  # let the GUI thread own (and delete) us
            thread = QThread.currentThread()
            thread.quit()

    # -- relaying ----------------------------------------------------------------------------------
    def _relay(self, c: _Collector, event: EngineEvent) -> None:
        if c.terminal is not None:
            return  # exactly one terminal event per run reaches the UI
        match event:
            case RunWarning():
                c.warnings.append(event)
            case RunFinished():
                c.terminal = event
                self._finish(c, event)
                return
            case ComparisonFinished():
                c.terminal = event
                self._save_finished_comparison(c, event)
                self.relayed.emit(event)
                return
            case RunCancelled() | RunFailed() | CalibrationFinished():
                c.terminal = event
        self.relayed.emit(event)

    def _finish(self, c: _Collector, finished: RunFinished) -> None:
        try:
            self._analyse_and_save(c, finished)
        except Exception as exc:  # a finished run must still finish in the UI
            log.exception("post-run analysis failed")
            self.relayed.emit(RunWarning(c.run_id, "analysis", f"could not analyse the run: {exc}"))
        self.relayed.emit(finished)

    def _save_finished_comparison(self, c: _Collector, finished: ComparisonFinished) -> None:
        if self._save_comparison is None:
            return
        warnings = tuple(
            {"kind": w.kind, "message": w.message, "details": w.details} for w in c.warnings
        )
        try:
            entry = self._save_comparison(finished.result, warnings)
        except Exception as exc:  # disk full, permissions...
            log.exception("saving comparison %s to the history failed", c.run_id)
            self.relayed.emit(
                RunWarning(c.run_id, "history", f"the comparison was not saved: {exc}")
            )
            return
        self.relayed.emit(RunSaved(c.run_id, entry.id, str(entry.folder)))

    def _analyse_and_save(self, c: _Collector, finished: RunFinished) -> None:
        report = finished.report
        vanilla = report.vanilla
        difference = difference_map(report.gated.image, vanilla.image) if vanilla else None
        self.relayed.emit(RunAnalysis(c.run_id, difference))
        if self._save is None:
            return
        warnings = tuple(
            {"kind": w.kind, "message": w.message, "details": w.details} for w in c.warnings
        )
        try:
            entry = self._save(report, warnings)
        except Exception as exc:  # disk full, permissions...
            log.exception("saving run %s to the history failed", c.run_id)
            self.relayed.emit(RunWarning(c.run_id, "history", f"the run was not saved: {exc}"))
            return
        self.relayed.emit(RunSaved(c.run_id, entry.id, str(entry.folder)))


class EngineHost(QObject):
    """The GUI side of the engine thread: submit, cancel, shut down. One run at a time."""

    event_received = Signal(object)
    busy_changed = Signal(bool)
    warmed_up = Signal(float)
    _run_requested = Signal(int, object, object)
    _close_requested = Signal()

    def __init__(
        self,
        factory: EngineFactory,
        save: SaveRun | None = None,
        parent: QObject | None = None,
        *,
        warm_imports: tuple[str, ...] = WARM_IMPORTS,
        save_comparison: SaveComparison | None = None,
    ) -> None:
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName("teacache-engine")
        self._worker = EngineWorker(factory, save, warm_imports, save_comparison)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.warm_up)
        self._run_requested.connect(self._worker.run)
        self._close_requested.connect(self._worker.close)
        self._worker.relayed.connect(self._on_event)
        self._worker.warmed_up.connect(self._on_warmed_up)
        self.warm = False
        self._next_id = 1
        self._current: int | None = None
        self._cancel: threading.Event | None = None
        self._closed = False
        self._inbox: deque[object] = deque()
        self._drain_timer = QTimer(self)
        self._drain_timer.setSingleShot(True)
        self._drain_timer.timeout.connect(self._drain)
        self._thread.start()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    @property
    def busy(self) -> bool:
        return self._current is not None

    @property
    def current_run(self) -> int | None:
        return self._current

    @property
    def engine_thread(self) -> QThread:
        return self._thread

    def submit(self, job: Job) -> int | None:
        """Start a job (a Generate, a target search or a threshold comparison: one run of one or
        more passes, ``app.engine.jobs``); returns its id, or None while another run is in flight
        (or after close)."""
        if self._current is not None or self._closed:
            return None
        run_id = self._next_id
        self._next_id += 1
        self._current = run_id
        self._cancel = threading.Event()
        self.busy_changed.emit(True)
        self._run_requested.emit(run_id, job, self._cancel)
        return run_id

    def cancel(self) -> bool:
        if self._current is None or self._cancel is None:
            return False
        self._cancel.set()
        return True

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel, close the engine on its thread and wait (bounded). True if the thread stopped."""
        if self._closed:
            return not self._thread.isRunning()
        self._closed = True
        self.cancel()
        self._close_requested.emit()
        stopped = self._thread.wait(timeout_ms)
        if not stopped:
            log.warning("the engine thread did not stop within %d ms", timeout_ms)
            STRAGGLERS.append(self._thread)
        return stopped

    @Slot(object)
    def _on_event(self, event: object) -> None:
        if self._closed:
            return
        # Events can arrive in bursts (a resumed pass replays many steps at once). Queue them
        # and apply them in slices of at most DRAIN_BUDGET_MS, so the GUI keeps breathing.
        self._inbox.append(event)
        if not self._drain_timer.isActive():
            self._drain_timer.start(0)

    @Slot(float)
    def _on_warmed_up(self, seconds: float) -> None:
        self.warm = True
        self.warmed_up.emit(seconds)

    def _drain(self) -> None:
        deadline = time.perf_counter() + DRAIN_BUDGET_MS / 1000
        while self._inbox and not self._closed:
            self._deliver(self._inbox.popleft())
            if time.perf_counter() >= deadline:
                break
        if self._inbox and not self._closed:
            self._drain_timer.start(0)

    def flush(self) -> None:
        """Apply every queued event now (tests and shutdown)."""
        while self._inbox and not self._closed:
            self._deliver(self._inbox.popleft())

    def _deliver(self, event: object) -> None:
        if isinstance(event, TERMINAL) and event.run_id == self._current:
            self._current = None
            self._cancel = None
            self.event_received.emit(event)
            self.busy_changed.emit(False)
            return
        self.event_received.emit(event)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
