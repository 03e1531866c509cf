"""Issue #16: window state that outlived its selection. Through the real window and the fake
engine, signal-based."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from pytestqt.qtbot import QtBot
from test_ui_window import held_engine, wait_held_at
from ui_support import SIGNAL_TIMEOUT_MS, FakeModelStore, WindowFactory, run_to_end

from app.engine.events import Pass, PassStarted, StepDone
from app.engine.request import make_request
from app.gate import Decision, StepEvent
from app.storage.history import history_origin
from app.storage.settings import SettingsStore
from app.ui.job_slot import JobStatus
from app.ui.run_model import RunModel
from tests.fakes.engine import FakeEngine, FakeScript
from tests.fakes.steps import tea_step


def offered_sizes(window) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    combo = window.controls.size_combo
    return [tuple(combo.itemData(i)) for i in range(combo.count())]


def test_sizes_do_not_leak_between_variants(make_window: WindowFactory) -> None:
    window = make_window()
    assert offered_sizes(window) == [(128, 128)]
    window.controls.variant_picker.set_variant("flux1-dev")  # as a user picks it
    assert window.form.variant_id == "flux1-dev"
    assert (128, 128) not in offered_sizes(window)
    assert window.controls.size_combo.currentData() == (1024, 1024)
    window.controls.size_combo.setCurrentIndex(offered_sizes(window).index((768, 768)))
    assert window.form.size == (768, 768)
    window.controls.variant_picker.set_variant("demo")
    assert offered_sizes(window) == [(128, 128)]
    assert window.form.size == (128, 128)
    window.close()
    settings = SettingsStore().load()
    assert settings.sizes["demo"] == [128, 128] and settings.sizes["flux1-dev"] == [768, 768]


def test_a_saved_size_outside_the_variants_range_is_not_applied(
    make_window: WindowFactory,
) -> None:
    store = SettingsStore()
    settings = store.load()
    settings.sizes["demo"] = [1024, 1024]
    store.save(settings)
    window = make_window()
    assert window.form.size == (128, 128)
    assert offered_sizes(window) == [(128, 128)]


def test_steps_below_the_minimum_stay_and_say_why(qtbot: QtBot, make_window: WindowFactory) -> None:
    window = make_window()
    steps = window.controls.steps
    steps.setValue(1)
    assert window.form.steps == 1 and steps.value() == 1  # not put back to 28
    problem = window.controls.steps_problem
    assert problem.isVisible() and problem.text() == "Steps must be at least 2 for demo, got 1."
    # One message (#27 item 17): Generate waits until the steps are runnable, so no red banner
    # repeats the inline sentence and no yellow schedule banner adds a third.
    assert not window.controls.generate_button.isEnabled()
    assert not window.generate_action.isEnabled()
    window.controls.generate_button.click()
    assert window.run.status is JobStatus.idle  # nothing started...
    assert window.banners.banner("error") is None  # ...and the inline sentence is the only one
    assert window.banners.banner("schedule") is None
    steps.setValue(3)
    assert not problem.isVisible()
    assert window.controls.generate_button.isEnabled()


def test_the_picker_is_disabled_during_a_run(qtbot: QtBot, make_window: WindowFactory) -> None:
    engine, gate = held_engine()
    window = make_window(engine)
    window.session.generate()
    wait_held_at(qtbot, gate, Pass.vanilla, 0)
    assert not window.controls.variant_picker.isEnabled()
    assert not window.session.select_variant("demo-turbo")
    gate.open()
    qtbot.waitUntil(lambda: window.run.status is JobStatus.finished, timeout=SIGNAL_TIMEOUT_MS)
    assert window.controls.variant_picker.isEnabled()
    assert window.run.request is not None and window.run.request.variant_id == "demo"


def test_a_stale_result_is_dimmed_with_what_made_it(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window()
    window.form.select_variant("demo-turbo")
    window.form.threshold = 0.3
    assert run_to_end(qtbot, window) is JobStatus.finished
    caption = window.stale_caption
    assert not caption.isVisible()
    assert not window.is_dimmed("compare")
    window.controls.variant_picker.set_variant("flux2-klein-4b")
    assert caption.isVisible()
    assert caption.text() == "Previous run: demo-turbo, 4 steps, threshold 0.3"
    assert window.is_dimmed("compare")
    assert window.is_dimmed("plot")
    window.controls.variant_picker.set_variant("demo-turbo")
    assert not caption.isVisible()
    # A threshold-only change dims the numbers but keeps the plot's what-if bright.
    window.form.threshold = 0.2
    assert caption.isVisible()
    assert caption.text() == "Previous run: demo-turbo, 4 steps, threshold 0.3"
    assert window.is_dimmed("compare")
    assert not window.is_dimmed("plot")


def test_not_downloaded_goes_with_use_the_demo_model(make_window: WindowFactory) -> None:
    window = make_window(store=FakeModelStore(missing={"flux2-klein-4b"}))
    window.controls.variant_picker.set_variant("flux2-klein-4b")
    window.controls.generate_button.click()
    banner = window.banners.banner("error")
    assert banner is not None and "not downloaded" in banner.notice.title
    use_demo = banner.notice.actions[1]
    window.banners.action_triggered.emit(use_demo.fix)
    assert window.form.variant_id == "demo"
    assert window.banners.banner("error") is None


def test_history_origin_names_the_time_and_the_day_when_not_today() -> None:
    now = datetime(2026, 12, 1, 16, 30, tzinfo=UTC)
    assert history_origin("2026-12-01T14:02:11+00:00", now) == "from history, run at 14:02"
    assert history_origin("2026-11-30T01:23:54+00:00", now) == (
        "from history, run 30 Nov 2026, 01:23"
    )
    assert history_origin("yesterday-ish", now) == "from history"


def test_a_run_opened_from_history_says_so_and_not_cached(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window(FakeEngine(FakeScript(step_seconds=0.001)))
    assert run_to_end(qtbot, window) is JobStatus.finished
    window.form.threshold = 0.06
    assert run_to_end(qtbot, window) is JobStatus.finished  # vanilla cached
    assert window.run.vanilla_cached and "cached" in window.compare.titles[1].text()
    fresh_label = window.run.speedup_label
    assert window.compare.speedup_card.note.text() == fresh_label  # new runs: unchanged
    entry = window.history.entries()[0]  # the newest: the one with the cached vanilla
    assert entry.report_json.get("vanilla_cached") is True
    assert window.session.open_entry(entry)
    when = datetime.fromisoformat(entry.created)
    # The label first: a narrow card elides the end, and the head says what the figure is (#39).
    expected = f"{entry.speedup_label} · from history, run at {when:%H:%M}"
    qtbot.waitUntil(
        lambda: window.compare.speedup_card.note.text() == expected, timeout=SIGNAL_TIMEOUT_MS
    )
    assert "cached" not in window.compare.titles[1].text()
    assert window.compare.vanilla_time_card.note.text() == ""
    # A new run drops the origin again.
    window.form.threshold = 0.07
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert not window.compare.speedup_card.note.text().startswith("from history")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def step(index: int, num_steps: int, seconds: float) -> StepEvent:
    return tea_step(index, num_steps, Decision.computed, None, None, None, 0.1, seconds)


def test_time_left_from_the_mean_step_time_of_the_pass() -> None:
    clock = FakeClock()
    run = RunModel(clock=clock)
    request = make_request("demo", "a red circle", steps=4, threshold=0.1)
    run.begin(1, request)
    assert run.status_text() == "Starting…"  # loading: no pass yet
    run.handle_event(PassStarted(1, Pass.vanilla, 4))
    assert run.status_text() == "Vanilla pass · step 0 of 4 · first step… 0 s"
    clock.now += 34
    assert run.status_text() == "Vanilla pass · step 0 of 4 · first step… 34 s"
    run.handle_event(StepDone(1, Pass.vanilla, step(0, 4, 30.0)))
    run.handle_event(StepDone(1, Pass.vanilla, step(1, 4, 10.0)))  # mean 20 s, 2 left
    assert run.status_text() == "Vanilla pass · step 2 of 4 · about 40 s left in this pass"
    clock.now += 15
    assert run.status_text() == "Vanilla pass · step 2 of 4 · about 25 s left in this pass"
    run.handle_event(StepDone(1, Pass.vanilla, step(2, 4, 20.0)))
    clock.now += 30  # the last step runs over the mean
    assert run.status_text() == "Vanilla pass · step 3 of 4 · finishing…"
    run.handle_event(StepDone(1, Pass.vanilla, step(3, 4, 20.0)))
    # The gated pass starts from the vanilla pass's mean (20 s × 4), then its own steps.
    run.handle_event(PassStarted(1, Pass.gated, 4))
    assert run.status_text() == "TeaCache pass · step 0 of 4 · about 1 min 20 s left in this pass"
    run.handle_event(StepDone(1, Pass.gated, step(0, 4, 2.0)))
    assert run.status_text() == "TeaCache pass · step 1 of 4 · about 6 s left in this pass"


def test_the_status_line_counts_a_slow_first_step(qtbot: QtBot, make_window: WindowFactory) -> None:
    engine, gate = held_engine()
    engine.script = FakeScript(step_seconds=0.01)
    window = make_window(engine)
    clock = FakeClock()
    window.run.clock = clock
    window.session.generate()
    wait_held_at(qtbot, gate, Pass.vanilla, 0)
    qtbot.waitUntil(lambda: window.run.active_pass is Pass.vanilla, timeout=SIGNAL_TIMEOUT_MS)
    clock.now += 34
    qtbot.waitUntil(
        lambda: window.status_label.text().endswith("step 0 of 28 · first step… 34 s"),
        timeout=SIGNAL_TIMEOUT_MS,
    )
    gate.release(1)
    wait_held_at(qtbot, gate, Pass.vanilla, 1)
    qtbot.waitUntil(
        lambda: any(s is not None for s in window.run.vanilla_steps), timeout=SIGNAL_TIMEOUT_MS
    )
    # 27 steps left at the fake engine's 10 ms each; the clock has not moved since the step.
    qtbot.waitUntil(
        lambda: window.status_label.text().endswith(
            "step 1 of 28 · less than a second left in this pass"
        ),
        timeout=SIGNAL_TIMEOUT_MS,
    )
    clock.now += 60
    qtbot.waitUntil(  # the clock ticks on without any engine event
        lambda: window.status_label.text().endswith("· finishing…"), timeout=SIGNAL_TIMEOUT_MS
    )
    window.session.cancel()
    qtbot.waitUntil(lambda: not window.run.busy, timeout=SIGNAL_TIMEOUT_MS)


class SlowStepEngine(FakeEngine):
    """A fake whose first step ignores cancel until released, like a long MLX step."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def run(self, run_id, request, emit, cancel) -> None:  # type: ignore[no-untyped-def, override]
        self.entered.set()
        self.release.wait(SIGNAL_TIMEOUT_MS / 1000)  # deaf to cancel, as a step in MLX is
        super().run(run_id, request, emit, cancel)


