"""Target quality: find the threshold with the most skips whose measured quality meets a target.

The user gives a minimum SSIM against vanilla (and a largest local difference, ``app.metrics``)
instead of a threshold. The search:

1. runs one real pass at the starting threshold (the request's: the window's slider, the variant's
   default on the command line); that pass also gives vanilla and its trace, and is cached;
2. splits the threshold axis into the intervals where the simulator (``app.gate.simulator``) on
   vanilla's trace predicts one skip pattern each (exact up to the first skip, approximate after),
   with one four-decimal threshold inside each interval that skips something;
3. bisects over those candidates in threshold order, one real *resumed* pass each (bit-exact with a
   full gated pass, and cheap: the steps before the first skip are replayed), measuring SSIM and
   the local difference; at most ``QualityTarget.max_passes`` passes in all;
4. keeps, among every pass that met the target, the one with the most measured skips (ties: the
   higher SSIM). Quality is not monotone in the threshold, so this is the best *measured* candidate,
   not a proof that no untried threshold does better; every pass tried is reported.

Where nothing with skips met the target (or the schedule cannot skip at all), threshold 0 is kept:
one more resumed pass that replays every step, so its result is vanilla's. Cancel keeps what
finished: the best of the passes done so far is the result (``TargetSearch.complete`` False).

Qt-free. ``QualitySearch`` is the job and ``SearchPlan`` its plan: the one job runner
(``app.engine.jobs``) runs the passes through the engine's ``run``, as it runs a Generate or a
threshold comparison, so the scripted fake engine runs a search too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.engine.events import (
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFinished,
    TargetProbed,
)
from app.engine.protocol import Emit, PassesOutcome
from app.engine.report import RunReport, TargetProbe, TargetSearch
from app.engine.request import GenerationRequest, QualityTarget
from app.gate.kinds import Candidate, GateParamsLike, gate_kind, kind_of


def candidates(params: GateParamsLike, trace: Sequence[float | None]) -> list[Candidate]:
    """The simulator's skip patterns on ``trace`` as threshold intervals, in threshold order, that
    skip at least one step: the gate's kind walks its own rule (``GateKind.candidates``)."""
    return kind_of(params).candidates(params, trace)


@dataclass(frozen=True, slots=True)
class QualitySearch:
    """A target-quality search as a job (``app.engine.jobs``): ``request.threshold`` is where the
    search starts (the window's slider, the variant's default on the command line)."""

    request: GenerationRequest
    target: QualityTarget


