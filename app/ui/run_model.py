"""The result side's observable state: the run going on, or the finished result on screen.
Widgets only render it; one method (``RunModel.handle_event``) applies engine events and one
(``RunModel.show``) puts a finished report on screen. The inputs are ``app.ui.form_model``'s."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtCore import QObject, Signal

from app.engine.events import (
    EngineEvent,
    LoadProgress,
    ModelReady,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
    StepDone,
    StepPreview,
)
from app.engine.loader import MEMORY_WARNING
from app.engine.report import RunReport
from app.engine.request import (
    GenerationRequest,
)
from app.gate import Engagement, StepEvent
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.ui.analysis import (
    EngagementBand,
    Notice,
    NoticeKind,
    RunAnalysis,
    RunSaved,
    count_skips,
    difference_map,
    engagement_band,
)
from app.ui.job_slot import EngineLink, JobSlot, JobStatus, NoEngine
from app.ui.observable import Prop
from app.variants import (
    UnknownVariantError,
)

StepRow = tuple[StepEvent | None, ...]
PreviewRow = tuple[np.ndarray | None, ...]  # one step preview per step, None until it arrives
SCHEDULE_WARNING_KINDS = frozenset({"distilled", "schedule", "engagement", "distilled-schedule"})


class RunModel(QObject):
    """Everything the result side of the window shows about the current (or reopened) run.

    A running pass fills the step rows, images and times as its events arrive. A finished result
    is one ``RunReport``, shown by ``show`` whether it is a run that just finished, a run
    reopened from the history or a threshold comparison's entry: SSIM, the local difference, the
    speedup and its label, the skips and the engagement are read from ``report``, never copied,
    so nothing on screen can belong to another run."""

    status_changed = Signal(object)
    run_id_changed = Signal(object)
    request_changed = Signal(object)
    phase_changed = Signal(object)
    progress_changed = Signal(object)
    active_pass_changed = Signal(object)
    gated_steps_changed = Signal(object)
    vanilla_steps_changed = Signal(object)
    resumed_from_changed = Signal(object)
    vanilla_cached_changed = Signal(object)
    gated_image_changed = Signal(object)
    vanilla_image_changed = Signal(object)
    difference_changed = Signal(object)
    gated_seconds_changed = Signal(object)
    vanilla_seconds_changed = Signal(object)
    error_changed = Signal(object)
    notices_changed = Signal(object)
    band_changed = Signal(object)
    saved_entry_changed = Signal(object)
    load_seconds_changed = Signal(object)
    origin_changed = Signal(object)
    gated_preview_changed = Signal(object)
    vanilla_preview_changed = Signal(object)
    gated_thumbnails_changed = Signal(object)
    vanilla_thumbnails_changed = Signal(object)
    report_changed = Signal(object)
    engagement_changed = Signal(object)

    request = Prop[GenerationRequest | None](None)
    phase = Prop("Ready")
    progress = Prop(0.0)  # 0–1, or -1 while indeterminate (loading)
    active_pass = Prop[Pass | None](None)
    gated_steps = Prop[StepRow](())
    vanilla_steps = Prop[StepRow](())
    resumed_from = Prop[int | None](None)
    vanilla_cached = Prop(False)
    gated_image = Prop[np.ndarray | None](None)
    vanilla_image = Prop[np.ndarray | None](None)
    difference = Prop[np.ndarray | None](None)
    gated_seconds = Prop[float | None](None)
    vanilla_seconds = Prop[float | None](None)
    error = Prop[Notice | None](None)
    notices = Prop[tuple[Notice, ...]](())
    band = Prop[EngagementBand | None](None)
    saved_entry = Prop[str | None](None)
    load_seconds = Prop[float | None](None)
    # Where the shown result came from when not from a run of this session, e.g. "from history,
    # run at 14:02": an opened run's "vanilla cached" described its own run, not this showing.
    origin = Prop("")
    # Live step previews of the running passes: the latest one (shown until the pass's image
    # arrives) and every step's, for the timeline's hover.
    gated_preview = Prop[np.ndarray | None](None)
    vanilla_preview = Prop[np.ndarray | None](None)
    gated_thumbnails = Prop[PreviewRow](())
    vanilla_thumbnails = Prop[PreviewRow](())
    report = Prop[RunReport | None](None)  # the shown result (None: running, or nothing yet)
    # Where skipping begins on the shown run's vanilla trace (the engine's, typed): from its
    # engagement warning while it runs, from its report once shown.
    engagement = Prop[Engagement | None](None)

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        engine: EngineLink | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(parent)
        # The run's job on the engine thread (``app.ui.job_slot``); its status and run id are
        # this model's, observed as ``status_changed`` and ``run_id_changed``.
        self.slot = JobSlot(
            engine if engine is not None else NoEngine(), run_id=0, changed=self._slot_changed
        )
        self.clock = clock
        self._pass_started_at: float | None = None  # clock() when the running pass began
        self._step_ended_at: float | None = None  # clock() when its last step arrived

    @property
    def status(self) -> JobStatus:
        return self.slot.status

    @status.setter
    def status(self, value: JobStatus) -> None:
        self.slot.status = value

    @property
    def run_id(self) -> int:
        return self.slot.run_id or 0

    @run_id.setter
    def run_id(self, value: int) -> None:
        self.slot.run_id = value

    def _slot_changed(self, name: str, value: object) -> None:
        getattr(self, f"{name}_changed").emit(value)

    @property
    def busy(self) -> bool:
        return self.status.busy

    @property
    def gate(self) -> str:
        """The gate of the shown run (its request's)."""
        request = self.request
        return request.gate if request is not None else DEFAULT_GATE

    @property
    def gate_label(self) -> str:
        return gate_kind(self.gate).label

    @property
    def gated_pass_name(self) -> str:
        return gate_kind(self.gate).pass_name

    @property
    def finished(self) -> bool:
        return self.status is JobStatus.finished

    # -- the shown result's figures: its report's ----------------------------------------------
    @property
    def ssim(self) -> float | None:
        return self.report.ssim if self.report is not None else None

    @property
    def ssimulacra2(self) -> float | None:
        """SSIMULACRA2 of the gated image against vanilla's (``app.metrics``)."""
        return self.report.ssimulacra2 if self.report is not None else None

    @property
    def local_diff(self) -> float | None:
        """The worst window of the difference (``app.metrics``), 0–1."""
        return self.report.local_diff_value if self.report is not None else None

    @property
    def speedup(self) -> float | None:
        return self.report.speedup if self.report is not None else None

    @property
    def speedup_estimated(self) -> bool:
        return self.report is not None and self.report.speedup_estimated

    @property
    def speedup_label(self) -> str:
        """How the speedup was measured (``app.engine.report.speedup_label``)."""
        return self.report.speedup_label if self.report is not None else ""

    @property
    def skips(self) -> int | None:
        """The shown result's skips; while a run goes, those of its steps so far (None before
        the first gated step)."""
        if self.report is not None:
            return self.report.gated.skipped
        if all(s is None for s in self.gated_steps):
            return None
        return count_skips(self.gated_steps)

    def status_text(self) -> str:
        """The phase, and while a pass runs, how long is left of it: from the mean of the finished
        step times of this pass (before the gated pass has any, the vanilla pass's), else
        "first step… 12 s" while the first step is still going."""
        which, started = self.active_pass, self._pass_started_at
        if which is None or started is None or self.status is not JobStatus.running:
            return self.phase
        row = self.gated_steps if which is Pass.gated else self.vanilla_steps
        done = [s for s in row if s is not None]
        left = len(row) - len(done)
        if left <= 0:
            return self.phase
        now = self.clock()
        sample = done if done else ([] if which is Pass.vanilla else self._finished_vanilla())
        if not sample:
            return f"{self.phase} · first step… {_duration(now - started)}"
        mean = sum(s.seconds for s in sample) / len(sample)
        into_step = now - (self._step_ended_at if done and self._step_ended_at else started)
        remaining = max(0.0, left * mean - into_step)
        if remaining < 1.0:  # slower than the mean says "finishing", not "0 s"
            tail = "finishing…" if into_step > mean else "less than a second left in this pass"
            return f"{self.phase} · {tail}"
        return f"{self.phase} · about {_duration(remaining)} left in this pass"

    def _finished_vanilla(self) -> list[StepEvent]:
        if self.vanilla_cached:
            return []  # a cached pass's times are another load's, and another run's
        return [s for s in self.vanilla_steps if s is not None and s.seconds > 0]

    # -- lifecycle driven by the controller -------------------------------------------------------
    def begin(self, run_id: int, request: GenerationRequest) -> None:
        self._pass_started_at = self._step_ended_at = None
        self.run_id = run_id
        self.request = request
        self.status = JobStatus.loading
        self.phase = "Starting…"
        self.progress = -1.0
        self.active_pass = None
        blank: StepRow = (None,) * request.steps
        self.gated_steps = blank
        self.vanilla_steps = blank if request.compare_vanilla else ()
        self.resumed_from = None
        self.vanilla_cached = False
        self.gated_image = None
        self.difference = None
        self.gated_seconds = None
        self.error = None
        self.notices = ()
        self.saved_entry = None
        self.engagement = None
        self.origin = ""
        self.report = None
        # Keep the previous vanilla image and band until the new ones arrive: a threshold-only
        # re-run shows the same vanilla, and blanking it would flicker.
        if self.band is not None and (self.band.variant_id, self.band.steps) != (
            request.variant_id,
            request.steps,
        ):
            self.band = None
        self.vanilla_image = None if not request.compare_vanilla else self.vanilla_image
        self.vanilla_seconds = None
        self.gated_preview = self.vanilla_preview = None
        self.gated_thumbnails = (None,) * request.steps
        self.vanilla_thumbnails = (None,) * request.steps if request.compare_vanilla else ()

    def mark_cancelling(self) -> None:
        if self.status.busy:
            self.status = JobStatus.cancelling
            self.phase = "Cancelling…"

    def fail_locally(
        self, message: str, details: str = "", *, title: str = "Cannot generate"
    ) -> None:
        """A failure found before anything reached the engine (invalid input), titled with the
        action that failed."""
        self.error = Notice(NoticeKind.error, title, message, details, key="error")

    def dismiss(self, key: str) -> None:
        if self.error is not None and self.error.key == key:
            self.error = None
        self.notices = tuple(n for n in self.notices if n.key != key)

    # -- the one event handler ---------------------------------------------------------------------
    def handle_event(self, event: EngineEvent | RunAnalysis | RunSaved) -> None:
        if not self.slot.owns(event):
            return  # a late event of an earlier run, or a load while no run goes
        if isinstance(event, LoadProgress | ModelReady):
            self._on_load(event)
            return
        match event:
            case PassStarted():
                self._on_pass_started(event)
            case StepDone():
                self._on_step(event)
            case StepPreview():
                self._on_preview(event)
            case PassFinished():
                self._on_pass_finished(event)
            case RunWarning():
                if event.kind == MEMORY_WARNING:
                    return  # the memory banner says it before the run (app.ui.quantize_model)
                if event.kind in SCHEDULE_WARNING_KINDS:
                    # Folded into the schedule banner, not shown on its own: the banner derives
                    # the run's check from its request and reads the engagement, typed.
                    if event.engagement is not None:
                        self.engagement = event.engagement
                    return
                title = "Not saved to history" if event.kind == "history" else "Engine notice"
                notice = Notice(
                    NoticeKind.warning,
                    title,
                    event.message,
                    "\n".join(f"{k}: {v}" for k, v in event.details.items()),
                    key=event.kind,
                )
                # The same kind in other words is another note (a repeat replaces its own).
                kept = (
                    n for n in self.notices if (n.key, n.message) != (notice.key, notice.message)
                )
                self.notices = (*kept, notice)
            case RunAnalysis():
                self.difference = event.difference
            case RunSaved():
                self.saved_entry = event.folder
            case RunFinished():
                self._on_finished(event)
            case RunCancelled():
                self.active_pass = None
                at = "" if event.at_step is None else f" at step {event.at_step + 1}"
                self.phase = f"Cancelled{at}"
                self.progress = 0.0
                self.status = JobStatus.cancelled  # last: listeners see the final state
            case RunFailed():
                self.active_pass = None
                self.phase = "Failed"
                self.progress = 0.0
                self.error = Notice(
                    NoticeKind.error, "Generation failed", event.message, event.details, key="error"
                )
                self.status = JobStatus.failed

    def _on_load(self, event: LoadProgress | ModelReady) -> None:
        if isinstance(event, LoadProgress):
            self.status = JobStatus.loading
            self.phase = event.message[:1].upper() + event.message[1:]
            total = event.total_bytes
            self.progress = (event.done_bytes or 0) / total if total else -1.0
        else:
            self.load_seconds = event.seconds
            self.phase = "Model ready"

    def _on_pass_started(self, event: PassStarted) -> None:
        if self.status is not JobStatus.cancelling:
            self.status = JobStatus.running
        self._pass_started_at = self.clock()
        self._step_ended_at = None
        if event.which is Pass.vanilla:
            self.vanilla_cached = event.cached
            self.vanilla_steps = _resize(self.vanilla_steps, event.num_steps, keep=event.cached)
            self.vanilla_thumbnails = (None,) * event.num_steps
            self.vanilla_preview = None
            if event.cached:
                self.phase = "Vanilla reused from the cache"
            else:
                self.vanilla_image = None
                self.band = None  # drawn from the last vanilla trace, not the one now running
                self.active_pass = Pass.vanilla
                self.phase = f"Vanilla pass · step 0 of {event.num_steps}"
        else:
            self.active_pass = Pass.gated
            self.resumed_from = event.resumed_from
            self.gated_steps = (None,) * event.num_steps
            self.gated_thumbnails = (None,) * event.num_steps
            self.gated_preview = None
            resumed = f" (resumed at step {event.resumed_from + 1})" if event.resumed_from else ""
            self.phase = f"{self.gated_pass_name}{resumed} · step 0 of {event.num_steps}"
        self._update_progress()

    def _on_step(self, event: StepDone) -> None:
        step = event.step
        name = "gated_steps" if event.which is Pass.gated else "vanilla_steps"
        row = list(_resize(getattr(self, name), step.num_steps, keep=True))
        row[step.index] = step
        self._step_ended_at = self.clock()
        setattr(self, name, tuple(row))
        label = self.gated_pass_name if event.which is Pass.gated else "Vanilla pass"
        if self.status is not JobStatus.cancelling:
            self.phase = f"{label} · step {step.index + 1} of {step.num_steps}"
        self._update_progress()

    def _on_preview(self, event: StepPreview) -> None:
        name = "gated" if event.which is Pass.gated else "vanilla"
        row = list(getattr(self, f"{name}_thumbnails"))
        if event.index >= len(row):
            row.extend([None] * (event.index + 1 - len(row)))
        row[event.index] = event.image
        setattr(self, f"{name}_thumbnails", tuple(row))
        setattr(self, f"{name}_preview", event.image)

    def _on_pass_finished(self, event: PassFinished) -> None:
        if event.which is Pass.vanilla:
            self.vanilla_steps = tuple(event.steps) if event.steps else self.vanilla_steps
            self.vanilla_image = event.image
            self.vanilla_seconds = event.seconds
            self._update_band()
        else:
            if event.steps:
                self.gated_steps = tuple(event.steps)
            self.gated_image = event.image
            self.gated_seconds = event.seconds
        self._update_progress()

    def _on_finished(self, event: RunFinished) -> None:
        # The worker measured the difference image off the GUI thread (``RunAnalysis``, just
        # before this event).
        self.show(event.report, difference=self.difference)

    def _update_band(self) -> None:
        request = self.request
        if request is None:
            return
        try:
            variant = request.variant
        except UnknownVariantError:  # a reopened run of a variant since removed
            self.band = None
            return
        self.band = engagement_band(
            variant,
            request.threshold,
            self.vanilla_steps,
            request.gate,
            left_out=request.steps_left_out,
        )

    def _update_progress(self) -> None:
        request = self.request
        if request is None or self.status is JobStatus.cancelling:
            return
        n = request.steps
        vanilla_total = n if request.compare_vanilla else 0
        done = 0
        if vanilla_total:
            done += n if self.vanilla_cached else sum(s is not None for s in self.vanilla_steps)
        if self.active_pass is Pass.gated or self.gated_image is not None:
            done += sum(s is not None for s in self.gated_steps) + (self.resumed_from or 0)
        self.progress = min(1.0, done / max(1, vanilla_total + n))

    # -- the one way a finished result reaches the screen ----------------------------------------
    def show(
        self,
        report: RunReport,
        origin: str = "",
        *,
        saved_entry: str | None = None,
        phase: str | None = None,
        difference: np.ndarray | None = None,
    ) -> None:
        """Show one finished report as the result on screen: a run of this session that just
        finished (``origin`` ""), or, with no engine involved, a run reopened from the history or
        a threshold comparison's entry (``origin`` says where it came from, e.g. "from history,
        run at 14:02"). Everything about the result is this report's: its figures, its images and
        steps, the engagement and the band the banners read; a shown result from elsewhere also
        drops the banners of the run it replaces. ``difference`` is the measured difference image
        (computed here when it is not given)."""
        vanilla = report.vanilla
        live = not origin
        if difference is None and vanilla is not None and not live:
            difference = difference_map(report.gated.image, vanilla.image)
        self._pass_started_at = self._step_ended_at = None
        if not live:
            self.run_id = -1
            self.error = None
            self.notices = ()
            self.gated_preview = self.vanilla_preview = None
            self.gated_thumbnails = self.vanilla_thumbnails = ()  # no previews are kept
            self.saved_entry = saved_entry
        self.request = report.request
        self.report = report
        self.engagement = report.engagement
        self.gated_steps = report.gated.steps
        self.vanilla_steps = vanilla.steps if vanilla is not None else ()
        self.resumed_from = report.gated.resumed_from
        self.vanilla_cached = report.vanilla_cached
        self.gated_image = report.gated.image
        self.vanilla_image = vanilla.image if vanilla is not None else None
        self.difference = difference
        self.gated_seconds = report.gated.loop_seconds
        self.vanilla_seconds = vanilla.loop_seconds if vanilla is not None else None
        if not live or self.band is None:
            # A run of this session drew its band from its vanilla pass as it finished (the same
            # trace as the report's): kept, so the plot does not rescale as the run ends.
            self._update_band()
        self.origin = origin
        self.active_pass = None
        self.progress = 1.0
        if phase is None:
            skipped, total = report.gated.skipped, len(report.gated.steps)
            seconds = report.gated.loop_seconds
            phase = (
                f"Finished · {skipped} of {total} steps skipped · {seconds:.2f} s"
                if live
                else f"Showing {origin}"
            )
        self.phase = phase
        self.status = JobStatus.finished  # last: listeners see the final state


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest:02d} s"


def _resize(row: Sequence[StepEvent | None], n: int, *, keep: bool) -> StepRow:
    if len(row) == n and keep:
        return tuple(row)
    if not keep:
        return (None,) * n
    return tuple(row[:n]) + (None,) * max(0, n - len(row))


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
