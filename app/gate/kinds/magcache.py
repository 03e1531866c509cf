"""MagCache as a gate kind: a per-step table of the residual's magnitude ratios, measured once on
vanilla runs, accumulates an error while steps are reused (``app.gate.magcache``). It reads no
signal, so its simulation is exact for a whole run from the table and the step count."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from app.gate.decision import Decision, Verdict
from app.gate.events import Figure, StepEvent, figure_from_json
from app.gate.kinds.base import (
    CalibrationMethod,
    Candidate,
    GateKind,
    PlotSpec,
    ScheduleFacts,
    Signal,
    column,
    format_figure,
    inside_closed_low,
)
from app.gate.magcache import GATE_NAME, MagCacheParams, magcache_figures, simulate_magcache
from app.gate.magcache import onset as table_onset
from app.gate.provenance import Provenance
from app.gate.simulator import Engagement

if TYPE_CHECKING:
    from app.gate.live import LiveGate, TapRecorder


@dataclass(frozen=True, slots=True)
class MagCacheCalibration:
    """A variant's MagCache table and its recipe (threshold, retention share, K), with provenance.

    ``default_threshold`` is None where the gate should stay off by default (distilled schedules).
    """

    ratios: tuple[float, ...]
    default_threshold: float | None
    retention_ratio: float
    max_consecutive_skips: int
    provenance: Provenance
    always_compute: tuple[int, ...] = ()

    gate: ClassVar[str] = GATE_NAME

    def params(self, threshold: float | None = None) -> MagCacheParams:
        thresh = self.default_threshold if threshold is None else threshold
        return MagCacheParams(
            ratios=self.ratios,
            threshold=0.0 if thresh is None else thresh,
            retention_ratio=self.retention_ratio,
            max_consecutive_skips=self.max_consecutive_skips,
            always_compute=self.always_compute,
        )


def magcache_from_json(data: dict) -> MagCacheCalibration:
    """A calibration file's ``magcache`` block (see ``app.bench.calibrate``)."""
    return MagCacheCalibration(
        ratios=tuple(float(r) for r in data["ratios"]),
        default_threshold=data.get("default_threshold"),
        retention_ratio=float(data["retention_ratio"]),
        max_consecutive_skips=int(data["max_consecutive_skips"]),
        provenance=Provenance(**data["provenance"]),
        always_compute=tuple(int(i) for i in data.get("always_compute", ())),
    )


def magcache_from_document(document: dict) -> MagCacheCalibration | None:
    """A calibration document's MagCache section (the ``magcache`` key), or None without one."""
    section = document.get(GATE_NAME)
    return None if section is None else magcache_from_json(section)


