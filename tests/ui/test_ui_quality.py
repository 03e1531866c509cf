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
from app.ui.job_slot import JobStatus
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
    assert run_to_end(qtbot, window) is JobStatus.finished
    # Off: one pass at the slider's threshold, as always, and no search.
    assert len(engine.requests) == 1 and _searched(window) is None
    assert engine.requests[-1].threshold == window.form.threshold

    panel.toggle.click()
    assert window.quality.enabled and panel.bounds.isVisible()
    assert panel.min_ssim.value() == pytest.approx(0.97)  # the default
    panel.min_ssim.setValue(0.95)
    panel.max_local_diff.setValue(0.3)
    start, before = window.form.threshold, len(engine.requests)
    assert run_to_end(qtbot, window) is JobStatus.finished
    search = _searched(window)
    assert search is not None and search.target == QualityTarget(0.95, 0.3)
    assert engine.requests[before].threshold == start  # where the search starts

    panel.toggle.click()
    before = len(engine.requests)
    assert run_to_end(qtbot, window) is JobStatus.finished
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
    assert blocker.args == [JobStatus.finished], window.run.error
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


def test_only_the_chosen_threshold_is_marked_where_several_met_the_target(qtbot: QtBot) -> None:
    """The README's TeaCache search (its committed record): four thresholds meet the target and
    one is chosen. Only that row carries ✓ and bold; the others that met carry no mark, the one
    that missed carries ✗ — as the rows arrive and once the run ends."""
    import numpy as np

    from app.engine.events import RunFinished
    from app.engine.report import PassResult, RunReport, TargetProbe, TargetSearch
    from app.engine.request import make_request
    from app.ui.quality_model import QualityModel
    from app.ui.quality_view import QualityPanel
    from lab.target import readme_examples

    record = readme_examples.load("teacache")["report"]
    probes = tuple(
        TargetProbe(t["threshold"], t["skipped"], t["pattern"], t["ssim"], t["local_diff"],
                    t["met"], t["predicted_skipped"])
        for t in record["target_search"]
    )  # fmt: skip
    chosen = record["threshold"]
    assert sum(p.met for p in probes) >= 2 and any(not p.met for p in probes)  # the scenario
    model = QualityModel()
    panel = QualityPanel(model)
    qtbot.addWidget(panel)
    model.begin(7)
    for index, probe in enumerate(probes):
        model.handle_event(TargetProbed(7, probe, index, 8))
        assert not any(row[0].startswith("✓") for row in panel.rows())  # nothing chosen yet
    request = make_request("demo", record["prompt"], seed=record["seed"], threshold=chosen)
    search = TargetSearch(QualityTarget(0.97), probes, chosen, True, record["target_note"])
    gated = PassResult(np.zeros((8, 8, 3), np.uint8), (), 1.0)
    model.handle_event(RunFinished(7, RunReport(request, gated, target_search=search)))

    marks = [row[0].split(" ")[0] if " " in row[0] else "" for row in panel.rows()]
    expected = ["✓" if p.threshold == chosen else ("" if p.met else "✗") for p in probes]
    assert marks == expected and marks.count("✓") == 1
    bold = [panel.tried.topLevelItem(i).font(0).bold() for i in range(len(probes))]  # type: ignore[union-attr]
    assert bold == [p.threshold == chosen for p in probes]


def test_the_plot_follows_the_pass_being_run_and_unticking_hides_the_list(
    qtbot: QtBot, make_window
) -> None:
    """#27 item 22: during a search the plot's threshold line stayed at the slider's value while
    other thresholds ran (and after it, while the result shown was the chosen threshold's), and
    the list of thresholds tried stayed in the panel after unticking."""
    from app.engine.events import Pass
    from tests.fakes.engine import StepGate

    gate = StepGate()
    engine = FakeEngine(step_gate=gate)
    window: MainWindow = make_window(engine)
    window.form.steps = STEPS
    window.form.threshold = 0.3  # loose: the search tries tighter ones
    window.quality_panel.toggle.click()
    plot = window.gate_plot
    assert window.session.generate() is not None

    def second_pass_drawn() -> bool:
        if len(engine.requests) < 2:
            return False
        running = engine.requests[-1].threshold
        return any(s is not None and s.threshold == running for s in window.run.gated_steps)

    for _ in range(2000):  # step by step until the second pass has drawn a step
        if second_pass_drawn():
            break
        if gate.waiting_at is not None:
            gate.release(1)
        qtbot.wait(5)
    assert second_pass_drawn()
    running = engine.requests[-1].threshold
    assert gate.waiting_at is not None and gate.waiting_at[0] is Pass.gated
    assert running != pytest.approx(0.3) and window.form.threshold == pytest.approx(0.3)
    qtbot.waitUntil(
        lambda: plot.threshold_line.value() == pytest.approx(running), timeout=SIGNAL_TIMEOUT_MS
    )

    gate.open()
    qtbot.waitUntil(lambda: not window.run.busy, timeout=SIGNAL_TIMEOUT_MS)
    chosen = window.quality.chosen
    assert chosen is not None and chosen != pytest.approx(0.3)
    # The result shown is the chosen threshold's run: so is the line it is drawn against.
    qtbot.waitUntil(
        lambda: plot.threshold_line.value() == pytest.approx(chosen), timeout=SIGNAL_TIMEOUT_MS
    )

    panel = window.quality_panel
    assert panel.tried.isVisible() and panel.note.isVisible()
    panel.toggle.click()  # off: the list and its note go with the option
    assert not window.quality.enabled
    assert not panel.tried.isVisible() and not panel.note.isVisible()
    panel.toggle.click()  # on again: the last search is listed again
    assert panel.tried.isVisible() and len(panel.rows()) == len(window.quality.probes)
