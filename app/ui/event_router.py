"""The one subscriber of the engine thread's events: it hands each event to the state it belongs
to, in one fixed order. Qt-free.

Every event of a threshold comparison goes to ``ThresholdComparer`` only (the main view is not
driven by the batch), and every event of a calibration (a model's load during one included) to
``ModelCalibrator`` only. Every other event goes, in this order, to:

1. ``Session.apply_target_result``: a target search's result moves the form's threshold to the
   chosen one *before* the result is shown, so the result on screen matches the inputs the moment
   it appears (no "previous run" caption, no threshold re-run of it);
2. ``RunModel.handle_event``: the run's state and, at its end, ``RunModel.show`` of its report;
3. ``QualityModel.handle_event``: the target search's list of thresholds tried.

The order is this module's, written once, instead of the order in which four subscribers happened
to be connected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.events import EngineEvent
    from app.ui.analysis import RunAnalysis, RunSaved
    from app.ui.calibrate_model import ModelCalibrator
    from app.ui.quality_model import QualityModel
    from app.ui.run_model import RunModel
    from app.ui.session import Session
    from app.ui.threshold_compare_model import ThresholdComparer

    RoutedEvent = EngineEvent | RunAnalysis | RunSaved


class EventRouter:
    """See the module docstring. ``quality`` and ``calibrator`` are optional (a window without
    the target panel or the calibration dialog)."""

    def __init__(
        self,
        session: Session,
        run: RunModel,
        comparer: ThresholdComparer,
        quality: QualityModel | None = None,
        calibrator: ModelCalibrator | None = None,
    ) -> None:
        self.session = session
        self.run = run
        self.comparer = comparer
        self.quality = quality
        self.calibrator = calibrator

    def route(self, event: RoutedEvent) -> None:
        run_id = getattr(event, "run_id", None)
        if run_id is not None and run_id == self.comparer.run_id:
            self.comparer.handle_event(event)
            return
        if self.calibrator is not None and self.calibrator.owns(event):
            self.calibrator.handle_event(event)
            return
        self.session.apply_target_result(event)
        self.run.handle_event(event)
        if self.quality is not None:
            self.quality.handle_event(event)
