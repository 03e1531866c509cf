"""The first-block probe as a gate kind: each step runs the transformer's first block and compares
its residual with the last computed step's; where it changed less than the threshold, the rest of
the stack is skipped (``app.gate.firstblock``). It needs no calibration, so it runs on every
variant: its "calibration" is the kind's defaults, the same for every model (``calibrate`` refuses
it in one sentence: there is nothing to measure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from app.gate.decision import Verdict
from app.gate.events import Figure, StepEvent, figure_from_json
from app.gate.firstblock import (
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    DEFAULT_THRESHOLD,
    DEFAULT_WARMUP_STEPS,
    GATE_NAME,
    FirstBlockParams,
    firstblock_figures,
    simulate_firstblock,
)
from app.gate.firstblock import onset as probe_onset
from app.gate.kinds.base import (
    Calibrated,
    Candidate,
    GateKind,
    PlotSpec,
    ScheduleFacts,
    Signal,
    column,
    format_figure,
    walk_candidates,
)
from app.gate.provenance import Provenance
from app.gate.simulator import Engagement

if TYPE_CHECKING:
    from app.gate.live import LiveGate, TapRecorder

Changes = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class FirstBlockCalibration:
    """The probe's settings: its default threshold and guards, and where they come from (the
    published defaults and the demo's sweep)."""

    default_threshold: float | None
    provenance: Provenance
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    max_consecutive_skips: int = DEFAULT_MAX_CONSECUTIVE_SKIPS

    gate: ClassVar[str] = GATE_NAME

    def params(self, threshold: float | None = None) -> FirstBlockParams:
        thresh = self.default_threshold if threshold is None else threshold
        return FirstBlockParams(
            threshold=0.0 if thresh is None else thresh,
            warmup_steps=self.warmup_steps,
            max_consecutive_skips=self.max_consecutive_skips,
        )


DEFAULTS = FirstBlockCalibration(
    default_threshold=DEFAULT_THRESHOLD,
    provenance=Provenance(
        source="no calibration: the first-block probe measures each step on the model itself",
        reference="ParaAttention First Block Cache; diffusers FirstBlockCacheConfig; cache-dit "
        "DBCache (warm-up, most skips in a row)",
        notes=f"threshold {DEFAULT_THRESHOLD:g}: the demo's own curve (lab/gates/compare.py, 20 "
        "prompts) read by the rule that chose its TeaCache default, between diffusers' 0.05 and "
        "nunchaku's and krita-ai-diffusion's 0.12; warm-up "
        f"{DEFAULT_WARMUP_STEPS} steps and at most {DEFAULT_MAX_CONSECUTIVE_SKIPS} skips in a row "
        "are SGLang's cache-dit defaults",
    ),
)


