"""Target quality in the window, its state: whether Generate searches for a quality, the target,
and the search being shown (every threshold tried, the chosen one, a note).

``QualityModel`` is observable (Qt signals, no widgets); the actions (adding the target to a
Generate, setting the slider to the chosen threshold) live on the Qt-free ``Session``;
``app.ui.quality_view.QualityPanel`` renders and edits it. The search itself runs in the engine
(``app.engine.target``).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.engine.events import RunCancelled, RunFailed, RunFinished, TargetProbed
from app.engine.report import TargetProbe
from app.engine.request import DEFAULT_MAX_LOCAL_DIFF, DEFAULT_MIN_SSIM, QualityTarget
from app.ui.observable import Prop


class QualityModel(QObject):
    """Whether Generate searches for a quality, the target, and the current search."""

    enabled_changed = Signal(object)
    min_ssim_changed = Signal(object)
    max_local_diff_changed = Signal(object)
    run_id_changed = Signal(object)
    probes_changed = Signal(object)
    chosen_changed = Signal(object)
    note_changed = Signal(object)

    enabled = Prop(False)
    min_ssim = Prop(DEFAULT_MIN_SSIM)
    max_local_diff = Prop(DEFAULT_MAX_LOCAL_DIFF)
    run_id = Prop(0)  # the run whose search is shown (0: none yet)
    probes = Prop[tuple[TargetProbe, ...]](())
    chosen = Prop[float | None](None)
    note = Prop("")

    def target(self) -> QualityTarget | None:
        if not self.enabled:
            return None
        return QualityTarget(float(self.min_ssim), float(self.max_local_diff))

    def begin(self, run_id: int) -> None:
        self.run_id = run_id
        none: tuple[TargetProbe, ...] = ()
        self.probes = none
        self.chosen = None
        self.note = "Searching…"

    def handle_event(self, event: object) -> None:
        """Applies the engine's events of the shown search (others are ignored)."""
        if getattr(event, "run_id", None) != self.run_id or not self.run_id:
            return
        match event:
            case TargetProbed():
                tried: tuple[TargetProbe, ...] = (*self.probes, event.probe)
                self.probes = tried
                self.note = f"Searching… {event.index + 1} of at most {event.max_passes} passes"
            case RunFinished() if event.report.target_search is not None:
                search = event.report.target_search
                self.probes = search.probes
                self.chosen = search.chosen_threshold
                self.note = search.note
            case RunCancelled():
                self.note = "Cancelled before a pass finished: nothing to keep."
            case RunFailed():
                self.note = "The search stopped: the run failed."
