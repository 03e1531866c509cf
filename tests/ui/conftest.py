"""Window fixtures: the scriptable fake engine behind the real engine thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pytestqt.qtbot import QtBot
from ui_support import FakeModelStore, WindowFactory

from app.ui.window import MainWindow, open_window
from tests.fakes.engine import FakeEngine


@pytest.fixture(autouse=True)
def _fixed_machine_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window reads this machine's memory for its quantization default and memory banner;
    tests see one fixed 64 GB machine, so what they assert does not depend on the host."""
    from app.ui import form_model

    monkeypatch.setattr(form_model, "physical_memory_bytes", lambda: 64 * 1024**3)


@pytest.fixture
def make_window(qtbot: QtBot) -> Iterator[WindowFactory]:
    windows: list[MainWindow] = []

    def make(
        engine: FakeEngine | None = None,
        *,
        store: FakeModelStore | None = None,
        factory: Callable[[], object] | None = None,
    ) -> MainWindow:
        chosen = engine if engine is not None else FakeEngine()
        window = open_window(
            factory or (lambda: chosen),  # type: ignore[arg-type, return-value]
            model_store=store or FakeModelStore(),
            shutdown_timeout_ms=10_000,
        )
        qtbot.addWidget(window)
        window.resize(1280, 820)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.shutdown()
        assert not window.host.engine_thread.isRunning()


def real_engine():  # imported lazily, on the worker thread
    from app.engine.engine import Engine

    return Engine()


@pytest.fixture
def make_real_window(qtbot: QtBot) -> Iterator[Callable[[int], MainWindow]]:
    """The window with the real engine on the embedded demo model at ``steps`` steps."""
    windows: list[MainWindow] = []

    def make(steps: int) -> MainWindow:
        window = open_window(real_engine, model_store=FakeModelStore(), shutdown_timeout_ms=60_000)
        qtbot.addWidget(window)
        window.show()
        window.form.select_variant("demo")
        window.form.steps = steps
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.shutdown()
