"""The window benchmark's stand-in engine (``lab/bench/paced_engine.py``) keeps the engine
protocol: the event order, one terminal event, the gate's real decisions, a cached vanilla the
second time, cancel within one step."""

from __future__ import annotations

import threading

from app.engine.events import (
    LoadProgress,
    ModelReady,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFinished,
    StepDone,
)
from app.engine.request import make_request
from lab.bench.paced_engine import PacedEngine


def _run(engine: PacedEngine, request, cancel: threading.Event | None = None) -> list[object]:
    events: list[object] = []
    engine.run(1, request, events.append, cancel or threading.Event())
    return events


def test_a_run_keeps_the_protocol_and_the_gate_skips() -> None:
    engine = PacedEngine(step_seconds=0.0, load_seconds=0.0)
    request = make_request("demo", "a red star", steps=20, threshold=0.1)
    events = _run(engine, request)
    kinds = [type(e) for e in events]
    assert kinds[:2] == [LoadProgress, ModelReady]
    assert kinds[2:] == [
        PassStarted, *[StepDone] * 20, PassFinished,
        PassStarted, *[StepDone] * 20, PassFinished,
        RunFinished,
    ]  # fmt: skip
    report = events[-1].report  # type: ignore[attr-defined]
    assert report.gated.skipped > 0  # engagement: the real rule skips on the demo-like trace
    assert report.vanilla is not None and not report.vanilla.cached

    again = _run(engine, request)  # loaded and the vanilla cached: no load, no vanilla steps
    assert [type(e) for e in again[:2]] == [PassStarted, PassFinished]
    assert again[0].cached  # type: ignore[attr-defined]
    assert again[-1].report.vanilla.cached  # type: ignore[attr-defined]


def test_cancel_ends_the_run_with_one_cancelled_event() -> None:
    cancel = threading.Event()
    cancel.set()
    events = _run(
        PacedEngine(step_seconds=0.0, load_seconds=0.0), make_request("demo", "a red star"), cancel
    )
    assert isinstance(events[-1], RunCancelled)
    assert not any(isinstance(e, RunFinished) for e in events)
