"""Several gated passes of one vanilla run, as one run on the engine thread.

``run_resumed_passes`` is the reusable part: it asks ``plan`` for the next request (given the
reports so far), runs it through the engine's ordinary ``run`` and collects its ``RunReport``,
until ``plan`` returns None, cancel is set or a pass fails. Every request shares one
``vanilla_key()`` and sets ``resume``, so the engine computes (and times) vanilla once, caches it,
and resumes every gated pass from it; each report carries the same honest speedup label a single
Generate would (``app.engine.report.speedup_label``). A threshold comparison plans a fixed list; a
search for a target quality can plan each threshold from the reports before it.

``run_comparison`` runs a ``ThresholdComparison`` and speaks the comparison's events: one
``ComparisonEntryDone`` per finished threshold, then ``ComparisonFinished`` (cancel and failure
included, once an entry finished: nothing finished is lost), or ``RunCancelled``/``RunFailed``
where none did. Qt-free; works with any ``EngineProtocol`` (the real engine or the test fake).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.engine.comparison import ComparisonResult, ThresholdComparison
from app.engine.events import (
    ComparisonEntryDone,
    ComparisonFinished,
    EngineEvent,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
)
from app.engine.protocol import Emit, EngineProtocol
from app.engine.report import RunReport
from app.engine.request import GenerationRequest

Plan = Callable[[Sequence[RunReport]], GenerationRequest | None]
OnReport = Callable[[int, RunReport], None]


@dataclass
class BatchOutcome:
    reports: list[RunReport] = field(default_factory=list)
    cancelled: bool = False
    failure: RunFailed | None = None


def run_resumed_passes(
    engine: EngineProtocol,
    run_id: int,
    plan: Plan,
    emit: Emit,
    cancel: threading.Event,
    on_report: OnReport | None = None,
) -> BatchOutcome:
    """Run the planned requests one after another; see the module docstring. Each pass's own
    events (steps, passes) are forwarded under ``run_id``; a warning is forwarded once however
    many passes repeat it; the passes' terminal events are consumed here."""
    outcome = BatchOutcome()
    warned: set[tuple[str, str]] = set()

    while not cancel.is_set():
        request = plan(tuple(outcome.reports))
        if request is None:
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
            break
        else:
            outcome.failure = (
                end
                if isinstance(end, RunFailed)
                else RunFailed(run_id, "the engine stopped without a result", "protocol violation")
            )
            break
    if cancel.is_set() and outcome.failure is None:
        outcome.cancelled = True
    return outcome


def run_comparison(
    engine: EngineProtocol,
    run_id: int,
    comparison: ThresholdComparison,
    emit: Emit,
    cancel: threading.Event,
) -> ComparisonResult | None:
    """Run every threshold of ``comparison``; emits as the module docstring says and returns
    the result (None where no entry finished)."""
    requests = comparison.requests()

    def plan(done: Sequence[RunReport]) -> GenerationRequest | None:
        return requests[len(done)] if len(done) < len(requests) else None

    def on_report(index: int, report: RunReport) -> None:
        emit(ComparisonEntryDone(run_id, index, report))

    outcome = run_resumed_passes(engine, run_id, plan, emit, cancel, on_report)
    if not outcome.reports:
        emit(outcome.failure if outcome.failure is not None else RunCancelled(run_id, None))
        return None
    result = ComparisonResult(
        comparison,
        tuple(outcome.reports),
        cancelled=outcome.cancelled and len(outcome.reports) < len(requests),
        failure=outcome.failure.message if outcome.failure is not None else None,
    )
    emit(ComparisonFinished(run_id, result))
    return result
