"""Target quality in the window, on the scripted fake engine (the one job runner runs a search on
it as on the real engine): the toggle and its bounds make the run a search for that target, the
search is listed as it runs, the slider is set to the chosen threshold and the result shown is
that threshold's run. The search's real numbers on the demo: ``tests/engine/test_target.py``."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, run_to_end

from app.engine.events import TargetProbed
from app.engine.report import TargetSearch
from app.engine.request import QualityTarget
from app.ui.viewmodel import RunStatus
from app.ui.window import MainWindow
from tests.fakes.engine import FakeEngine

STEPS = 12


def _searched(window: MainWindow) -> TargetSearch | None:
    report = window.run.report
    assert report is not None
    return report.target_search


def test_the_toggle_and_bounds_go_into_the_request(qtbot: QtBot, make_window) -> None:
    engine = FakeEngine()
    window: MainWindow = make_window(engine)
    panel = window.quality_panel
    assert not panel.toggle.isChecked() and not panel.bounds.isVisible()
    assert run_to_end(qtbot, window) is RunStatus.finished
    # Off: one pass at the slider's threshold, as always, and no search.
    assert len(engine.requests) == 1 and _searched(window) is None
    assert engine.requests[-1].threshold == window.form.threshold

    panel.toggle.click()
    assert window.quality.enabled and panel.bounds.isVisible()
    assert panel.min_ssim.value() == pytest.approx(0.97)  # the default
    panel.min_ssim.setValue(0.95)
    panel.max_local_diff.setValue(0.3)
    start, before = window.form.threshold, len(engine.requests)
    assert run_to_end(qtbot, window) is RunStatus.finished
    search = _searched(window)
    assert search is not None and search.target == QualityTarget(0.95, 0.3)
    assert engine.requests[before].threshold == start  # where the search starts

    panel.toggle.click()
    before = len(engine.requests)
    assert run_to_end(qtbot, window) is RunStatus.finished
    assert len(engine.requests) == before + 1 and _searched(window) is None


def test_the_search_is_listed_and_sets_the_slider(qtbot: QtBot, make_window) -> None:
    window: MainWindow = make_window(FakeEngine())
    window.form.steps = STEPS
    window.form.threshold = 0.3  # loose: 8 of 12 skipped on the fake's trace, SSIM 0.82
    window.quality_panel.toggle.click()
    seen: list[int] = []  # rows listed while the search runs
    window.host.event_received.connect(
        lambda e: (
            seen.append(len(window.quality_panel.rows())) if isinstance(e, TargetProbed) else None
        )
    )
    with qtbot.waitSignal(window.run_ended, timeout=SIGNAL_TIMEOUT_MS) as blocker:
        assert window.session.generate() is not None
    assert blocker.args == [RunStatus.finished], window.run.error
    assert seen and seen == list(range(1, len(seen) + 1))  # one more row per finished pass

    model = window.quality
    probes = list(model.probes)
    rows = window.quality_panel.rows()
    assert len(rows) == len(model.probes)
    assert len(rows) >= 2
    assert rows[0][0].endswith("0.3") and not probes[0].met
    chosen = model.chosen
    assert chosen is not None and chosen != 0.3
    assert [r for r in rows if r[0].startswith("✓")]  # the chosen one is marked
    # The slider holds the chosen threshold, and the result shown is that threshold's run.
    assert window.form.threshold == chosen
    assert window.controls.threshold.value() == pytest.approx(chosen)
    assert window.run.request is not None and window.run.request.threshold == chosen
    assert window.session.result_caption() == ""  # the result matches the inputs
    best = next(p for p in model.probes if p.threshold == chosen)
    assert window.run.skips == best.skipped and window.run.ssim == best.ssim
    assert best.met and best.skipped > 0  # engagement, beside the quality it met
    assert best.ssim is not None and best.ssim >= 0.97
    assert window.run.local_diff is not None
    assert model.note and "Searching" not in model.note
