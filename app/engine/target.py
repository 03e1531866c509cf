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

Qt-free. The passes run through a ``PassRunner`` (the engine's ``generate`` in the app), so that a
batch of thresholds (compare-thresholds) can share it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from app.engine.events import Pass, PassFinished, PassStarted, TargetProbed
from app.engine.protocol import Cancelled, Emit
from app.engine.report import RunReport, TargetProbe, TargetSearch
from app.engine.request import GenerationRequest, QualityTarget
from app.gate.kinds import Candidate, GateParamsLike, gate_kind, kind_of

# Which passes run on the engine: (request, emit) → the finished two-pass report.
PassRunner = Callable[[GenerationRequest, Emit], RunReport]


def candidates(params: GateParamsLike, trace: Sequence[float | None]) -> list[Candidate]:
    """The simulator's skip patterns on ``trace`` as threshold intervals, in threshold order, that
    skip at least one step: the gate's kind walks its own rule (``GateKind.candidates``)."""
    return kind_of(params).candidates(params, trace)


def search_target(
    request: GenerationRequest, run_pass: PassRunner, emit: Emit, run_id: int
) -> RunReport:
    """Run the search for ``request.target``; returns the chosen threshold's report with its
    ``target_search``. ``Cancelled`` propagates only when no pass had finished."""
    target = request.target
    if target is None:
        raise ValueError("search_target needs a request with a quality target")
    base = replace(request, target=None)
    reports: list[RunReport] = []
    probes: list[TargetProbe] = []
    planned: list[Candidate] = []

    def measure(threshold: float, predicted: int | None, resume: bool) -> bool:
        report = run_pass(replace(base, threshold=threshold, resume=resume), emit)
        local = report.local_diff.value if report.local_diff is not None else None
        probe = TargetProbe(
            threshold=threshold,
            skipped=report.gated.skipped,
            pattern=report.gated.pattern,
            ssim=report.ssim,
            local_diff=local,
            met=target.met_by(report.ssim, local),
            predicted_skipped=predicted,
        )
        reports.append(report)
        probes.append(probe)
        emit(TargetProbed(run_id, probe, len(probes) - 1, target.max_passes))
        return probe.met

    complete = True
    try:
        # At threshold 0 the gated pass can replay every vanilla step: only vanilla costs.
        first_met = measure(base.threshold, None, base.resume or base.threshold == 0)
        vanilla = reports[0].vanilla
        params = request.variant.params_for(request.gate, max(base.threshold, 1e-9))
        trace = gate_kind(request.gate).trace(vanilla.steps) if vanilla is not None else []
        planned = candidates(params, trace) if vanilla is not None else []
        # Bisection over the candidates' indices: lo met (−1: threshold 0, met by definition),
        # hi did not (len: beyond the last). The first pass narrows it where it falls inside.
        lo, hi = -1, len(planned)
        start = _index_of(planned, base.threshold)
        if start is not None and reports[0].gated.skipped > 0:
            lo, hi = (start, hi) if first_met else (lo, start)
        while hi - lo > 1 and len(probes) < target.max_passes:
            mid = (lo + hi) // 2
            candidate = planned[mid]
            if measure(candidate.threshold, candidate.predicted_skipped, True):
                lo = mid
            else:
                hi = mid
    except Cancelled:
        if not probes:
            raise
        complete = False

    best = _best(probes)
    if best is None:
        if not complete:
            raise Cancelled
        note = _nothing_met(request, target, probes, planned)
        zero = next((i for i, p in enumerate(probes) if p.threshold == 0), None)
        if zero is None:  # replays every vanilla step: vanilla's image, no transformer call
            measure(0.0, 0, True)
        chosen = len(probes) - 1 if zero is None else zero
    else:
        chosen = best
        p = probes[chosen]
        note = (
            f"Threshold {p.threshold:g} skips {p.skipped} of {request.steps} steps with SSIM "
            f"{p.ssim:.4f} and local difference {_fmt(p.local_diff)}: the most skips of "
            f"{len(probes)} tried that met {target.describe()}."
        )
        if not complete:
            note = f"Cancelled after {len(probes)} passes; the best of those: " + note
    chosen_report = reports[chosen]
    if chosen != len(reports) - 1:
        # Show the chosen pass again (the last one shown was another threshold's).
        g = chosen_report.gated
        emit(PassStarted(run_id, Pass.gated, len(g.steps), resumed_from=g.resumed_from))
        emit(PassFinished(run_id, Pass.gated, g.image, g.loop_seconds, g.steps))
    search = TargetSearch(
        target=target,
        probes=tuple(probes),
        chosen_threshold=probes[chosen].threshold,
        met=best is not None,
        note=note,
        complete=complete,
    )
    return replace(chosen_report, target_search=search)


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
