"""Qt-free numbers behind the window: the difference view's image, where skipping begins, and the
distilled-schedule notice. SSIM and speedup are the engine's ``RunReport``'s (app.engine.report)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from app.engine.request import LoraSpec
from app.gate import Decision, Engagement, StepEvent
from app.gate.kinds import DEFAULT_GATE, AnyGateKind, format_threshold, gate_kind
from app.metrics import difference_image
from app.ui.defaults import default_threshold
from app.variants import VARIANTS, ScheduleCheck, Variant, check_schedule


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    """Computed by the worker after a run, before ``RunFinished`` is forwarded (the numbers are
    the ``RunReport``'s; this is only the picture of where the images differ)."""

    run_id: int
    difference: np.ndarray | None  # float32 H×W, 0–255 (``app.metrics.difference_image``)


@dataclass(frozen=True, slots=True)
class RunSaved:
    run_id: int
    entry_id: str
    folder: str


def difference_map(gated: np.ndarray, vanilla: np.ndarray) -> np.ndarray | None:
    """The difference view's image: ``app.metrics.difference_image`` (the local difference's
    own measure, so the view and the number agree), or None where the shapes differ."""
    if gated.shape != vanilla.shape:
        return None
    return difference_image(gated, vanilla)


def count_skips(steps: Sequence[StepEvent | None]) -> int:
    return sum(1 for s in steps if s is not None and s.decision is Decision.skipped)


@dataclass(frozen=True, slots=True)
class EngagementBand:
    """Where skipping begins on one vanilla trace for one gate, for the gate plot and the
    banner."""

    variant_id: str
    steps: int
    eligible_steps: int
    onset: float | None  # a threshold above this (at or above: ``skips_at_onset``) skips a step
    onset_step: int | None
    saturation: float | None  # the smallest threshold reaching the most skips on the sweep
    max_skips: int
    curve: tuple[tuple[float, int], ...] = field(default_factory=tuple)
    gate: str = DEFAULT_GATE
    trace: tuple[float | None, ...] = ()  # the gate's signal on the vanilla run (what it simulates)
    params: Any = None  # the gate's parameters the curve replays (at another threshold each)

    def engages_at(self, threshold: float) -> bool:
        return gate_kind(self.gate).engages(threshold, self.onset)

    def predicted_skips(self, threshold: float) -> int:
        """The grid's count at the last of its thresholds at or below ``threshold``."""
        best = 0
        for t, skips in self.curve:
            if t > threshold:
                break
            best = skips
        return best

    def skips_at(self, threshold: float) -> int:
        """The rule's own count at ``threshold`` on this trace (the grid's neighbour can differ:
        a count can change between two of its thresholds)."""
        if self.params is None:
            return self.predicted_skips(threshold)
        return gate_kind(self.gate).skipped(self.params.with_threshold(threshold), self.trace)

    def curve_through(self, *thresholds: float | None) -> tuple[tuple[float, int], ...]:
        """The curve with the rule's exact count at each of ``thresholds`` added (the run's and
        the slider's), so the curve read at those lines is the rule's answer there."""
        points = dict(self.curve)
        for threshold in thresholds:
            if threshold is not None:
                points[threshold] = self.skips_at(threshold)
        return tuple(sorted(points.items()))


def engagement_band(
    variant: Variant,
    threshold: float,
    vanilla_steps: Sequence[StepEvent | None],
    gate: str = DEFAULT_GATE,
    left_out: int = 0,
) -> EngagementBand | None:
    """The gate's band on this vanilla run: its own trace (``GateKind.trace``; MagCache reads
    only the step count, exact for every run of this many steps). ``left_out``: the steps a run
    from a picture never ran before them (``GateKind.for_steps_run``)."""
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    trace = kind.trace(vanilla_steps)
    if calibration is None or not kind.traced(trace):
        return None
    probe = kind.for_steps_run(
        kind.params(calibration, max(threshold, 1e-9)), left_out + len(trace), left_out
    )
    found = kind.engagement(probe, trace)
    top = 1.0
    if found.onset_threshold is not None:
        top = min(1.0, max(found.onset_threshold * 3.0, threshold * 1.5, 0.05))
    grid = [float(t) for t in np.linspace(0.0, top, 121)]
    curve = tuple((t, kind.skipped(probe.with_threshold(t), trace)) for t in grid)
    max_skips = max((skips for _, skips in curve), default=0)
    saturation = next((t for t, skips in curve if skips == max_skips), None) if max_skips else None
    return EngagementBand(
        variant.id,
        len(trace),
        found.eligible_steps,
        found.onset_threshold,
        found.onset_step,
        saturation,
        max_skips,
        curve,
        gate,
        tuple(trace),
        probe,
    )


def curve_drift_note(
    band: EngagementBand | None, threshold: float, gated: Sequence[StepEvent | None]
) -> str:
    """Where a finished run skipped another number of steps than the skip curve says at its
    threshold: why, in one sentence. Empty where they agree or the run is not complete."""
    if band is None or not gated or any(s is None for s in gated) or len(gated) != band.steps:
        return ""
    if any(s is not None and s.gate != band.gate for s in gated):
        return ""
    ran, simulated = count_skips(gated), band.skips_at(threshold)
    if ran == simulated:
        return ""
    return (
        "The skips curve is simulated on the vanilla pass: exact up to the first skip, after "
        "which the gated pass measures its own, slightly different steps, so at "
        f"{format_threshold(threshold)} this run skipped {ran} where the simulation says "
        f"{simulated}."
    )


class NoticeKind(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"


class FixKind(StrEnum):
    variant = "variant"
    steps = "steps"
    threshold = "threshold"
    download = "download"
    quantize = "quantize"


@dataclass(frozen=True, slots=True)
class BannerFix:
    """What a banner button does to the inputs (applied by ``Session.apply_fix``)."""

    kind: FixKind
    variant: str | None = None
    steps: int | None = None
    threshold: float | None = None
    quantize: int | None = None

    @classmethod
    def use_quantize(cls, bits: int) -> BannerFix:
        return cls(FixKind.quantize, quantize=bits)

    @classmethod
    def use_variant(
        cls, variant_id: str, *, steps: int | None = None, threshold: float | None = None
    ) -> BannerFix:
        """Switch to ``variant_id`` (its remembered inputs), and where given to these steps and
        threshold (a schedule banner's fix names the schedule it promises skips)."""
        return cls(FixKind.variant, variant=variant_id, steps=steps, threshold=threshold)

    @classmethod
    def use_steps(cls, steps: int) -> BannerFix:
        return cls(FixKind.steps, steps=steps)

    @classmethod
    def use_threshold(cls, threshold: float) -> BannerFix:
        return cls(FixKind.threshold, threshold=threshold)

    @classmethod
    def download(cls) -> BannerFix:
        return cls(FixKind.download)


@dataclass(frozen=True, slots=True)
class NoticeAction:
    label: str
    fix: BannerFix
    guess: bool = False  # evidence from other runs (a calibration's prompts), not this schedule's


@dataclass(frozen=True, slots=True)
class Notice:
    """One inline banner: a title, a message, the full text for the copy button, and actions."""

    kind: NoticeKind
    title: str
    message: str
    details: str = ""
    actions: tuple[NoticeAction, ...] = ()
    key: str = ""  # identifies the banner (replace, dismiss)

    @property
    def copy_text(self) -> str:
        text = f"{self.title}\n{self.message}"
        return f"{text}\n\n{self.details}" if self.details else text


def schedule_notice(
    variant: Variant,
    steps: int,
    threshold: float,
    measured: EngagementBand | None = None,
    engagement: Engagement | None = None,
    run_check: ScheduleCheck | None = None,
    gate: str = DEFAULT_GATE,
    strength: float | None = None,
) -> Notice | None:
    """The yellow banner when (variant, steps) cannot engage at this threshold, with the real cause
    (no eligible step, or every prediction at or above the threshold; threshold 0 has its own
    banner) and only fixes that the gate simulation or the variant's calibration says would skip a
    step. Before a run the numbers come from ``check_schedule``; after a run from the shown run of
    the same variant and steps: where skipping begins on its vanilla trace (``engagement``, the
    engine's, and ``measured``, the window's band) and the check the engine warned with before it
    (``run_check``: ``app.engine.notices.schedule_check`` of its request). Every number is
    ``gate``'s: ``measured``, ``engagement`` and ``run_check`` must come from a band and a run of
    that gate (a band of another gate is ignored). ``strength``: the run starts from a picture,
    so only the steps after the strength's run; the banner says how many that leaves the gate
    (on its own, as a note, where nothing else is wrong)."""
    kind = gate_kind(gate)
    if threshold <= 0.0:
        return Notice(
            NoticeKind.info,
            "Skipping is off",
            f"A threshold of 0 turns {kind.label} off: the gated pass computes every step, like "
            "vanilla.",
            key="schedule",
        )
    check = check_schedule(variant, steps, threshold, gate=gate, strength=strength)
    picture = (
        check.strength_note[:1].upper() + check.strength_note[1:] + "."
        if check.strength_note
        else None
    )
    if measured is not None and (
        measured.variant_id != variant.id or measured.steps != steps or measured.gate != gate
    ):
        measured = None
    onset_reported = engagement is not None
    engine_onset = engagement.onset_threshold if engagement is not None else None
    eligible = (
        engagement.eligible_steps
        if engagement is not None
        else run_check.eligible_steps
        if run_check is not None
        else check.eligible_steps
    )
    measured_blocks = measured is not None and not measured.engages_at(threshold)
    engine_blocks = (run_check is not None and not run_check.can_skip) or (
        onset_reported and not kind.engages(threshold, engine_onset)
    )
    # A trace of this very schedule (the engine's, or the last vanilla run's) is exact up to the
    # first skip, so where one exists it decides; the calibration and the polynomial only stand in
    # for it before a run.
    traced_here = onset_reported or measured is not None
    blocked = (measured_blocks or engine_blocks) if traced_here else not check.can_skip
    blocked = blocked or eligible <= 0  # no eligible step: nothing skips, whatever else is said
    if not blocked and not variant.distilled:
        if picture is None:
            return None
        return Notice(NoticeKind.info, "Starting from a picture", picture, key="schedule")

    # The smallest prediction each source knows of, most direct first: the engine's and the last
    # vanilla run's are exact on a trace of these steps (the simulator's onset); the calibration's
    # was measured at the variant's default steps; the polynomial's floor bounds every trace.
    calibration_min = _calibration_min(variant, steps, gate)
    evidence: list[tuple[float, str]] = []
    if engine_onset is not None:
        evidence.append((engine_onset, "measured by the engine on this run"))
    if measured is not None and measured.onset is not None:
        evidence.append((measured.onset, "measured on the last vanilla run"))
    floor = check.prediction_floor
    if not traced_here and calibration_min is not None:
        evidence.append((calibration_min, "from the variant's calibration data"))
    if not traced_here and floor is not None:
        evidence.append((floor, kind.floor_source))

    calibration = kind.calibration_of(variant)
    steps_run = steps - check.left_out
    protected = (
        always_computed_words(kind, kind.params(calibration, threshold), steps_run, eligible)
        if calibration is not None
        else ""
    )
    parts = [f"{eligible} of {steps_run} steps could be skipped at all{protected}."]
    if picture is not None:
        parts.insert(0, picture)
    blocking: tuple[float, str] | None = None
    if not blocked:
        parts.append(
            "Skipping on a distilled schedule is off the beaten path: a few steps carry the "
            "whole image, so every skip costs more quality than on a long schedule. Compare the "
            "two pictures."
        )
    elif eligible <= 0:
        parts.append(
            f"At {steps} steps no step is eligible, so no threshold can skip anything: the cause "
            "is the step count, not the threshold."
        )
    else:
        # The largest bound that blocks is the one a fix must clear: the text names it, and the
        # button clears it by the entry's last decimal (the others are named beside it).
        blockers = [(v, src) for v, src in evidence if not kind.engages(threshold, v)]
        blocking = max(blockers, key=lambda e: e[0]) if blockers else None
        if blocking is not None:
            others = "".join(
                f"; {src}: {kind.format_onset(v)}"
                for v, src in blockers
                if kind.format_onset(v) != kind.format_onset(blocking[0])
            )
            parts.append(
                f"Every {kind.onset_quantity} is {_at_or_above(kind)} the threshold "
                f"{fmt(threshold)}: the smallest is {kind.format_onset(blocking[0])} "
                f"({blocking[1]}{others}), so no step can be skipped."
            )
        elif (onset_reported and engine_onset is None) or (
            measured is not None and measured.onset is None
        ):
            parts.append(
                "On this run every step that could be skipped changed more than the calibration "
                "covers, and such a step is always computed, so no threshold can skip one."
            )
        else:
            parts.append(check.reason[:1].upper() + check.reason[1:] + ".")
    if variant.distilled and variant.distilled_reason:
        parts.append(f"Why: {variant.distilled_reason.replace('`', '')}.")
    base = VARIANTS.get(variant.base_variant) if variant.base_variant else None
    base_default = base.default_threshold_for(gate) if base is not None else None
    if variant.default_threshold_for(gate) is None:
        own = default_threshold(variant, gate)
        lender = (
            f", borrowed from {base.display_name}"
            if base is not None and base_default is not None
            else ""
        )
        parts.append(
            f"It has no calibrated threshold of its own: the threshold field and Reset use "
            f"{fmt(own)}{lender}."
        )

    actions: list[NoticeAction] = []
    advice: list[str] = []
    basis = ""  # where an uncalibrated default comes from, for the banner's details
    if base is not None and base_default is not None:
        # The base variant's threshold skips at its default steps (why it was chosen): the fix
        # sets both, not the base's remembered inputs (which may not skip). "Calibrated" only
        # where a calibration measured it; else the gate's default, with its basis (#39).
        base_calibration = kind.calibration_of(base)
        if base_calibration is not None and base_calibration is kind.uncalibrated:
            advice.append(
                f"use {base.display_name} at {base.default_steps} steps and the threshold "
                f"{fmt(base_default)}, the {kind.label}'s default for every model (nothing was "
                f"calibrated on {base.display_name}; the banner's tooltip and Copy give its basis)"
            )
            basis = f"{kind.label}'s default threshold: {kind.provenance_text(base_calibration)}"
        else:
            advice.append(
                f"use {base.display_name} at {base.default_steps} steps and its calibrated "
                f"threshold {fmt(base_default)}"
            )
        fix = BannerFix.use_variant(base.id, steps=base.default_steps, threshold=base_default)
        actions.append(NoticeAction(f"Use {base.display_name}", fix))
    if blocked and eligible > 0:
        # The smallest prediction each source knows of, most direct first; the polynomial's
        # floor alone is no such evidence (it bounds predictions from below; no trace need
        # reach it) unless the kind's simulation is exact without a trace.
        exact_floor = floor if kind.exact_simulation else None
        traced = (engine_onset, measured.onset if measured else None, calibration_min, exact_floor)
        trace = measured.trace if measured is not None and measured.trace else None
        offer = _threshold_offer(kind, variant, steps, threshold, traced, floor, trace, traced_here)
        if offer is not None:
            value = f"{offer.threshold:.4f}"
            fix = BannerFix.use_threshold(offer.threshold)
            if offer.guess:
                advice.append(
                    f"try the threshold {value}, a guess from the calibration data (measured on "
                    "other prompts: Generate measures this one's, and the banner then offers a "
                    "threshold that skips on it)"
                )
                actions.append(NoticeAction(f"Try {value} (a guess)", fix, guess=True))
            else:
                where = (
                    "on this run's vanilla pass"
                    if traced_here
                    else f"on {kind.label}'s calibration, exact for every run of {steps} steps"
                )
                said = (
                    ""
                    if offer.skips is None
                    else f" (simulated {where}, it skips {offer.skips} of {steps} steps)"
                )
                advice.append(f"raise the threshold to {value}{said}")
                actions.append(NoticeAction(f"Threshold {value}", fix))
    more_steps = steps_that_skip(variant, steps, threshold, gate) if blocked else None
    if more_steps is not None:
        fix = BannerFix.use_steps(more_steps)
        if kind.exact_simulation:  # the calibration's simulation is exact for any run
            advice.append(f"use {more_steps} steps")
            actions.append(NoticeAction(f"Use {more_steps} steps", fix))
        else:  # measured at those steps on the calibration's prompts, not this one
            advice.append(
                f"try {more_steps} steps, a guess from the calibration data (measured at "
                f"{more_steps} steps on other prompts)"
            )
            actions.append(NoticeAction(f"Try {more_steps} steps (a guess)", fix, guess=True))
    if advice:
        parts.append("Instead: " + "; or ".join(advice) + ".")
    if not blocked:
        title = f"{variant.display_name} is distilled: check the quality of every skip"
    elif eligible <= 0:
        title = f"{variant.display_name} at {steps} steps has no step the gate may skip"
    elif blocking is not None:
        title = (
            f"No step can be skipped at threshold {fmt(threshold)}: every {kind.onset_noun} is "
            "above it"
        )
    else:
        title = f"No step can be skipped at threshold {fmt(threshold)}"
    suggestion = (run_check.suggestion if run_check is not None else None) or check.suggestion
    extra = f"check_schedule: {check.reason}" + (
        f"\nsuggestion: {suggestion}" if suggestion else ""
    )
    if basis:
        extra += f"\n{basis}"
    notice_kind = NoticeKind.warning if blocked else NoticeKind.info
    return Notice(notice_kind, title, " ".join(parts), extra, tuple(actions), "schedule")


def always_computed_words(kind: AnyGateKind, params: Any, steps: int, eligible: int) -> str:
    """Which steps the gate never skips, as the banner's parenthesis (" (the first 4 and the last
    are always computed)"), read off the kind's own rule: the steps its simulation forces whatever
    it measures (the timeline's forced cells) and, where none leads, a first step with nothing
    cached to reuse yet. Empty where those do not account for every step outside ``eligible``
    (the schedule check's count)."""
    verdicts = kind.simulate(params, [None] * steps)
    forced = [v.decision is Decision.forced for v in verdicts]
    lead = next((i for i, f in enumerate(forced) if not f), steps)
    trail = 0 if lead == steps else next(i for i, f in enumerate(reversed(forced)) if not f)
    if lead == 0 and steps - eligible - trail == 1:
        lead = 1  # nothing cached before the first step
    if lead + trail + eligible != steps or lead + trail == 0:
        return ""
    sides = [
        f"the {side}" + (f" {count}" if count > 1 else "")
        for side, count in (("first", lead), ("last", trail))
        if count
    ]
    verb = "is" if lead + trail == 1 else "are"
    return f" ({' and '.join(sides)} {verb} always computed)"


def _calibration_min(variant: Variant, steps: int, gate: str = DEFAULT_GATE) -> float | None:
    """The calibration's smallest measured onset, which holds for the steps it was measured at
    (the variant's default steps) only: other step counts change by other amounts per step."""
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    return None if calibration is None else kind.calibration_floor(calibration, steps)


def _at_or_above(kind: AnyGateKind) -> str:
    """A threshold equal to the onset skips where the rule compares with <= (MagCache)."""
    return "above" if kind.skips_at_onset else "at or above"


@dataclass(frozen=True, slots=True)
class ThresholdOffer:
    """A banner's threshold fix: the value, the steps it skips where a simulation says so
    (None: exact by the onset alone), and whether it is a guess (no trace of this schedule)."""

    threshold: float
    skips: int | None
    guess: bool


def _threshold_offer(
    kind: AnyGateKind,
    variant: Variant,
    steps: int,
    threshold: float,
    traced: Sequence[float | None],
    floor: float | None,
    trace: Sequence[float | None] | None,
    traced_here: bool,
) -> ThresholdOffer | None:
    """The smallest threshold (the entry's decimals) that the evidence says skips one step,
    simulated where a trace exists.

    Before the first skip every eligible step compares its own prediction with the threshold, so
    any threshold past a trace's smallest prediction skips that step (the simulator's onset).
    ``traced`` holds that smallest prediction from the engine's trace, the last vanilla run's, the
    calibration's (other prompts: a guess) and, for a kind whose simulation is exact without a
    trace, its floor, most direct first; a suggestion must clear the floor too. Where a trace of
    this schedule exists (the run's, or for an exact kind any run of ``steps`` steps), the offer
    is simulated on it and moves to the first threshold that skips there if it would not."""
    known = next((v for v in traced if v is not None), None)
    calibration = kind.calibration_of(variant)
    if known is None or calibration is None:
        return None
    suggested = kind.smallest_engaging(max(known, floor) if floor is not None else known)
    if trace is None and kind.exact_simulation:
        trace = [None] * steps  # its simulation reads the step count only: exact
    if trace is None:
        if suggested is None:
            return None
        return ThresholdOffer(suggested, None, guess=not traced_here)
    skips = 0 if suggested is None else kind.skipped(kind.params(calibration, suggested), trace)
    if suggested is None or skips == 0:
        probe = kind.params(calibration, max(threshold, 1e-9))
        above = next((c for c in kind.candidates(probe, trace) if c.threshold > threshold), None)
        if above is None:
            return None
        suggested = above.threshold
        skips = kind.skipped(kind.params(calibration, suggested), trace)
    return ThresholdOffer(suggested, skips, guess=False)


def steps_that_skip(
    variant: Variant, steps: int, threshold: float, gate: str = DEFAULT_GATE
) -> int | None:
    """The step count a 'Use N steps' fix offers, or None when no step count is known to skip.

    The only other schedule the app has evidence for is the variant's default steps N, measured by
    its calibration. A fix to N is offered when N differs from ``steps`` and the gate's
    calibration says N steps skip at ``threshold`` (``GateKind.calibration_says_skips``: for
    TeaCache its smallest measured prediction below it, or where none is stored, ``threshold`` at
    least the calibrated default and above the polynomial's floor; for MagCache its table, exactly).
    More steps than N are never suggested: nothing measured them."""
    n = variant.default_steps
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    if n == steps or calibration is None:
        return None
    return n if kind.calibration_says_skips(calibration, n, threshold) else None


fmt = format_threshold  # thresholds and predicted changes, as the kinds write them


def lora_calibration_note(
    loras: Sequence[LoraSpec], variant: Variant | None = None, gate: str = DEFAULT_GATE
) -> str:
    """The gate plot's caveat for a LoRA set the variant's calibration was not made with: a
    built-in one was made on the base model without LoRAs; a user calibration made with a LoRA
    set (``Variant.calibration_scope``) is for that set only. Nothing where it was made with
    exactly these LoRAs. It names ``gate``'s calibration (the run's), in words true of any kind's
    (a polynomial for one, a table for another). Nothing for a kind that needs no calibration
    (the first-block probe measures the model as it runs)."""
    if gate_kind(gate).calibration_free:
        return ""
    if variant is not None and variant.calibrated_for(loras):
        return ""
    scope = variant.calibration_scope if variant is not None else None
    made_with = scope.lora_words() if scope is not None else ""
    if made_with:
        names = ", ".join(lora.label() for lora in loras) or "no LoRA"
        return (
            f"Calibrated {made_with}, not with this set ({names}): weigh the skips against "
            "SSIM, or calibrate this model again with it."
        )
    if not loras:
        return ""
    names = ", ".join(lora.label() for lora in loras)
    these = "this LoRA" if len(loras) == 1 else "these LoRAs"
    return (
        f"Calibrated without {these} ({names}): {gate_kind(gate).label}'s calibration was made on "
        "the base model, so weigh the skips against SSIM."
    )
