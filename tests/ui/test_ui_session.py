"""The window's actions without a window: ``Session`` against plain fakes for the engine thread and
the downloads. Runs go through the scripted ``FakeEngine`` synchronously, its events applied by the
view-model's one handler, so no event loop and no widget is involved."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pytest
from PIL import Image
from ui_support import FakeModelStore

from app.engine.comparison import ThresholdComparison
from app.engine.events import EngineEvent, RunFinished
from app.engine.jobs import Generate, Job, ThresholdSweep, run_job
from app.engine.request import GenerationRequest
from app.storage.history import HistoryStore
from app.storage.settings import SettingsStore
from app.ui.analysis import BannerFix, FixKind, NoticeKind
from app.ui.app import Actions, connect_actions
from app.ui.availability_model import Availability
from app.ui.export_model import Exporter
from app.ui.form_model import FormModel
from app.ui.gate_advice_model import GateAdvice
from app.ui.job_slot import JobStatus
from app.ui.model_folders_model import ModelFolders
from app.ui.notices_model import Notices
from app.ui.run_model import RunModel
from app.ui.session import Session
from app.variants import Variant
from tests.fakes.engine import FakeEngine, FakeScript


@dataclass
class FakeEngineLink:
    """``EngineLink`` for tests: takes one job at a time; ``finish`` runs it on the fake through
    the one job runner. ``submitted`` lists each job's request, ``jobs`` the jobs."""

    # Timed steps (a millisecond each), so that the passes have a speedup to label.
    engine: FakeEngine = field(default_factory=lambda: FakeEngine(FakeScript(step_seconds=0.001)))
    deliver: list[RunModel] = field(default_factory=list)
    pending: tuple[int, Job] | None = None
    cancel_event: threading.Event | None = None
    next_id: int = 1
    closed: bool = False
    submitted: list[GenerationRequest] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.pending is not None

    def submit(self, job: Job) -> int | None:
        if self.pending is not None or self.closed:
            return None
        run_id, self.next_id = self.next_id, self.next_id + 1
        self.pending = (run_id, job)
        self.jobs.append(job)
        ladder = isinstance(job, ThresholdComparison | ThresholdSweep)
        self.submitted.append(job.base if ladder else job.request)
        self.cancel_event = threading.Event()
        return run_id

    def cancel(self) -> bool:
        if self.cancel_event is None:
            return False
        self.cancel_event.set()
        return True

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        self.closed = True
        return True

    def finish(self, save: HistoryStore | None = None) -> list[EngineEvent]:
        assert self.pending is not None and self.cancel_event is not None
        (run_id, job), cancel = self.pending, self.cancel_event
        self.pending, self.cancel_event = None, None
        events: list[EngineEvent] = []
        run_job(self.engine, run_id, job, events.append, cancel)
        for event in events:
            if save is not None and isinstance(event, RunFinished):
                save.save(event.report)
            for model in self.deliver:
                model.handle_event(event)
        return events


@dataclass
class FakeDownloads:
    started: list[str] = field(default_factory=list)
    busy: bool = False
    variant_id: str | None = None
    stopped: bool = False

    def start(self, variant: Variant) -> bool:
        self.started.append(variant.id)
        self.busy, self.variant_id = True, variant.id
        return True

    def shutdown(self, timeout_ms: int = 3000) -> None:
        self.stopped = True


@dataclass
class Rig:
    actions: Actions
    link: FakeEngineLink
    downloads: FakeDownloads
    store: FakeModelStore
    history: HistoryStore
    started: list[int]

    @property
    def session(self) -> Session:
        return self.actions.session

    @property
    def notices(self) -> Notices:
        return self.actions.notices

    @property
    def gate_advice(self) -> GateAdvice:
        return self.actions.gate_advice

    @property
    def exporter(self) -> Exporter:
        return self.actions.exporter

    @property
    def availability(self) -> Availability:
        return self.actions.availability

    @property
    def folders(self) -> ModelFolders:
        return self.actions.folders

    @property
    def form(self) -> FormModel:
        return self.session.form

    @property
    def run(self) -> RunModel:
        return self.session.run