def test_closing_during_a_slow_step_hides_at_once_and_says_why(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    engine = SlowStepEngine()
    window = make_window(engine)
    engine.release.set()
    assert run_to_end(qtbot, window) is JobStatus.finished  # a saved run that must survive
    (saved,) = window.history.entries()
    engine.entered.clear()
    engine.release.clear()
    window.form.threshold = 0.042
    window.session.generate()
    qtbot.waitUntil(engine.entered.is_set, timeout=SIGNAL_TIMEOUT_MS)
    window.close()  # returns at once: no blocking wait on the GUI thread
    assert not window.isVisible()
    notice = window._closing_notice
    assert notice is not None and notice.isVisible()
    assert notice.text().startswith("Finishing the current step")
    assert window.host.engine_thread.isRunning()
    assert SettingsStore().load().thresholds["demo"] == 0.042  # saved before the wait
    with qtbot.waitSignal(window.shut_down, timeout=SIGNAL_TIMEOUT_MS):
        engine.release.set()
    assert not window.host.engine_thread.isRunning() and engine.closed
    assert saved.id in [e.id for e in window.history.entries()]  # nothing saved was lost


def test_a_run_reopened_from_history_with_matching_settings_is_not_dimmed(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """Every setting matched, yet the reopened run was dimmed as "Run from history: …" (#27
    item 23): the live previews, which never change a figure, made the two requests differ."""
    window = make_window()
    assert window.form.live_previews  # the window's runs draw their steps as they go
    assert run_to_end(qtbot, window) is JobStatus.finished
    qtbot.waitUntil(lambda: bool(window.run.saved_entry), timeout=SIGNAL_TIMEOUT_MS)
    [entry] = window.history.entries()
    assert window.open_history_entry(entry)
    assert window.run.run_id < 0  # shown from the history
    assert window.session.result_caption() == ""
    assert not window.stale_caption.isVisible() and not window.is_dimmed("compare")
    window.form.seed = window.form.seed + 1  # a setting that differs still dims it
    assert window.stale_caption.isVisible()
    assert window.stale_caption.text().startswith("Run from history: demo, 28 steps")


def test_a_new_vanilla_pass_drops_the_last_seeds_band_and_details_say_a_run_is_going(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """#27 item 25: during a new seed's vanilla pass the gate plot kept the previous seed's onset
    band and skip curve, and Details said "No run yet." while a run was going."""
    engine, gate = held_engine()
    window = make_window(engine)
    window.results.run_details.set_expanded(True)
    gate.open()
    assert run_to_end(qtbot, window) is JobStatus.finished
    plot = window.gate_plot
    assert window.run.band is not None and plot.skip_curve.getData()[0] is not None
    assert plot.band.isVisible()

    gate.hold()
    window.form.seed += 1  # a new vanilla trace: the old band belongs to another one
    assert window.session.generate() is not None
    qtbot.waitUntil(lambda: window.run.active_pass is Pass.vanilla, timeout=SIGNAL_TIMEOUT_MS)
    assert window.run.band is None
    qtbot.waitUntil(lambda: not plot.band.isVisible(), timeout=SIGNAL_TIMEOUT_MS)
    xs, _ = plot.skip_curve.getData()
    assert xs is None or len(xs) == 0
    figures = window.results.run_details.figures.text()
    assert figures != "No run yet." and "when this run finishes" in figures, figures

    gate.open()
    qtbot.waitUntil(lambda: not window.run.busy, timeout=SIGNAL_TIMEOUT_MS)
    assert window.run.band is not None and plot.band.isVisible()
    assert "SSIM against vanilla" in window.results.run_details.figures.text()


def test_a_threshold_only_rerun_keeps_the_band_of_its_cached_vanilla(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """The same vanilla trace (cached): its band stays through the re-run, no flicker."""
    engine, gate = held_engine()
    window = make_window(engine)
    gate.open()
    assert run_to_end(qtbot, window) is JobStatus.finished
    band = window.run.band
    assert band is not None
    gate.hold()
    window.form.threshold = 0.12
    assert window.session.generate() is not None
    qtbot.waitUntil(lambda: window.run.active_pass is Pass.gated, timeout=SIGNAL_TIMEOUT_MS)
    kept = window.run.band
    assert window.run.vanilla_cached and kept is not None
    assert (kept.onset, kept.onset_step) == (band.onset, band.onset_step)  # the same trace's
    gate.open()
    qtbot.waitUntil(lambda: not window.run.busy, timeout=SIGNAL_TIMEOUT_MS)
