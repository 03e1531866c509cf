"""TeaCache as a gate kind: a degree-4 polynomial of the change of the family's modulated
block-0 input predicts the output's change; steps are reused while the accumulated prediction
stays below the threshold (``app.gate.decision``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from app.gate.decision import (
    GATE_NAME,
    TeaCacheParams,
    Verdict,
    predict_change,
    prediction_floor,
    teacache_figures,
)
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
    walk_candidates,
)
from app.gate.provenance import Provenance
from app.gate.simulator import Engagement, engagement, simulate

if TYPE_CHECKING:
    from app.gate.live import LiveGate, TapRecorder

# The polynomial that prices a vanilla pass's signal where the variant has no TeaCache calibration
# (it runs another gate): the identity keeps the recorded prediction equal to the measured change.
_UNPRICED = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 1.0, 0.0), rel_l1_thresh=0.0)


@dataclass(frozen=True, slots=True)
class TeaCacheCalibration:
    """A variant's TeaCache numbers: the polynomial (high → low), the signal range it was fitted
    on, its default threshold (None: the gate cannot engage on the default schedule), where they
    come from, and the smallest predicted change seen on the calibration data at
    ``measured_steps`` (the variant's default steps) where one was measured."""

    coefficients: tuple[float, ...]
    calibrated_range: tuple[float, float] | None
    default_threshold: float | None
    provenance: Provenance
    min_predicted_change: float | None = None
    measured_steps: int | None = None

    gate: ClassVar[str] = GATE_NAME


class TeaCacheKind(GateKind[TeaCacheParams, TeaCacheCalibration, float]):
    name = GATE_NAME
    label = "TeaCache"
    threshold_meaning = (
        "TeaCache: how much predicted change in the model's output to let pile up before a "
        "step is computed again"
    )
    threshold_quantity = "rel-L1 accumulation"
    params_type = TeaCacheParams
    calibration_type = TeaCacheCalibration
    signal = Signal.modulated_input
    calibration_method = CalibrationMethod.polynomial
    fallback_threshold = 0.2
    skips_at_onset = False  # skips while the accumulated prediction is strictly below
    exact_simulation = False  # exact up to the first skip (the signal follows the latents)
    forced_skips = True  # a constant polynomial forces any pattern (bench --forced-skips)
    plot = PlotSpec(
        axis_label="predicted change",
        vanilla_legend="predicted change per step",
        gated_legend="TeaCache: accumulated prediction",
    )
    onset_source = "Measured on this run"
    onset_quantity = "predicted change"
    onset_noun = "prediction"
    floor_source = "the lowest TeaCache's calibrated formula ever predicts"
    no_default_reason = "the gate is not calibrated"
    no_skip_reason = "every predicted change is at or above 1 on this schedule"

    def calibration_from_json(self, section: Mapping[str, Any]) -> TeaCacheCalibration:
        """Its section of a calibration file: the polynomial (high → low), the calibrated range,
        the default threshold, provenance, the smallest predicted change measured and the steps
        it was measured at (each but the polynomial optional)."""
        calibrated = section.get("calibrated_range")
        provenance = section.get("provenance")
        minimum = section.get("min_predicted_change")
        steps = section.get("measured_steps")
        threshold = section.get("default_threshold")
        return TeaCacheCalibration(
            coefficients=tuple(float(c) for c in section["coefficients"]),
            calibrated_range=None
            if calibrated is None
            else (float(calibrated[0]), float(calibrated[1])),
            default_threshold=None if threshold is None else float(threshold),
            provenance=Provenance(**provenance) if provenance else Provenance(source=""),
            min_predicted_change=None if minimum is None else float(minimum),
            measured_steps=None if steps is None else int(steps),
        )

    def params(
        self, calibration: TeaCacheCalibration, threshold: float | None = None, **overrides: Any
    ) -> TeaCacheParams:
        thresh = calibration.default_threshold if threshold is None else threshold
        return TeaCacheParams(
            coefficients=calibration.coefficients,
            rel_l1_thresh=0.0 if thresh is None else thresh,
            calibrated_range=calibration.calibrated_range,
            **overrides,
        )

    def default_threshold(self, calibration: TeaCacheCalibration) -> float | None:
        return calibration.default_threshold

    def warmup(self) -> TeaCacheParams:
        """A constant polynomial that predicts 0.1 per step against a threshold of 0.5: over three
        steps the gate computes (forced first), skips, computes (forced last), whatever the
        weights."""
        return TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.1), rel_l1_thresh=0.5)

    def threshold_key(self, variant_id: str) -> str:
        return variant_id  # settings written before there was a second gate

    # -- its figures ---------------------------------------------------------------------------
    def verdict_figures(self, verdict: Verdict) -> dict[str, Figure]:
        return {**teacache_figures(verdict)}

    def legacy_figures(
        self, row: Mapping[str, Any], *, deciding: bool, vanilla: bool
    ) -> dict[str, Figure] | None:
        """A vanilla row was its observer's (TeaCache's) own: its change, its price and, where
        calibrating, the output's change."""
        if not (deciding or vanilla):
            return None
        found = {key: figure_from_json(row.get(key)) for key in ("rel_l1", "predicted")}
        if vanilla and row.get("output_rel_l1") is not None:
            found["output_rel_l1"] = figure_from_json(row.get("output_rel_l1"))
        return found

    def vanilla_columns(self, steps: Sequence[StepEvent]) -> dict[str, object]:
        return {"vanilla_trace": self.trace(steps)}

    def column_figures(self, report: Mapping[str, Any], steps: int) -> list[dict[str, Figure]]:
        """The trace alone (a vanilla pass's prediction was never a column)."""
        return [{"rel_l1": figure_from_json(x)} for x in column(report, "vanilla_trace", steps)]

    def report_fields(self, params: TeaCacheParams) -> dict[str, Any]:
        return {
            "coefficients": tuple(params.coefficients),
            "calibrated_range": params.calibrated_range,
        }

    def legacy_report_fields(self, report: Mapping[str, Any]) -> dict[str, Any] | None:
        """Reports kept the polynomial as flat keys, whatever gate ran (empty where none)."""
        if "coefficients" not in report and "calibrated_range" not in report:
            return None
        fields = self.report_fields_from_json(
            {key: report.get(key) for key in ("coefficients", "calibrated_range")}
        )
        if not fields.get("coefficients"):
            return None
        return fields

    def recorder(
        self, calibration: TeaCacheCalibration | None, *, calibrating: bool = False
    ) -> TapRecorder:
        """The signal's change on every step, priced by the variant's polynomial (the identity
        where it has none); calibrating, the output's change beside it (the fit's pairs)."""
        from app.gate.live import SignalRecorder

        params = _UNPRICED if calibration is None else self.params(calibration, 0.0)
        return SignalRecorder(self.name, params, calibrating=calibrating)

    # -- traces and simulation ---------------------------------------------------------------
    def trace(self, steps: Sequence[StepEvent | None]) -> list[float | None]:
        return [
            _float(s.figures(self.name).get("rel_l1")) if s is not None else None for s in steps
        ]

    def traced(self, trace: Sequence[float | None]) -> bool:
        return any(t is not None for t in trace)

    def simulate(self, params: TeaCacheParams, trace: Sequence[float | None]) -> list[Verdict]:
        return simulate(params, trace)

    def engagement(self, params: TeaCacheParams, trace: Sequence[float | None]) -> Engagement:
        return engagement(params.with_threshold(max(params.threshold, 0.01)), trace)

    def candidates(self, params: TeaCacheParams, trace: Sequence[float | None]) -> list[Candidate]:
        """A step skips where its accumulated prediction is below the threshold, so the pattern
        only changes where the threshold passes the accumulated prediction of a step the gate
        computed: walking from one such value to the next visits every pattern once."""
        # A computed step counts only where the gate could have skipped it (a measured change,
        # inside the calibrated range).
        return walk_candidates(
            lambda probe: simulate(replace(params, rel_l1_thresh=probe), trace),
            lambda v: v.rel_l1 is not None and not predict_change(params, v.rel_l1)[1],
        )

    def live_class(self) -> type[LiveGate]:
        from app.gate.live import TeaCacheGate

        return TeaCacheGate

    # -- the weight-free schedule check --------------------------------------------------------
    def schedule(self, params: TeaCacheParams, steps: int) -> ScheduleFacts:
        return ScheduleFacts(params.eligible_steps(steps), prediction_floor(params))

    def no_eligible_reason(self, params: TeaCacheParams, steps: int) -> str:
        return (
            f"{steps} steps leave no gate-eligible step (the first and last steps always compute)"
        )

    def floor_reason(self, params: TeaCacheParams, steps: int, floor: float) -> str:
        where = "inside its calibrated range" if params.calibrated_range else "for any change"
        return (
            f"the polynomial never predicts a change below {floor:.3f} {where}, so threshold "
            f"{params.threshold:g} cannot skip any step; use a threshold above {floor:.3f}"
        )

    def eligible_reason(self, eligible: int, steps: int) -> str:
        return f"{eligible} of {steps} steps are gate-eligible"

    def calibration_blocks(self, calibration: TeaCacheCalibration, threshold: float) -> str | None:
        floor = calibration.min_predicted_change
        if floor is None or floor < threshold:
            return None
        return (
            f"distilled schedule: the smallest predicted change measured is {floor:.3f}, "
            f"at or above the threshold {threshold:g}, so no step can be skipped"
        )

    def calibration_floor(self, calibration: TeaCacheCalibration, steps: int) -> float | None:
        """The smallest measured prediction holds for the steps it was measured at only: other
        step counts change by other amounts per step."""
        if steps != calibration.measured_steps:
            return None
        return calibration.min_predicted_change

    def calibration_says_skips(
        self, calibration: TeaCacheCalibration, steps: int, threshold: float
    ) -> bool:
        """The calibration measured its own steps: its smallest prediction below ``threshold``
        (before the first skip each eligible step compares its own prediction with the
        threshold, so that step skips), or, where none is stored, ``threshold`` at least the
        calibrated default (chosen because it skips there) and above the polynomial's floor."""
        params = self.params(calibration, threshold)
        if params.eligible_steps(steps) <= 0 or threshold <= prediction_floor(params):
            return False
        if calibration.min_predicted_change is not None:
            return calibration.min_predicted_change < threshold
        default = calibration.default_threshold
        return default is not None and threshold >= default

    # -- words ---------------------------------------------------------------------------------
    def plot_value(self, step: StepEvent) -> float | None:
        return _float(step.figures(self.name).get("predicted"))

    def step_lines(self, step: StepEvent, gated: bool) -> list[str]:
        figures = step.figures(self.name)
        lines = [
            f"rel-L1 (gate signal change): {format_figure(_float(figures.get('rel_l1')))}",
            f"predicted output change: {format_figure(_float(figures.get('predicted')))}",
        ]
        if gated:
            lines.append(
                f"accumulated: {format_figure(step.accumulated)} vs threshold {step.threshold:.4g}"
            )
        return lines

    def calibration_lines(self, calibration: TeaCacheCalibration) -> list[str]:
        lines: list[str] = []
        coefficients = calibration.coefficients
        if coefficients:
            poly = " + ".join(
                f"{c:.4g}·x^{len(coefficients) - 1 - i}" for i, c in enumerate(coefficients)
            )
            lines.append(f"Polynomial: {poly.replace('·x^0', '')}")
        if calibration.calibrated_range is not None:
            low, high = calibration.calibrated_range
            lines.append(f"Calibrated rel-L1 range: {low:.4g} – {high:.4g}")
        return lines

    def provenance_text(self, calibration: TeaCacheCalibration) -> str:
        p = calibration.provenance
        lines = [p.source.rstrip(".") + "."]
        if p.fit_metric and p.fit_value is not None:
            lines.append(f"Fit quality: {p.fit_metric} {p.fit_value:g}.")
        if p.data_size:
            lines.append(f"Data: {p.data_size}.")
        if p.notes:
            lines.append(p.notes[:1].upper() + p.notes[1:].rstrip(".") + ".")
        if calibration.calibrated_range is not None:
            lo, hi = calibration.calibrated_range
            lines.append(f"Signal changes outside {lo:.3f}–{hi:.3f} always compute.")
        return " ".join(lines)

    def calibration_summary(self, calibration: TeaCacheCalibration) -> str:
        own = calibration.default_threshold
        if own is None:
            return (
                "This model has no threshold measured for it; TeaCache's guesses may be off. "
                "Figures: Details, under the images."
            )
        return (
            f"TeaCache was tuned for this model; {own:g} is its measured threshold. "
            "Figures: Details, under the images."
        )

    def threshold_hint(
        self,
        params: TeaCacheParams,
        steps: int,
        *,
        measured: bool = False,
        onset: float | None = None,
    ) -> str:
        eligible = params.eligible_steps(steps)
        text = f"{eligible} of {steps} steps may be skipped (never the first or last)."
        if measured:
            if onset is not None and onset < 1.0:
                text += f" On the last vanilla run, {self.onset_words(onset)}."
            else:
                text += " On the last vanilla run, no threshold skips a step."
        return text


def _float(value: Figure) -> float | None:
    return value if isinstance(value, float) else None


TEACACHE_KIND = TeaCacheKind()
