"""The one job runner above the engine: every kind of run is a plan over resumed passes.

A *job* is the frozen thing the window or the command line hands the engine thread:

* ``Generate``: one request, one vanilla and one gated pass (the Generate button, ``generate``);
* ``ThresholdComparison`` (``app.engine.comparison``): 4–8 thresholds of one request
  (``compare``, the window's comparison view);
* ``QualitySearch`` (``app.engine.target``): the threshold with the most skips whose measured
  quality meets a target (``generate --target-ssim``, the window's Target quality);
* ``ThresholdSweep``: thresholds of one request in a given order (``sweep --timing none``);
* ``Calibrate`` (``app.engine.calibration``): one vanilla pass per prompt, then the fit and the
  user calibration file (``calibrate``, the window's Calibrate This Model…).

Each kind has a *plan* (``app.engine.protocol.JobPlan``), found in ``PLANS`` by the job's type: it
names the next request from the reports so far, hears each finished pass, and at the end emits the
job's one terminal event and returns its result. ``run_job`` runs a plan through the engine's
ordinary ``run`` (``EngineProtocol``: the real engine or the scripted fake), one request at a
time, until the plan has no more, cancel is set or a pass fails. The passes of a job share one
``vanilla_key()`` and the later ones set ``resume``, so the engine computes (and times) vanilla
once, caches it and resumes each gated pass from it; each report carries the same honest speedup
label a single Generate would (``app.engine.report.speedup_label``).

Every pass's own events (steps, passes, previews) are forwarded under the job's ``run_id``; a
warning is forwarded once however many passes repeat it; the passes' terminal events are consumed
here and the plan speaks the job's own. A job is *cancelled* only where cancel stopped a pass the
plan still wanted: a cancel that lands after the last pass leaves a complete job. ``run_job``
raises no ``Exception`` (a plan's own error becomes ``RunFailed``; Ctrl+C's ``KeyboardInterrupt``
passes through to the command line, which keeps what finished). Qt-free.

A new kind of job is a frozen dataclass, a plan class and one entry in ``PLANS``.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, overload

from app.engine.calibration import (
    Calibrate,
    CalibrationResult,
    PromptCapture,
    ThresholdChooser,
    calibration_document,
    check_calibration,
    write_calibration,
)
from app.engine.comparison import ComparisonResult, ThresholdComparison
from app.engine.events import (
    CalibrationFinished,
    CalibrationProgress,
    CalibrationTrials,
    ComparisonEntryDone,
    ComparisonFinished,
    EngineEvent,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
    SweepEntryDone,
    SweepFinished,
)
from app.engine.protocol import Emit, EngineProtocol, JobPlan, PassesOutcome
from app.engine.report import RunReport
from app.engine.request import GenerationRequest
from app.engine.target import QualitySearch, SearchPlan
from app.errors import UserFacingError

log = logging.getLogger(__name__)

Plan = Callable[[Sequence[RunReport]], GenerationRequest | None]
OnReport = Callable[[int, RunReport], None]


@dataclass(frozen=True, slots=True)
class Generate:
    """One request: its vanilla pass (or the cached one) and its gated pass."""

    request: GenerationRequest


@dataclass(frozen=True, slots=True)
class ThresholdSweep:
    """Thresholds of one request in the given order, every gated pass resumed from one vanilla
    (the in-process sweep: exact skips and SSIM, no timing)."""

    base: GenerationRequest
    thresholds: tuple[float, ...]

    def requests(self) -> tuple[GenerationRequest, ...]:
        return tuple(
            replace(self.base, threshold=t, resume=True, compare_vanilla=True)
            for t in self.thresholds
        )


Job = Generate | ThresholdComparison | QualitySearch | ThresholdSweep | Calibrate


def run_resumed_passes(
    engine: EngineProtocol,
    run_id: int,
    plan: Plan,
    emit: Emit,
    cancel: threading.Event,
    on_report: OnReport | None = None,
) -> PassesOutcome:
    """Run the planned requests one after another; see the module docstring."""
    outcome = PassesOutcome()
    warned: set[tuple[str, str]] = set()

    while True:
        request = plan(tuple(outcome.reports))
        if request is None:
            break
        if cancel.is_set():  # the plan wanted another pass: the job stops short of it
            outcome.cancelled = True
            break
        ended: list[EngineEvent] = []

        def forward(event: EngineEvent, ended: list[EngineEvent] = ended) -> None:
            match event:
                case RunFinished() | RunCancelled() | RunFailed():
                    ended.append(event)
                case RunWarning():
                    if (event.kind, event.message) not in warned:
                        warned.add((event.kind, event.message))
                        emit(event)
                case _:
                    emit(event)

        engine.run(run_id, request, forward, cancel)
        end = ended[0] if ended else None
        if isinstance(end, RunFinished):
            outcome.reports.append(end.report)
            if on_report is not None:
                on_report(len(outcome.reports) - 1, end.report)
        elif isinstance(end, RunCancelled):
            outcome.cancelled = True
            outcome.cancelled_event = end
            break
        else:
            outcome.failure = (
                end
                if isinstance(end, RunFailed)
                else RunFailed(
                    run_id, "the engine stopped without reporting a result", "protocol violation"
                )
            )
            break
    return outcome


@overload
def run_job(
    engine: EngineProtocol,
    run_id: int,
    job: Generate | QualitySearch,
    emit: Emit,
    cancel: threading.Event,
) -> RunReport | None: ...
@overload
def run_job(
    engine: EngineProtocol,
    run_id: int,
    job: ThresholdComparison,
    emit: Emit,
    cancel: threading.Event,
) -> ComparisonResult | None: ...
@overload
def run_job(
    engine: EngineProtocol, run_id: int, job: ThresholdSweep, emit: Emit, cancel: threading.Event
) -> SweepFinished | None: ...
@overload
def run_job(
    engine: EngineProtocol, run_id: int, job: Calibrate, emit: Emit, cancel: threading.Event
) -> CalibrationResult | None: ...
def run_job(
    engine: EngineProtocol, run_id: int, job: Job, emit: Emit, cancel: threading.Event
) -> object:
    """Run ``job`` on the calling thread: its passes' events, then exactly one terminal event
    (the job's own: see each plan). Returns the job's result, None where nothing finished."""
    plan: JobPlan = PLANS[type(job)](job, run_id, emit)
    try:
        outcome = run_resumed_passes(
            engine, run_id, plan.next_request, emit, cancel, plan.on_report
        )
        return plan.finish(outcome)
    except Exception as exc:  # a plan's own error (or an engine that broke the protocol)
        log.exception("job %s failed", run_id)
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        emit(RunFailed(run_id, f"generation failed: {message}", traceback.format_exc()))
        return None


class GeneratePlan:
    """One request; ends as that pass ended (``RunFinished``, ``RunCancelled`` or ``RunFailed``)."""

    def __init__(self, job: Generate, run_id: int, emit: Emit) -> None:
        self.request, self.run_id, self.emit = job.request, run_id, emit

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        return None if done else self.request

    def on_report(self, index: int, report: RunReport) -> None:
        pass

    def finish(self, outcome: PassesOutcome) -> RunReport | None:
        if not outcome.reports:
            self.emit(outcome.stopped(self.run_id))
            return None
        report = outcome.reports[0]
        self.emit(RunFinished(self.run_id, report))
        return report


class ComparisonPlan:
    """Every threshold of a ``ThresholdComparison`` in order: one ``ComparisonEntryDone`` per
    finished threshold, then ``ComparisonFinished`` (cancel and failure included, once an entry
    finished: nothing finished is lost), or ``RunCancelled``/``RunFailed`` where none did."""

    def __init__(self, job: ThresholdComparison, run_id: int, emit: Emit) -> None:
        self.comparison, self.run_id, self.emit = job, run_id, emit
        self.requests = job.requests()

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        return self.requests[len(done)] if len(done) < len(self.requests) else None

    def on_report(self, index: int, report: RunReport) -> None:
        self.emit(ComparisonEntryDone(self.run_id, index, report))

    def finish(self, outcome: PassesOutcome) -> ComparisonResult | None:
        if not outcome.reports:
            self.emit(outcome.failure or RunCancelled(self.run_id, None))
            return None
        result = ComparisonResult(
            self.comparison,
            tuple(outcome.reports),
            cancelled=outcome.cancelled,
            failure=outcome.failure.message if outcome.failure is not None else None,
        )
        self.emit(ComparisonFinished(self.run_id, result))
        return result


class SweepPlan:
    """Every threshold of a ``ThresholdSweep`` in order: one ``SweepEntryDone`` per finished
    threshold, then ``SweepFinished``, or ``RunCancelled``/``RunFailed`` where none finished."""

    def __init__(self, job: ThresholdSweep, run_id: int, emit: Emit) -> None:
        self.run_id, self.emit = run_id, emit
        self.requests = job.requests()

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        return self.requests[len(done)] if len(done) < len(self.requests) else None

    def on_report(self, index: int, report: RunReport) -> None:
        self.emit(SweepEntryDone(self.run_id, index, report))

    def finish(self, outcome: PassesOutcome) -> SweepFinished | None:
        if not outcome.reports:
            self.emit(outcome.failure or RunCancelled(self.run_id, None))
            return None
        finished = SweepFinished(
            self.run_id,
            tuple(outcome.reports),
            cancelled=outcome.cancelled,
            failure=outcome.failure.message if outcome.failure is not None else None,
        )
        self.emit(finished)
        return finished


class CalibratePlan:
    """One vanilla pass per prompt not yet measured, in order (a ``CalibrationProgress`` per
    prompt); then the fit, and each calibrated gate's default threshold by the shipped defaults'
    rule on those prompts (``ThresholdChooser``: gated passes resumed from the prompts' vanilla
    runs, a ``CalibrationTrials`` per pass); then the file (``CalibrationFinished``). A job
    ``check_calibration`` refuses runs no pass and ends with ``RunFailed`` and its sentence;
    stopped short (cancel, a pass that failed, a model that would not load) it writes nothing and
    ends as the pass ended; a fit or a write that fails ends with ``RunFailed`` and its one
    sentence."""

    def __init__(self, job: Calibrate, run_id: int, emit: Emit) -> None:
        self.job, self.run_id, self.emit = job, run_id, emit
        self.captures: list[PromptCapture | None] = [
            job.captured[i] if i < len(job.captured) else None for i in range(len(job.prompts))
        ]
        self.pending = job.pending()
        self.versions: dict[str, Any] = {}
        self.refusal: UserFacingError | None = None
        self.failure: UserFacingError | None = None  # the fit, before the threshold trials
        self.chooser: ThresholdChooser | None = None
        try:
            check_calibration(job)
        except UserFacingError as exc:  # the window and the command line checked it already
            self.refusal = exc

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        if self.refusal is not None or self.failure is not None:
            return None
        if len(done) < len(self.pending):
            return self.job.pass_request(self.job.prompts[self.pending[len(done)]])
        if self.chooser is None:
            captures = [c for c in self.captures if c is not None]
            try:
                draft = calibration_document(self.job, captures, self.versions)
            except UserFacingError as exc:
                self.failure = exc
                return None
            self.chooser = ThresholdChooser(self.job, captures, draft)
        trying = self.chooser.next_trial()
        if trying is None:
            return None
        self.emit(CalibrationTrials(self.run_id, self.chooser.done, trying=trying))
        return self.chooser.request()

    def on_report(self, index: int, report: RunReport) -> None:
        if index >= len(self.pending):  # a threshold trial
            assert self.chooser is not None
            trial = self.chooser.record(report)
            self.emit(CalibrationTrials(self.run_id, self.chooser.done, trial))
            return
        prompt_index = self.pending[index]
        capture = PromptCapture.from_report(self.job.prompts[prompt_index], report)
        self.captures[prompt_index] = capture
        self.versions = dict(report.versions)
        done = sum(c is not None for c in self.captures)
        self.emit(CalibrationProgress(self.run_id, prompt_index, done, len(self.captures), capture))

    def finish(self, outcome: PassesOutcome) -> CalibrationResult | None:
        if self.refusal is not None:
            self.emit(RunFailed(self.run_id, str(self.refusal), "refused before any pass"))
            return None
        if self.failure is not None:
            self.emit(RunFailed(self.run_id, str(self.failure), "the fit failed"))
            return None
        captures = [c for c in self.captures if c is not None]
        stopped = outcome.cancelled or outcome.failure is not None
        if len(captures) < len(self.captures) or self.chooser is None or stopped:
            self.emit(outcome.stopped(self.run_id))
            return None
        try:
            result = write_calibration(
                self.job, captures, self.versions or _runtime(), self.chooser.outcome()
            )
        except UserFacingError as exc:
            self.emit(RunFailed(self.run_id, str(exc), traceback.format_exc()))
            return None
        self.emit(CalibrationFinished(self.run_id, result))
        return result


def _runtime() -> dict[str, Any]:
    """The versions where no pass ran in this job (every prompt came from a resumed command)."""
    from app.hardware import runtime_info

    return runtime_info()


# Each kind of job and its plan: (job, run_id, emit) → the plan the runner follows.
PLANS: dict[type, Callable[[Any, int, Emit], JobPlan]] = {
    Generate: GeneratePlan,
    ThresholdComparison: ComparisonPlan,
    QualitySearch: SearchPlan,
    ThresholdSweep: SweepPlan,
    Calibrate: CalibratePlan,
}