def connect_fakes(
    tmp_path: Path,
    link: FakeEngineLink,
    downloads: FakeDownloads,
    store: FakeModelStore,
    *,
    memory_bytes: int | Literal["probe"] | None = "probe",
) -> Actions:
    """The window's actions as ``Studio.build`` connects them, over a synchronous fake engine
    (which delivers its events to the run model) and fake downloads."""
    settings_store = SettingsStore(tmp_path / "settings.json")
    settings = settings_store.load()
    form = FormModel(settings, memory_bytes=memory_bytes)
    run = RunModel(engine=link)
    link.deliver.append(run)
    return connect_actions(
        form,
        run,
        downloads,
        settings=settings,
        settings_store=settings_store,
        history=HistoryStore(tmp_path / "history"),
        model_store=store,
    )


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    link, downloads = FakeEngineLink(), FakeDownloads()
    store = FakeModelStore(missing={"flux2-klein-4b"})
    actions = connect_fakes(tmp_path, link, downloads, store)
    started: list[int] = []
    actions.session.started = started.append
    return Rig(actions, link, downloads, store, actions.exporter.history, started)


def test_generate_submits_the_inputs_once_and_begins_the_run(rig: Rig) -> None:
    rig.form.prompt = "a red star"
    run_id = rig.session.generate()
    assert run_id == 1 and rig.started == [1]
    assert rig.link.pending is not None
    job = rig.link.pending[1]
    assert isinstance(job, Generate)  # no quality target: one Generate
    request = job.request
    # A first run times both passes in full: no resume, so its speedup is measured.
    assert request == replace(rig.form.request(), resume=False)
    assert (request.variant_id, request.prompt, request.resume) == ("demo", "a red star", False)
    assert rig.run.status is JobStatus.loading and rig.run.request == request
    assert rig.session.generate() is None  # busy: nothing more is submitted
    assert rig.started == [1]
    assert rig.session.recent_prompts[0] == "a red star"


def test_invalid_input_fails_locally_and_submits_nothing(rig: Rig) -> None:
    rig.form.prompt = "   "
    assert rig.session.generate() is None
    assert rig.link.pending is None
    assert rig.run.error is not None and "prompt is empty" in rig.run.error.message


def test_a_missing_model_offers_typed_fixes(rig: Rig) -> None:
    rig.form.select_variant("flux2-klein-4b")
    assert rig.session.generate() is None and rig.link.pending is None
    error = rig.run.error
    assert error is not None and error.kind is NoticeKind.error
    assert [a.fix for a in error.actions] == [
        BannerFix(FixKind.download),
        BannerFix(FixKind.variant, variant="demo"),
    ]
    rig.notices.apply_fix(error.actions[0].fix)
    assert rig.downloads.started == ["flux2-klein-4b"]
    rig.notices.apply_fix(error.actions[1].fix)
    assert rig.form.variant_id == "demo"


def test_steps_and_threshold_fixes_set_the_inputs(rig: Rig) -> None:
    rig.notices.apply_fix(BannerFix.use_steps(12))
    rig.notices.apply_fix(BannerFix.use_threshold(0.0731))
    assert (rig.form.steps, rig.form.threshold) == (12, 0.0731)


def test_a_dismissed_schedule_banner_returns_after_a_fix(rig: Rig) -> None:
    rig.form.threshold = 0.0
    assert [n.key for n in rig.notices.notices()] == ["schedule"]
    rig.notices.dismiss("schedule")
    assert rig.notices.notices() == ()
    rig.notices.apply_fix(BannerFix.use_steps(20))
    assert [n.key for n in rig.notices.notices()] == ["schedule"]


