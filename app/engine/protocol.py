"""The contract between the UI worker and an engine (the real one or the scripted fake)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from app.engine.events import EngineEvent
from app.engine.request import GenerationRequest
from app.errors import Cancelled, UserFacingError

__all__ = ["Cancelled", "Emit", "EngineProtocol", "UserFacingError"]

Emit = Callable[[EngineEvent], None]


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