class FirstBlockKind(GateKind[FirstBlockParams, FirstBlockCalibration, Changes]):
    name = GATE_NAME
    label = "First-block probe"
    threshold_meaning = (
        "First-block probe: how much the model's first block may change, relative to the last "
        "step that ran in full (0.1 = 10%), before the rest of the model runs again"
    )
    threshold_quantity = "first-block change"
    params_type = FirstBlockParams
    calibration_type = FirstBlockCalibration
    uncalibrated = DEFAULTS  # no variant carries probe settings: every variant runs the defaults
    signal = Signal.first_block_residual
    calibration_method = None  # nothing to measure: the defaults serve every model
    fallback_threshold = DEFAULT_THRESHOLD
    skips_at_onset = False  # skips where the change is strictly below the threshold
    exact_simulation = False  # exact along the vanilla path; a real run drifts after a skip
    forced_skips = True  # ``FirstBlockParams.forced`` forces any pattern (bench --forced-skips)
    calibration_free = True
    plot = PlotSpec(
        axis_label="first-block change",
        vanilla_legend="first-block change against the previous step",
        gated_legend="First-block probe: change against the last computed step",
    )
    onset_source = "Measured on this run"
    onset_quantity = "first-block change"
    onset_noun = "first-block change"
    floor_source = "the first block's change, measured on each run"
    no_default_reason = "the probe's settings set no default threshold"
    no_skip_reason = "the first block changes by 1 or more at every step it could skip"

    if TYPE_CHECKING:  # the base's lookup; never None here (``uncalibrated`` is the defaults)

        def calibration_of(self, variant: Calibrated) -> FirstBlockCalibration: ...

    def params(
        self, calibration: FirstBlockCalibration, threshold: float | None = None
    ) -> FirstBlockParams:
        return calibration.params(threshold)

    def default_threshold(self, calibration: FirstBlockCalibration) -> float | None:
        return calibration.default_threshold

    def forced(
        self, calibration: FirstBlockCalibration, skips_per_compute: int
    ) -> FirstBlockParams:
        """Timing only: ``skips_per_compute`` skipped after every computed step, whatever the
        first block measures (the same work per step as a real run)."""
        return replace(
            calibration.params(1.0), max_consecutive_skips=max(1, skips_per_compute), forced=True
        )

    # -- its figures ---------------------------------------------------------------------------
    def verdict_figures(self, verdict: Verdict) -> dict[str, Figure]:
        return {**firstblock_figures(verdict)}

    def legacy_figures(
        self, row: Mapping[str, Any], *, deciding: bool, vanilla: bool
    ) -> dict[str, Figure] | None:
        """``block_change`` (and on a vanilla row ``block_changes``, against each previous step)."""
        if vanilla:
            changes = figure_from_json(row.get("block_changes"))
            return {"change": figure_from_json(row.get("block_change")), "changes": changes}
        return {"change": figure_from_json(row.get("block_change"))} if deciding else None

    def vanilla_columns(self, steps: Sequence[StepEvent]) -> dict[str, object]:
        return {
            "vanilla_block_changes": [None if c is None else list(c) for c in self.trace(steps)]
        }

    def column_figures(self, report: Mapping[str, Any], steps: int) -> list[dict[str, Figure]]:
        found: list[dict[str, Figure]] = []
        for value in column(report, "vanilla_block_changes", steps):
            changes = figure_from_json(value)
            if not isinstance(changes, tuple):
                changes = None
            found.append({"change": changes[0] if changes else None, "changes": changes})
        return found

    def recorder(
        self, calibration: FirstBlockCalibration | None, *, calibrating: bool = False
    ) -> TapRecorder:
        """The first block's residual against each of the last steps' (its simulator's trace)."""
        from app.gate.live import BlockChangeRecorder

        return BlockChangeRecorder(self.name)

    # -- traces and simulation ---------------------------------------------------------------
    def trace(self, steps: Sequence[StepEvent | None]) -> list[Changes | None]:
        found: list[Changes | None] = []
        for step in steps:
            changes = None if step is None else step.figures(self.name).get("changes")
            found.append(changes if isinstance(changes, tuple) else None)
        return found

    def traced(self, trace: Sequence[Changes | None]) -> bool:
        return any(t for t in trace)

    def simulate(self, params: FirstBlockParams, trace: Sequence[Changes | None]) -> list[Verdict]:
        return simulate_firstblock(params, trace)

    def engagement(self, params: FirstBlockParams, trace: Sequence[Changes | None]) -> Engagement:
        eligible, threshold, step = probe_onset(params, trace)
        return Engagement(eligible, threshold, step)

    def candidates(
        self, params: FirstBlockParams, trace: Sequence[Changes | None]
    ) -> list[Candidate]:
        """A step skips where its change is strictly below the threshold, so the pattern only
        changes where the threshold passes the change of a step the probe computed: walking from
        one such value to the next visits every pattern once (as TeaCache's walk does)."""
        return walk_candidates(
            lambda probe: simulate_firstblock(params.with_threshold(probe), trace),
            lambda verdict: True,
        )

    def live_class(self) -> type[LiveGate]:
        from app.gate.live import FirstBlockGate

        return FirstBlockGate

    # -- the weight-free schedule check --------------------------------------------------------
    def schedule(self, params: FirstBlockParams, steps: int) -> ScheduleFacts:
        """Without weights the probe knows only its guards: any threshold above 0 may skip an
        eligible step (the change is measured on the run)."""
        eligible = params.eligible_steps(steps)
        return ScheduleFacts(eligible, 0.0 if eligible > 0 else None)

    def no_eligible_reason(self, params: FirstBlockParams, steps: int) -> str:
        return (
            f"{steps} steps leave no step the first-block probe may skip (the first "
            f"{params.warmup_steps} warm up and the last computes)"
        )

    def floor_reason(self, params: FirstBlockParams, steps: int, floor: float) -> str:
        return "threshold 0 turns the first-block probe off"

    def eligible_reason(self, eligible: int, steps: int) -> str:
        return f"{eligible} of {steps} steps may be skipped by the first-block probe"

    def calibration_says_skips(
        self, calibration: FirstBlockCalibration, steps: int, threshold: float
    ) -> bool:
        """The probe has no evidence before a run beyond its guards: an eligible step and a
        threshold above 0."""
        return threshold > 0.0 and calibration.params(threshold).eligible_steps(steps) > 0

    # -- words ---------------------------------------------------------------------------------
    def plot_value(self, step: StepEvent) -> float | None:
        value = step.figures(self.name).get("change")
        return value if isinstance(value, float) and math.isfinite(value) else None

    def step_lines(self, step: StepEvent, gated: bool) -> list[str]:
        if not gated:
            change = step.figures(self.name).get("change")
            value = change if isinstance(change, float) else None
            return [f"first-block change (vs previous step): {format_figure(value)}"]
        return [  # ``accumulated``: the change this step compared with the threshold
            f"first-block change (vs last computed step): {format_figure(step.accumulated)} vs "
            f"threshold {step.threshold:.4g}"
        ]

    def calibration_lines(self, calibration: FirstBlockCalibration) -> list[str]:
        return [
            f"Guards: the first {calibration.warmup_steps} steps and the last compute; at most "
            f"{calibration.max_consecutive_skips} skipped in a row"
        ]

    def provenance_text(self, calibration: FirstBlockCalibration) -> str:
        p = calibration.provenance
        lines = [p.source[:1].upper() + p.source[1:].rstrip(".") + "."]
        if p.data_size:
            lines.append(f"Data: {p.data_size}.")
        if p.reference:
            lines.append(f"Rule: {p.reference.rstrip('.')}.")
        if p.notes:
            lines.append(p.notes[:1].upper() + p.notes[1:].rstrip(".") + ".")
        return " ".join(lines)

    def calibration_summary(self, calibration: FirstBlockCalibration) -> str:
        own = calibration.default_threshold
        if calibration is DEFAULTS:
            return (
                f"The first-block probe needs no calibration; {own:g} is its published default. "
                "Figures: Details, under the images."
            )
        if own is None:
            return "This model's probe settings set no threshold. Figures: Details."
        return (
            f"The first-block probe was measured on this model; {own:g} is its threshold. "
            "Figures: Details, under the images."
        )

    def threshold_hint(
        self,
        params: FirstBlockParams,
        steps: int,
        *,
        measured: bool = False,
        onset: float | None = None,
    ) -> str:
        eligible = params.eligible_steps(steps)
        text = (
            f"{eligible} of {steps} steps may be skipped (never the first "
            f"{params.warmup_steps} or the last)."
        )
        if measured:
            if onset is not None and onset < 1.0:
                text += f" On the last vanilla run, {self.onset_words(onset)}."
            else:
                text += " On the last vanilla run, no threshold skips a step."
        return text


FIRSTBLOCK_KIND = FirstBlockKind()