def test_a_dismissed_banner_returns_with_a_new_run_and_stays_away_until_then(rig: Rig) -> None:
    """The session tells the notices that a run starts (``Studio.build``'s connection): a banner
    dismissed before it may return, one dismissed during it stays away."""
    rig.form.threshold = 0.0
    rig.notices.dismiss("schedule")
    assert rig.notices.notices() == ()
    assert rig.session.generate() is not None
    assert [n.key for n in rig.notices.notices()] == ["schedule"]
    rig.notices.dismiss("schedule")
    rig.link.finish()
    assert rig.notices.notices() == ()


def test_cancel_only_while_a_run_is_going(rig: Rig) -> None:
    assert not rig.session.cancel()
    rig.session.generate()
    assert rig.session.cancel()
    assert rig.run.status is JobStatus.cancelling
    events = rig.link.finish()
    assert type(events[-1]).__name__ == "RunCancelled"
    assert rig.run.status is JobStatus.cancelled


def test_a_threshold_rerun_reuses_vanilla_and_the_label_says_what_was_measured(rig: Rig) -> None:
    rig.session.generate()
    first = next(e for e in rig.link.finish() if isinstance(e, RunFinished)).report
    assert rig.run.status is JobStatus.finished and rig.run.speedup is not None
    # A first run times both passes in full: nothing replayed, nothing cached, "measured".
    assert first.gated.replayed_steps == 0 and not first.vanilla_cached
    assert rig.run.speedup_label == "measured" and not rig.run.speedup_estimated
    assert not rig.session.threshold_only_change()
    rig.form.threshold = 0.06
    assert rig.session.threshold_only_change() and rig.gate_advice.same_schedule
    # A threshold change re-uses the cached vanilla and resumes the gated pass from it.
    assert rig.session.rerun_threshold() == 2
    assert rig.link.submitted[-1].resume is True
    events = rig.link.finish()
    report = next(e for e in events if isinstance(e, RunFinished)).report
    assert report.vanilla is not None and report.vanilla.cached
    replayed = report.gated.replayed_steps
    assert replayed > 0
    at = f"{report.vanilla.measured_at:%H:%M}"
    # The cached vanilla is re-timed to this run's computed steps, and the label ends with the
    # two times the figure is the ratio of.
    expected = (
        f"re-timed estimate ({replayed} of 28 steps replayed), vanilla cached at {at}, "
        "steps at this run's mean computed-step time (±"
    )
    assert rig.run.speedup_label.startswith(expected)
    assert rig.run.speedup_label == report.speedup_label
    assert rig.run.speedup_estimated


def test_same_schedule_follows_variant_and_steps(rig: Rig) -> None:
    assert not rig.gate_advice.same_schedule  # nothing shown yet
    rig.session.generate()
    rig.link.finish()
    assert rig.gate_advice.same_schedule
    rig.form.steps = 20
    assert not rig.gate_advice.same_schedule


def test_export_of_an_unsaved_run_and_of_a_saved_one_carry_the_label(
    rig: Rig, tmp_path: Path
) -> None:
    assert rig.exporter.export(tmp_path / "none.png") is None
    assert rig.run.error is not None
    rig.session.generate()
    rig.link.finish(save=rig.history)
    footer = rig.exporter.export_captions()["footer"]
    assert rig.run.speedup_label and f"({rig.run.speedup_label})" in footer
    out = rig.exporter.export(tmp_path / "side.png")
    assert out is not None and Image.open(out).size[0] > 0
    [entry] = rig.history.entries()
    assert rig.session.open_entry(entry)
    assert rig.run.speedup_label == entry.speedup_label
    assert entry.speedup_label == "measured"  # a first run: both passes timed in full


def test_open_entry_is_refused_while_a_run_is_going(rig: Rig) -> None:
    rig.session.generate()
    rig.link.finish(save=rig.history)
    [entry] = rig.history.entries()
    rig.session.generate()
    assert not rig.session.open_entry(entry)
    assert rig.run.error is not None and "wait for the current run" in rig.run.error.message


