"""One job on the engine thread as a model of the window sees it: its status, its run id and the
link to the engine thread. Qt-free.

The run on screen (``RunModel``), a threshold comparison (``ThresholdComparer``) and a calibration
(``ModelCalibrator``) each hold one ``JobSlot``: the same status machine, the same engine link
(``app.ui.worker.EngineHost``, or a plain fake in tests) and the same rule for which engine
events are the slot's. Each model begins and ends its job in its own words (a run starts
``loading``, a comparison or a calibration ``running``) from its own events.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

from app.engine.events import LoadProgress, ModelReady
from app.engine.jobs import Job


class JobStatus(StrEnum):
    idle = "idle"
    loading = "loading"  # a run's model is loading (a comparison or calibration says it in words)
    running = "running"
    cancelling = "cancelling"
    finished = "finished"
    cancelled = "cancelled"
    failed = "failed"
    opened = "opened"  # a comparison reopened from the history

    @property
    def busy(self) -> bool:
        return self in (JobStatus.loading, JobStatus.running, JobStatus.cancelling)


class EngineLink(Protocol):
    """The engine thread as the window's models see it (``app.ui.worker.EngineHost``)."""

    @property
    def busy(self) -> bool: ...

    def submit(self, job: Job) -> int | None: ...

    def cancel(self) -> bool: ...

    def shutdown(self, timeout_ms: int = 10_000) -> bool: ...


class NoEngine:
    """The link of a model shown without an engine thread (a view's test, a screenshot): never
    busy, and it takes no job."""

    busy = False

    def submit(self, job: Job) -> int | None:
        return None

    def cancel(self) -> bool:
        return False

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        return True


class JobSlot:
    """See the module docstring. ``changed(name, value)`` hears every change of ``status`` or
    ``run_id`` (an observable model re-emits it as its own ``<name>_changed``)."""

    def __init__(
        self,
        engine: EngineLink,
        *,
        run_id: int | None = None,
        changed: Callable[[str, object], None] | None = None,
    ) -> None:
        self.engine = engine
        self._status = JobStatus.idle
        self._run_id = run_id
        self._changed = changed

    @property
    def status(self) -> JobStatus:
        return self._status

    @status.setter
    def status(self, value: JobStatus) -> None:
        if value is not self._status:
            self._status = value
            self._tell("status", value)

    @property
    def run_id(self) -> int | None:
        return self._run_id

    @run_id.setter
    def run_id(self, value: int | None) -> None:
        if value != self._run_id or type(value) is not type(self._run_id):
            self._run_id = value
            self._tell("run_id", value)

    @property
    def busy(self) -> bool:
        return self._status.busy

    def submit(self, job: Job) -> int | None:
        """Hand ``job`` to the engine thread: its run id, now this slot's, or None where the
        engine took no job (it is busy). The model then sets the status its job begins with."""
        run_id = self.engine.submit(job)
        if run_id is not None:
            self.run_id = run_id
        return run_id

    def cancel(self) -> bool:
        """Ask the engine thread to stop the job going on (after its current step)."""
        if not self.busy or not self.engine.cancel():
            return False
        self.status = JobStatus.cancelling
        return True

    def owns(self, event: object) -> bool:
        """The event is this slot's job's: its run id, or a model's load (no run id) while the
        job goes on."""
        if isinstance(event, LoadProgress | ModelReady):
            return self.busy
        run_id = getattr(event, "run_id", None)
        return run_id is not None and run_id == self._run_id

    def _tell(self, name: str, value: object) -> None:
        if self._changed is not None:
            self._changed(name, value)
