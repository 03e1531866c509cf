"""The contracts around an engine: the one between the job runner and an engine (the real one or
the scripted fake), and the one between the runner and a job's plan (``app.engine.jobs``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.events import EngineEvent, RunCancelled, RunFailed
from app.engine.report import RunReport
from app.engine.request import GenerationRequest
from app.errors import Cancelled, UserFacingError

__all__ = [
    "Cancelled",
    "Emit",
    "EngineProtocol",
    "JobPlan",
    "PassesOutcome",
    "UserFacingError",
]

Emit = Callable[[EngineEvent], None]


class EngineProtocol(Protocol):
    def run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        """Run exactly one request on the calling thread, emitting events as it goes.

        Emits, in order: ``LoadProgress``/``ModelReady`` if the model had to be loaded;
        ``RunWarning`` for inline notices (distilled schedule...); for the vanilla pass (unless
        cached or ``compare_vanilla`` is False) ``PassStarted``, one ``StepDone`` per step,
        ``PassFinished``; the same for the gated pass; then exactly one of ``RunFinished``,
        ``RunCancelled`` (cancel was set: takes effect within one step) or ``RunFailed`` (any
        error, with a one-line message). It never raises.
        """
        ...

    def close(self) -> None:
        """Release the model (called on the engine's thread before it stops)."""
        ...


@dataclass
class PassesOutcome:
    """What the passes of one job came to: every finished pass's report, in order, and why they
    stopped where the plan still wanted more (cancel, or a pass that failed)."""

    reports: list[RunReport] = field(default_factory=list)
    cancelled: bool = False
    failure: RunFailed | None = None
    cancelled_event: RunCancelled | None = None  # the engine's own, where a pass was cancelled

    def stopped(self, run_id: int) -> RunFailed | RunCancelled:
        """The terminal event of a job that finished no pass it could report."""
        if self.failure is not None:
            return self.failure
        return self.cancelled_event or RunCancelled(run_id, None)


class JobPlan(Protocol):
    """One job's passes, as the runner asks for them (see ``app.engine.jobs``)."""

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        """The next pass to run, given the reports so far; None: the job is done."""
        ...

    def on_report(self, index: int, report: RunReport) -> None:
        """A pass finished (``index`` from 0): emit the job's own progress event."""
        ...

    def finish(self, outcome: PassesOutcome) -> object:
        """Emit the job's one terminal event; return its result (None where nothing finished)."""
        ...