def test_a_run_saved_by_an_older_build_reopens_and_exports_as_it_was_saved(
    rig: Rig, tmp_path: Path
) -> None:
    """A history folder of format 1 (6553d13's, ``tests/storage/old_history``) through the
    public reopen and export paths: the inputs come back, the run shows, the export carries the
    speedup the History listed."""
    old = Path(__file__).parents[1] / "storage" / "old_history" / "6553d13"
    folder = old / "20261206-054608-446114-demo-s5"  # a plain run, 128²
    shutil.copytree(folder, rig.history.root / folder.name)
    saved = json.loads((folder / "run.json").read_text())
    [entry] = rig.history.entries()
    assert rig.session.open_entry(entry)
    assert (rig.form.prompt, rig.form.seed, rig.form.steps) == (
        "a red circle and a blue square",
        5,
        8,
    )
    assert (rig.form.gate, rig.form.threshold) == ("teacache", 0.1)
    assert rig.run.report is not None and rig.run.skips == saved["result"]["skips"]
    assert rig.run.origin.startswith("from history")
    out = rig.exporter.export(tmp_path / "old.png")
    assert out is not None
    with Image.open(out) as image:
        text = dict(image.text)  # type: ignore[attr-defined]
    assert float(text["speedup"]) == saved["result"]["speedup"]
    assert text["speedup_label"] == saved["report"]["speedup_label"]


def test_availability_texts(rig: Rig) -> None:
    badges = rig.availability.availability_badges()
    assert badges["flux2-klein-4b"].startswith("≈") and "demo" not in badges
    assert badges["flux2-klein-base-4b"] == "on disk"
    rig.form.select_variant("flux2-klein-4b")
    assert rig.availability.needs_download()
    assert rig.availability.variant_info().startswith("Not downloaded · ")
    rig.form.select_variant("demo")
    assert not rig.availability.needs_download()
    assert rig.availability.variant_info().startswith("Built in, runs offline")


def test_shutdown_saves_the_inputs_and_stops_everything_once(rig: Rig) -> None:
    rig.form.seed = 1234
    assert rig.session.shutdown()
    assert rig.link.closed and rig.downloads.stopped
    assert SettingsStore(rig.session.settings_store.path).load().seed == 1234
    assert rig.session.generate() is None  # nothing starts after shutdown


