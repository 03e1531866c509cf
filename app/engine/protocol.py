"""The contract between the UI worker and an engine (the real one or the scripted fake)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from app.engine.events import EngineEvent
from app.engine.request import GenerationRequest

Emit = Callable[[EngineEvent], None]


class Cancelled(Exception):
    """Raised inside a run when the user cancelled; reported as ``RunCancelled``, not an error."""


class UserFacingError(Exception):
    """An expected failure (missing weights, no network, not enough memory...): its message is
    one sentence for the user, shown as is, with no traceback."""


class EngineProtocol(Protocol):
    def run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        """Run one request on the calling thread, emitting events as it goes.

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
