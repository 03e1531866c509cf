"""``JobSlot``: one job on the engine thread as the run, the comparison and the calibration see
it (status, run id, engine link), against a plain fake link."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.events import LoadProgress, ModelReady, Pass, RunCancelled, StepDone
from app.engine.jobs import Generate, Job
from app.engine.request import make_request
from app.gate import Decision, StepEvent
from app.gate.kinds import DEFAULT_GATE
from app.ui.job_slot import JobSlot, JobStatus
from app.ui.run_model import RunModel


@dataclass
class Link:
    """Takes a job unless ``busy``; cancels unless told not to."""

    busy: bool = False
    cancels: bool = True
    next_id: int = 7
    cancelled: int = 0
    jobs: list[Job] = field(default_factory=list)

    def submit(self, job: Job) -> int | None:
        if self.busy:
            return None
        self.jobs.append(job)
        self.busy = True
        return self.next_id

    def cancel(self) -> bool:
        self.cancelled += 1
        return self.cancels

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        return True


def _job() -> Generate:
    return Generate(make_request("demo", "a red star", steps=3))


def test_a_submitted_job_gets_the_engines_run_id_and_the_model_sets_its_status() -> None:
    link = Link()
    slot = JobSlot(link)
    assert (slot.status, slot.run_id, slot.busy) == (JobStatus.idle, None, False)
    assert slot.submit(_job()) == 7
    assert slot.run_id == 7 and slot.status is JobStatus.idle  # the model's begin sets it
    assert slot.submit(_job()) is None  # the engine is busy: nothing recorded
    assert slot.run_id == 7 and len(link.jobs) == 1


def test_cancel_asks_the_engine_only_while_the_job_goes_on() -> None:
    link = Link()
    slot = JobSlot(link)
    assert not slot.cancel() and link.cancelled == 0  # idle: nothing to cancel
    slot.status = JobStatus.running
    assert slot.cancel() and slot.status is JobStatus.cancelling and link.cancelled == 1
    refusing = JobSlot(Link(cancels=False))
    refusing.status = JobStatus.loading
    assert not refusing.cancel() and refusing.status is JobStatus.loading


def test_the_slot_owns_its_runs_events_and_a_load_only_while_busy() -> None:
    slot = JobSlot(Link())
    load = LoadProgress("demo", "loading demo")
    assert not slot.owns(load) and not slot.owns(ModelReady("demo", 0.1))
    slot.submit(_job())
    slot.status = JobStatus.loading
    assert slot.owns(load) and slot.owns(ModelReady("demo", 0.1))
    assert slot.owns(RunCancelled(7, None)) and not slot.owns(RunCancelled(8, None))
    slot.status = JobStatus.cancelled
    assert not slot.owns(load) and slot.owns(RunCancelled(7, None))


def test_changes_are_told_once_each_and_only_when_they_change() -> None:
    told: list[tuple[str, object]] = []
    slot = JobSlot(Link(), run_id=0, changed=lambda name, value: told.append((name, value)))
    slot.status = JobStatus.idle
    slot.run_id = 0
    assert told == []
    slot.submit(_job())
    slot.status = JobStatus.running
    slot.status = JobStatus.running
    slot.run_id = None
    assert told == [("run_id", 7), ("status", JobStatus.running), ("run_id", None)]


def test_the_run_model_observes_its_slot() -> None:
    """``RunModel.status``/``run_id`` are its slot's, re-emitted as its own signals; a late
    event of another run is not its run's."""
    link = Link()
    run = RunModel(engine=link)
    statuses: list[object] = []
    run_ids: list[object] = []
    run.status_changed.connect(statuses.append)
    run.run_id_changed.connect(run_ids.append)
    request = make_request("demo", "a red star", steps=3)
    run_id = run.slot.submit(Generate(request))
    assert run_id == 7 and run.run_id == 7 and run_ids == [7]
    run.begin(7, request)
    assert run.status is JobStatus.loading and statuses == [JobStatus.loading]
    step = StepEvent(0, 3, Decision.computed, threshold=0.0, seconds=1.0, gate=DEFAULT_GATE)
    run.handle_event(StepDone(8, Pass.gated, step))  # another run's
    assert run.gated_steps == (None, None, None)
    run.handle_event(StepDone(7, Pass.gated, step))
    assert run.gated_steps[0] == step
    assert run.busy and run.slot.cancel() and run.status is JobStatus.cancelling
    assert statuses == [JobStatus.loading, JobStatus.cancelling]