class MagCacheKind(GateKind[MagCacheParams, MagCacheCalibration, float]):
    name = GATE_NAME
    label = "MagCache"
    threshold_meaning = (
        "MagCache: how much accumulated magnitude drift to tolerate before a step is computed "
        "again (the drift comes from a table measured once on vanilla runs)"
    )
    threshold_quantity = "accumulated magnitude error"
    params_type = MagCacheParams
    calibration_type = MagCacheCalibration
    signal = Signal.none
    calibration_method = CalibrationMethod.ratio_table
    fallback_threshold = 0.05  # an order below TeaCache's: the published recipes use 0.06, 0.24
    skips_at_onset = True  # skips while the accumulated error is ≤ the threshold
    exact_simulation = True
    plot = PlotSpec(
        axis_label="accumulated error",
        vanilla_legend="first-reuse error |1 − magnitude ratio| per step",
        gated_legend="MagCache: accumulated error",
    )
    onset_source = "From MagCache's table"
    onset_quantity = "first-reuse error"
    onset_noun = "first-reuse error"
    floor_source = "the smallest first-reuse error in MagCache's table"
    no_default_reason = "the MagCache calibration sets no default threshold"
    no_skip_reason = "MagCache's table drifts by 1 or more at every step it could skip"

    def calibration_from_json(self, section: Mapping[str, Any]) -> MagCacheCalibration:
        return magcache_from_json(dict(section))

    def params(
        self, calibration: MagCacheCalibration, threshold: float | None = None
    ) -> MagCacheParams:
        return calibration.params(threshold)

    def default_threshold(self, calibration: MagCacheCalibration) -> float | None:
        return calibration.default_threshold

    # -- its figures ---------------------------------------------------------------------------
    def verdict_figures(self, verdict: Verdict) -> dict[str, Figure]:
        return {**magcache_figures(verdict)}

    def legacy_figures(
        self, row: Mapping[str, Any], *, deciding: bool, vanilla: bool
    ) -> dict[str, Figure] | None:
        """A vanilla row's measured ``mag_ratio``; a MagCache row's table ratio (``predicted``)."""
        if vanilla:
            return {"ratio": figure_from_json(row.get("mag_ratio"))}
        return {"table_ratio": figure_from_json(row.get("predicted"))} if deciding else None

    def vanilla_columns(self, steps: Sequence[StepEvent]) -> dict[str, object]:
        return {"vanilla_mag_ratios": self.trace(steps)}

    def column_figures(self, report: Mapping[str, Any], steps: int) -> list[dict[str, Figure]]:
        return [{"ratio": figure_from_json(x)} for x in column(report, "vanilla_mag_ratios", steps)]

    def recorder(
        self, calibration: MagCacheCalibration | None, *, calibrating: bool = False
    ) -> TapRecorder:
        """The body residual's magnitude ratio on every step: what its table is the mean of."""
        from app.gate.live import MagnitudeRecorder

        return MagnitudeRecorder(self.name)

    def for_steps_run(self, params: MagCacheParams, steps: int, left_out: int) -> MagCacheParams:
        return params.for_steps_run(steps, left_out)

    # -- traces and simulation ---------------------------------------------------------------
    def trace(self, steps: Sequence[StepEvent | None]) -> list[float | None]:
        """The measured ratios (calibration data); the simulator reads only their count."""
        return [_float(s.figures(self.name).get("ratio")) if s is not None else None for s in steps]

    def traced(self, trace: Sequence[float | None]) -> bool:
        return len(trace) >= 2

    def simulate(self, params: MagCacheParams, trace: Sequence[float | None]) -> list[Verdict]:
        return simulate_magcache(params, len(trace))

    def engagement(self, params: MagCacheParams, trace: Sequence[float | None]) -> Engagement:
        eligible, threshold, step = table_onset(params, len(trace))
        return Engagement(eligible, threshold, step)

    def candidates(self, params: MagCacheParams, trace: Sequence[float | None]) -> list[Candidate]:
        """MagCache skips a step while its accumulated error is ≤ the threshold, so its pattern is
        constant on [one computed step's error, the next): walk those values upwards. Steps
        computed for the K limit give a boundary where nothing changes; equal neighbours are
        merged."""
        steps = len(trace)
        found: list[Candidate] = []
        low = 0.0
        while low < 1.0:
            probe = max(low, math.nextafter(0.0, 1.0))
            verdicts = simulate_magcache(params.with_threshold(probe), steps)
            above = [
                v.accumulated
                for v in verdicts
                if v.decision is Decision.computed
                and v.accumulated is not None
                and v.accumulated > probe
            ]
            high = min(min(above), 1.0) if above else 1.0
            skipped = sum(v.decision is Decision.skipped for v in verdicts)
            pattern = "".join(v.decision.letter for v in verdicts)
            if found and found[-1].pattern == pattern:  # the same pattern continues
                last = found[-1]
                found[-1] = replace(
                    last, high=high, threshold=inside_closed_low(last.low, high) or last.threshold
                )
            elif skipped:
                threshold = inside_closed_low(low, high)
                if threshold is not None:
                    found.append(Candidate(threshold, low, high, skipped, pattern, low_closed=True))
            if not above:
                break
            low = high
        return found

    def live_class(self) -> type[LiveGate]:
        from app.gate.live import MagCacheGate

        return MagCacheGate

    # -- the weight-free schedule check (exact: the rule reads the table only) -----------------
    def schedule(self, params: MagCacheParams, steps: int) -> ScheduleFacts:
        eligible, floor, _ = table_onset(params, steps)
        return ScheduleFacts(eligible, floor)

    def no_eligible_reason(self, params: MagCacheParams, steps: int) -> str:
        return (
            f"{steps} steps leave no MagCache-eligible step (the first "
            f"{params.first_eligible(steps)} steps always compute)"
        )

    def floor_reason(self, params: MagCacheParams, steps: int, floor: float) -> str:
        return (
            f"MagCache's table never gives a first-reuse error below {floor:.3f} at {steps} "
            f"steps, so threshold {params.threshold:g} cannot skip any step"
        )

    def eligible_reason(self, eligible: int, steps: int) -> str:
        return f"{eligible} of {steps} steps are MagCache-eligible"

    def calibration_says_skips(
        self, calibration: MagCacheCalibration, steps: int, threshold: float
    ) -> bool:
        return self.skipped(calibration.params(threshold), [None] * steps) > 0

    # -- words ---------------------------------------------------------------------------------
    def plot_value(self, step: StepEvent) -> float | None:
        """MagCache's counterpart of "predicted change": the error a first reuse would add,
        |1 − measured magnitude ratio| on the vanilla run."""
        ratio = _float(step.figures(self.name).get("ratio"))
        return None if ratio is None or not math.isfinite(ratio) else abs(1.0 - ratio)

    def step_lines(self, step: StepEvent, gated: bool) -> list[str]:
        figures = step.figures(self.name)
        if not gated:
            ratio = _float(figures.get("ratio"))
            return [f"magnitude ratio (measured, vs previous step): {format_figure(ratio)}"]
        table_ratio = _float(figures.get("table_ratio"))
        return [
            f"magnitude ratio (from the table): {format_figure(table_ratio)}",
            f"accumulated error: {format_figure(step.accumulated)} vs threshold "
            f"{step.threshold:.4g}",
        ]

    def calibration_lines(self, calibration: MagCacheCalibration) -> list[str]:
        ratios = calibration.ratios[1:]
        lines = [
            f"Magnitude ratios: {len(calibration.ratios)} steps, "
            f"{min(ratios):.4g} – {max(ratios):.4g}",
            f"Recipe: retention {calibration.retention_ratio:g}, "
            f"K {calibration.max_consecutive_skips}",
        ]
        if calibration.always_compute:
            always = ", ".join(str(i + 1) for i in calibration.always_compute)
            lines.append(f"Always computed (table steps): {always}")
        return lines

    def provenance_text(self, calibration: MagCacheCalibration) -> str:
        p = calibration.provenance
        lines = [f"MagCache table: {p.source.rstrip('.')}."]
        if p.data_size:
            lines.append(f"Data: {p.data_size}.")
        lines.append(
            f"Recipe: the first {calibration.retention_ratio:.0%} of steps compute, at most "
            f"{calibration.max_consecutive_skips} reused in a row."
        )
        if p.notes:
            lines.append(p.notes[:1].upper() + p.notes[1:].rstrip(".") + ".")
        return " ".join(lines)

    def calibration_summary(self, calibration: MagCacheCalibration) -> str:
        own = calibration.default_threshold
        if own is None:
            return (
                "This model's MagCache table sets no threshold; MagCache's guesses may be off. "
                "Figures: Details, under the images."
            )
        return (
            f"MagCache's table was measured for this model; {own:g} is its threshold. "
            "Figures: Details, under the images."
        )

    def threshold_hint(
        self,
        params: MagCacheParams,
        steps: int,
        *,
        measured: bool = False,
        onset: float | None = None,
    ) -> str:
        """Eligible steps and where skipping begins, both read from the table (exact for any run
        of this many steps, so a vanilla run adds nothing)."""
        probe = params.with_threshold(max(params.threshold, 1e-9))
        eligible, first, step = table_onset(probe, steps)
        text = (
            f"{eligible} of {steps} steps are MagCache-eligible (the first "
            f"{probe.first_eligible(steps)} always compute)."
        )
        if first is not None and step is not None:
            text += f" From its table, {self.onset_words(first)} (step {step + 1})."
        return text


def _float(value: Figure) -> float | None:
    return value if isinstance(value, float) else None


MAGCACHE_KIND = MagCacheKind()