class SearchPlan:
    """The search as a plan over resumed passes (``app.engine.jobs.run_job`` runs it): the first
    pass at the starting threshold, then the bisection over the candidates, then (where nothing
    with skips met the target) threshold 0. Ends with ``RunFinished`` (the chosen threshold's
    report with its ``target_search``), ``RunCancelled`` where no pass finished (or cancel stopped
    the pass at threshold 0) or ``RunFailed`` where a pass failed."""

    def __init__(self, job: QualitySearch, run_id: int, emit: Emit) -> None:
        self.request, self.target = job.request, job.target
        self.run_id, self.emit = run_id, emit
        self.reports: list[RunReport] = []
        self.probes: list[TargetProbe] = []
        self.planned: list[Candidate] = []
        # Bisection over the candidates' indices: lo met (−1: threshold 0, met by definition),
        # hi did not (len: beyond the last).
        self.lo, self.hi = -1, 0
        self.mid: int | None = None  # the candidate the pass now running checks
        self.predicted: int | None = None  # the simulator's skips for that pass
        self.zero_asked = False  # the closing pass at threshold 0 was planned
        self.nothing_met = ""  # the note where nothing met (written before the pass at 0)

    def next_request(self, done: Sequence[RunReport]) -> GenerationRequest | None:
        base = self.request
        if not done:  # at threshold 0 the gated pass can replay every vanilla step
            return replace(base, resume=base.resume or base.threshold == 0)
        if self.zero_asked:
            return None
        if self.hi - self.lo > 1 and len(self.probes) < self.target.max_passes:
            self.mid = (self.lo + self.hi) // 2
            candidate = self.planned[self.mid]
            self.predicted = candidate.predicted_skipped
            return replace(base, threshold=candidate.threshold, resume=True)
        self.mid = None
        if _best(self.probes) is not None:
            return None
        self.nothing_met = _nothing_met(base, self.target, self.probes, self.planned)
        if any(p.threshold == 0 for p in self.probes):
            return None
        # Replays every vanilla step: vanilla's image, no transformer call.
        self.zero_asked, self.predicted = True, 0
        return replace(base, threshold=0.0, resume=True)

    def on_report(self, index: int, report: RunReport) -> None:
        local = report.local_diff.value if report.local_diff is not None else None
        probe = TargetProbe(
            threshold=report.request.threshold,
            skipped=report.gated.skipped,
            pattern=report.gated.pattern,
            ssim=report.ssim,
            local_diff=local,
            met=self.target.met_by(report.ssim, local, report.ssimulacra2),
            predicted_skipped=self.predicted,
            ssimulacra2=report.ssimulacra2,
        )
        self.reports.append(report)
        self.probes.append(probe)
        self.emit(TargetProbed(self.run_id, probe, len(self.probes) - 1, self.target.max_passes))
        if index == 0:
            self._plan_candidates(report, probe.met)
        elif self.mid is not None:
            if probe.met:
                self.lo = self.mid
            else:
                self.hi = self.mid

    def _plan_candidates(self, first: RunReport, first_met: bool) -> None:
        """The candidates on the first pass's vanilla trace; the first pass narrows the
        bisection where its threshold falls inside one of them and skipped something."""
        request = self.request
        vanilla = first.vanilla
        params = gate_kind(request.gate).for_steps_run(
            request.variant.params_for(request.gate, max(request.threshold, 1e-9)),
            request.steps,
            request.steps_left_out,
        )
        trace = gate_kind(request.gate).trace(vanilla.steps) if vanilla is not None else []
        self.planned = candidates(params, trace) if vanilla is not None else []
        self.lo, self.hi = -1, len(self.planned)
        start = _index_of(self.planned, request.threshold)
        if start is not None and first.gated.skipped > 0:
            self.lo, self.hi = (start, self.hi) if first_met else (self.lo, start)

    def finish(self, outcome: PassesOutcome) -> RunReport | None:
        run_id, probes, target = self.run_id, self.probes, self.target
        if outcome.failure is not None:
            self.emit(outcome.failure)
            return None
        complete = not outcome.cancelled
        best = _best(probes)
        if not probes or (best is None and not complete):
            self.emit(RunCancelled(run_id, None))
            return None
        if best is None:
            note = self.nothing_met
            chosen = next(i for i, p in enumerate(probes) if p.threshold == 0)
        else:
            chosen = best
            p = probes[chosen]
            note = (
                f"Threshold {p.threshold:g} skips {p.skipped} of {self.request.active_steps} "
                f"steps with SSIM {p.ssim:.4f} and local difference {_fmt(p.local_diff)}: the "
                f"most skips of {len(probes)} tried that met {target.describe()}."
            )
            if not complete:
                note = f"Cancelled after {len(probes)} passes; the best of those: " + note
        chosen_report = self.reports[chosen]
        if chosen != len(self.reports) - 1:
            # Show the chosen pass again (the last one shown was another threshold's).
            g = chosen_report.gated
            self.emit(PassStarted(run_id, Pass.gated, len(g.steps), resumed_from=g.resumed_from))
            self.emit(PassFinished(run_id, Pass.gated, g.image, g.loop_seconds, g.steps))
        search = TargetSearch(
            target=target,
            probes=tuple(probes),
            chosen_threshold=probes[chosen].threshold,
            met=best is not None,
            note=note,
            complete=complete,
        )
        report = replace(chosen_report, target_search=search)
        self.emit(RunFinished(run_id, report))
        return report


def _index_of(planned: Sequence[Candidate], threshold: float) -> int | None:
    return next((i for i, c in enumerate(planned) if c.holds(threshold)), None)


def _best(probes: Sequence[TargetProbe]) -> int | None:
    """The pass with the most measured skips that met the target (ties: higher SSIM)."""
    met = [i for i, p in enumerate(probes) if p.met and p.skipped > 0]
    if not met:
        return None
    return max(met, key=lambda i: (probes[i].skipped, probes[i].ssim or 0.0))


def _nothing_met(
    request: GenerationRequest,
    target: QualityTarget,
    probes: Sequence[TargetProbe],
    planned: Sequence[Candidate],
) -> str:
    variant = request.variant
    if not planned and all(p.skipped == 0 for p in probes):
        why = (
            "a distilled schedule changes too much between its few steps"
            if variant.distilled
            else gate_kind(request.gate).no_skip_reason
        )
        return (
            f"Threshold 0 (no skipping): no threshold skips a step of {variant.display_name} "
            f"at {request.steps} steps on this vanilla run ({why})."
        )
    skipping = [p for p in probes if p.skipped > 0]
    closest = max(skipping, key=lambda p: p.ssim or 0.0) if skipping else None
    text = f"Threshold 0 (no skipping): none of the {len(probes)} thresholds tried met "
    text += f"{target.describe()}"
    if closest is not None:
        text += (
            f"; the closest was {closest.threshold:g} ({closest.skipped} skipped, SSIM "
            f"{closest.ssim:.4f}, local difference {_fmt(closest.local_diff)})"
        )
    if variant.distilled:
        text += (
            f"; {variant.display_name} is distilled to few steps, each of which changes the "
            "image a lot, so skipping one costs much"
        )
    return text + "."


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