def test_the_session_module_imports_no_qt() -> None:
    code = (
        "import sys, app.ui.session; "
        "sys.exit(any(m.split('.')[0] == 'PySide6' for m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


@pytest.mark.parametrize(
    "module",
    [
        "event_router",
        "threshold_compare_model",
        "quantize_model",
        "plain_words",
        "calibrate_model",
        "job_slot",
        "availability_model",
        "gate_advice_model",
        "notices_model",
        "export_model",
        "model_folders_model",
    ],
)
def test_the_qt_free_state_of_the_window_imports_no_qt(module: str) -> None:
    """The Qt-free halves of the window (docs/architecture.md, the ui/ module map) stay so."""
    code = (
        f"import sys, app.ui.{module}; "
        "sys.exit(any(m.split('.')[0] == 'PySide6' for m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


# -- stale state (issue #16): sizes per variant, results bound to their request
def test_a_size_of_another_variant_never_reaches_the_demo(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    settings = store.load()
    settings.sizes["demo"] = [1024, 1024]  # what the leak used to save
    settings.sizes["flux1-dev"] = [768, 1024]
    settings.steps["demo"] = 1  # below the demo's min_steps
    settings.guidance["demo"] = 50.0  # outside the range the request check accepts
    form = FormModel(settings)
    assert form.variant_id == "demo"
    assert form.size == (128, 128) and form.steps == 28 and form.guidance == 3.0
    form.request()  # the loaded inputs are a valid request
    form.select_variant("flux1-dev")
    assert form.size == (768, 1024)  # a valid size of its own is kept
    form.select_variant("demo")
    assert form.size == (128, 128)
    form.remember()
    assert settings.sizes["demo"] == [128, 128]
    form.size = (1024, 1024)  # however it got there, it is not saved for the demo
    form.remember()
    assert "demo" not in settings.sizes


def test_the_request_check_refuses_the_demo_at_another_size() -> None:
    from app.engine.request import RequestError, make_request

    with pytest.raises(RequestError, match=r"demo draws 128 × 128 pixels only.*1024 × 1024"):
        make_request("demo", "a red circle", size=(1024, 1024))


def test_variant_loaded_fires_once_every_input_holds_the_new_variant(rig: Rig) -> None:
    seen: list[tuple[object, ...]] = []
    form = rig.form
    form.variant_loaded.connect(
        lambda vid: seen.append((vid, form.variant_id, form.size, form.steps, form.guidance))
    )
    form.select_variant("flux2-klein-4b")
    assert seen == [("flux2-klein-4b", "flux2-klein-4b", (1024, 1024), 4, 1.0)]


def test_steps_below_the_minimum_get_the_request_checks_sentence(rig: Rig) -> None:
    assert rig.form.steps_problem() is None
    rig.form.steps = 1
    assert rig.form.steps_problem() == "Steps must be at least 2 for demo, got 1."
    assert rig.session.generate() is None
    assert rig.run.error is not None and "at least 2" in rig.run.error.message
    assert rig.form.steps == 1  # nothing put the old value back


def test_the_variant_cannot_change_during_a_run(rig: Rig) -> None:
    assert rig.session.generate() == 1
    assert not rig.session.select_variant("demo-turbo")
    rig.notices.apply_fix(BannerFix.use_variant("demo-turbo"))
    assert rig.form.variant_id == "demo"
    rig.link.finish()
    assert rig.run.finished and rig.run.request is not None
    assert rig.run.request.variant_id == "demo"
    assert rig.session.select_variant("demo-turbo") and rig.form.variant_id == "demo-turbo"


def test_a_result_says_what_made_it_once_the_inputs_differ(rig: Rig) -> None:
    rig.form.select_variant("demo-turbo")
    rig.form.threshold = 0.3
    assert rig.session.result_caption() == ""  # nothing shown yet
    rig.session.generate()
    assert rig.session.result_caption() == ""  # a run in progress is not stale
    rig.link.finish()
    assert rig.session.result_caption() == ""  # the inputs still match
    rig.form.seed = 7
    assert (
        rig.session.result_caption() == "previous run: demo-turbo, 4 steps, threshold 0.3, seed 42"
    )
    rig.form.seed = 42
    assert rig.session.result_caption() == ""
    rig.session.select_variant("demo")
    assert rig.session.result_caption().startswith("previous run: demo-turbo, 4 steps")


def test_banners_of_the_old_selection_go_when_it_changes(rig: Rig) -> None:
    rig.session.select_variant("flux2-klein-4b")  # not downloaded in this rig
    assert rig.session.generate() is None
    assert rig.run.error is not None and "not downloaded" in rig.run.error.title
    fix = rig.run.error.actions[1].fix
    assert fix == BannerFix.use_variant("demo")
    rig.notices.apply_fix(fix)
    assert rig.form.variant_id == "demo"
    assert rig.run.error is None
    assert all("not downloaded" not in n.title for n in rig.notices.notices())


def test_steps_below_the_minimum_are_one_sentence_not_a_schedule_banner_too(rig: Rig) -> None:
    """Steps = 1 also raised the yellow "Demo shapes at 1 steps has no step the gate may skip"
    banner and the hint "0 of 1 steps may be skipped" (#27 item 17): the steps' own sentence,
    under Steps, is the one message until Generate is pressed."""
    rig.form.steps = 1
    assert rig.form.steps_problem() == "Steps must be at least 2 for demo, got 1."
    assert rig.notices.notices() == ()
    assert rig.gate_advice.threshold_hint() == ""
    rig.form.steps = 2  # valid again, with nothing to skip: the schedule banner says so
    assert [n.key for n in rig.notices.notices()] == ["schedule"]
    assert "1 steps" not in rig.gate_advice.threshold_hint()


def test_a_count_of_one_is_singular() -> None:
    from app.ui.images import _resume_note

    assert _resume_note(1, 28) == "first step shared with vanilla"
    assert _resume_note(5, 28) == "first 5 steps shared with vanilla"
