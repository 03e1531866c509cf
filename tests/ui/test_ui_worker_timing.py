"""The engine thread never waits on the GUI thread: a whole run, every event relayed, completes
while the GUI thread processes nothing, so no GUI work can sit inside a timed step."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.events import RunFinished, StepDone
from app.engine.jobs import Generate
from app.engine.request import make_request
from app.ui.defaults import DEFAULT_PROMPT
from app.ui.worker import EngineHost
from tests.fakes.engine import FakeEngine


def test_a_run_completes_while_the_gui_thread_is_busy(qtbot: QtBot) -> None:
    engine = FakeEngine()
    host = EngineHost(lambda: engine, warm_imports=())
    relayed: list[object] = []
    finished = threading.Event()

    def on_engine_thread(event: object) -> None:  # runs on the engine thread (direct connection)
        relayed.append(event)
        if isinstance(event, RunFinished):
            finished.set()

    host._worker.relayed.connect(on_engine_thread, Qt.ConnectionType.DirectConnection)
    delivered: list[object] = []
    host.event_received.connect(delivered.append)
    try:
        qtbot.waitUntil(lambda: host.warm, timeout=10_000)
        assert host.submit(Generate(make_request("demo", DEFAULT_PROMPT))) is not None
        # The GUI thread now blocks without running its event loop (as a long repaint would):
        # the engine thread must still run every step and relay every event to the end.
        assert finished.wait(timeout=30), "the engine thread waited for the GUI thread"
        assert delivered == []  # nothing reached the GUI meanwhile: it really was blocked
        steps = [e for e in relayed if isinstance(e, StepDone)]
        emitted_steps = [e for e in engine.emitted if isinstance(e, StepDone)]
        assert steps == emitted_steps and len(steps) > 0
        qtbot.waitUntil(lambda: not host.busy, timeout=10_000)  # then the GUI catches up
        host.flush()
        assert [e for e in delivered if isinstance(e, StepDone)] == emitted_steps  # all, in order
    finally:
        host.shutdown()
