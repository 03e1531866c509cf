"""What the window says about the gate for the inputs: where skipping begins (the band), the
schedule banner, the gate plot's data and its LoRA caveat, and the hint under the threshold.
Qt-free.

Everything here is read in the picked gate's own numbers, and from the shown run only where it
applies to the inputs (the same variant and steps): a vanilla pass records every gate's trace, so
another gate's band is simulated on the shown run's vanilla steps, never read off the numbers of
the gate that ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.engine.notices import schedule_check
from app.gate import StepEvent
from app.gate.kinds import gate_kind
from app.ui.analysis import (
    EngagementBand,
    Notice,
    curve_drift_note,
    engagement_band,
    lora_calibration_note,
    schedule_notice,
)
from app.ui.plain_words import gate_unavailable
from app.variants import UnknownVariantError
from app.variants.schedule import steps_left_out

if TYPE_CHECKING:
    from app.ui.form_model import FormModel
    from app.ui.run_model import RunModel


@dataclass(frozen=True, slots=True)
class GatePlotData:
    """What the gate plot draws (``GateAdvice.gate_plot_data``)."""

    gate: str
    gated: Sequence[StepEvent | None]
    vanilla: Sequence[StepEvent | None]
    threshold: float
    band: EngagementBand | None
    preview: float | None  # the inputs' threshold, drawn dotted where it differs


class GateAdvice:
    """See the module docstring."""

    def __init__(self, form: FormModel, run: RunModel) -> None:
        self.form = form
        self.run = run
        # The picked gate's band when the shown run ran another (``gate_band``), memoised.
        self._gate_band: tuple[object, EngagementBand | None] | None = None
        self._wide_band: tuple[object, EngagementBand | None] | None = None

    @property
    def same_schedule(self) -> bool:
        """The shown run has the inputs' variant and steps: its trace and numbers apply to them."""
        request = self.run.request
        return request is not None and (request.variant_id, request.steps) == (
            self.form.variant_id,
            self.form.steps,
        )

    def gate_band(self) -> EngagementBand | None:
        """The shown run's band for the picker's gate: the run's own where it ran that gate,
        else the picked gate's on the run's vanilla steps (a vanilla pass records every gate's
        trace), so nothing about one gate is read off another's numbers."""
        f, r = self.form, self.run
        band, request = r.band, r.request
        if band is None or band.gate == f.gate or request is None:
            return band
        key = (band, request.variant_id, f.gate, float(f.threshold))
        if self._gate_band is None or self._gate_band[0] != key:
            found = engagement_band(
                request.variant,
                float(f.threshold),
                r.vanilla_steps,
                f.gate,
                left_out=request.steps_left_out,
            )
            self._gate_band = (key, found)
        return self._gate_band[1]

    def schedule_notice(self) -> Notice | None:
        """The schedule banner for the inputs, in the picked gate's numbers: after a run of the
        same variant and steps, its own band on the shown run's vanilla steps, and what the run
        measured (its engagement) only where that run ran this gate, and the check the engine
        warned it with only at that run's threshold: never another result's, nor another
        gate's, nor another threshold's."""
        f, r = self.form, self.run
        if f.steps_problem() is not None:
            return None  # no schedule to judge: the steps' own sentence is under Steps
        shown = r.request if self.same_schedule else None
        same_gate = shown if shown is not None and shown.gate == f.gate else None
        # The engine's check judged that run's threshold: at another one (a fix just applied)
        # it says nothing, and the run's trace decides.
        same_threshold = (
            same_gate if same_gate is not None and same_gate.threshold == f.threshold else None
        )
        return schedule_notice(
            f.variant,
            int(f.steps),
            float(f.threshold),
            measured=self.gate_band() if shown is not None else None,
            engagement=r.engagement if same_gate is not None else None,
            run_check=schedule_check(same_threshold) if same_threshold is not None else None,
            gate=f.gate,
            strength=f.picture_inputs().get("strength"),
        )

    def gate_plot_data(self) -> GatePlotData:
        """What the gate plot draws: the shown run in its gate's terms, with the inputs'
        threshold as a what-if line on the same vanilla run; where the picker holds another gate
        (and no run is going), that gate's own trace, band and threshold instead (the other
        gate's gated row is on another scale, so it is left out)."""
        f, r = self.form, self.run
        request = r.request
        same = self.same_schedule
        if request is not None and request.gate != f.gate and same and not r.busy:
            band = self._band_reaching(self.gate_band(), float(f.threshold))
            return GatePlotData(f.gate, (), r.vanilla_steps, float(f.threshold), band, None)
        gate = request.gate if request is not None else f.gate
        threshold = request.threshold if request is not None else float(f.threshold)
        # The threshold the gated steps drawn were decided against: a target search runs other
        # thresholds than the request's, and shows its chosen one's pass at the end.
        threshold = next((s.threshold for s in reversed(r.gated_steps) if s is not None), threshold)
        preview = float(f.threshold) if same else None
        band = self._band_reaching(r.band, max(threshold, preview or 0.0))
        return GatePlotData(gate, r.gated_steps, r.vanilla_steps, threshold, band, preview)

    def _band_reaching(
        self, band: EngagementBand | None, threshold: float
    ) -> EngagementBand | None:
        """``band`` with its skip curve drawn as far as ``threshold`` (the slider's what-if):
        the same trace, simulated further (the walk: the curve's axis stopped near 0.15 while
        the slider was at 0.35)."""
        request = self.run.request
        if band is None or request is None or not band.curve or band.curve[-1][0] >= threshold:
            return band
        key = (band, threshold)
        if self._wide_band is None or self._wide_band[0] != key:
            try:
                variant = request.variant
            except UnknownVariantError:  # a reopened run of a variant since removed
                return band
            wide = engagement_band(
                variant,
                threshold,
                self.run.vanilla_steps,
                band.gate,
                left_out=request.steps_left_out,
            )
            self._wide_band = (key, wide if wide is not None else band)
        return self._wide_band[1]

    def gate_plot_note(self) -> str:
        """The gate plot's caveats: the shown run's LoRAs (the form's before any run) against
        what its variant's calibration was made with, and a run that skipped another number of
        steps than the simulated skip curve says (``curve_drift_note``)."""
        request = self.run.request
        if request is None:
            return lora_calibration_note(self.form.loras, self.form.variant, self.form.gate)
        try:
            variant = request.variant
        except UnknownVariantError:  # a run from the history whose calibration is gone
            variant = None
        data = self.gate_plot_data()
        notes = (
            lora_calibration_note(request.loras, variant, request.gate),
            curve_drift_note(data.band, data.threshold, data.gated),
        )
        return " ".join(note for note in notes if note)

    def threshold_hint(self) -> str:
        """Eligible steps and where skipping begins, in the picked gate's own numbers."""
        f = self.form
        if f.steps_problem() is not None:
            return ""  # the steps' own sentence is the one message
        kind = gate_kind(f.gate)
        calibration = kind.calibration_of(f.variant)
        if calibration is None:
            return gate_unavailable(f.variant, f.gate) or ""
        steps = int(f.steps)
        # From a picture the gate decides among the steps strength leaves (``for_steps_run``).
        left_out = steps_left_out(steps, f.picture_inputs().get("strength"))
        params = kind.for_steps_run(
            kind.params(calibration, max(float(f.threshold), 1e-9)), steps, left_out
        )
        ran = steps - left_out
        band = self.gate_band()
        measured = band is not None and band.variant_id == f.variant_id and band.steps == ran
        onset = band.onset if band is not None else None
        return kind.threshold_hint(params, ran, measured=measured, onset=onset)
