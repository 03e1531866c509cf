"""The main window: the sidebar (``app.ui.form_view``) beside the result side
(``app.ui.results_view``), the menus and the status bar, and the jobs only a window has: dialogs,
closing, geometry. It receives a ``Studio`` (``app.ui.app``: the stores, view-models, engine
thread, the Qt-free actions and the event router), binds widgets to it and connects their signals
to the actions, which hold what every button does without Qt: the session (generate, cancel,
reopen), the exporter, the availability (downloads), the notices (banner fixes), the gate advice.
``open_window`` builds both."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QProgressBar, QSplitter, QWidget

from app.storage.comparisons import is_comparison
from app.storage.history import HistoryEntry, HistoryStore
from app.storage.settings import SettingsStore
from app.ui.analysis import BannerFix, Notice
from app.ui.app import Studio
from app.ui.calibrate_view import CalibrateDialog
from app.ui.downloads import ModelStore
from app.ui.form_view import ControlsView, FormPanel
from app.ui.geometry import restore_geometry, save_geometry
from app.ui.history_view import HistoryDialog
from app.ui.input_view import InputPanel, PictureDrops
from app.ui.job_slot import JobStatus
from app.ui.menus import build_menus
from app.ui.quality_view import QualityPanel
from app.ui.refresh import RefreshScheduler
from app.ui.results_view import ResultsView
from app.ui.theme import mute, small_font
from app.ui.threshold_compare_view import ThresholdCompareDialog
from app.ui.worker import EngineFactory

log = logging.getLogger(__name__)
RERUN_DELAY_MS = 400
CLOCK_INTERVAL_MS = 1000  # the status line's time left, while a run is going
TERMINAL_STATUSES = (JobStatus.finished, JobStatus.cancelled, JobStatus.failed)
EXPORT_MESSAGE_MS = 10_000  # how long the status bar confirms an export


def open_window(
    engine_factory: EngineFactory,
    *,
    settings_store: SettingsStore | None = None,
    history: HistoryStore | None = None,
    model_store: ModelStore | None = None,
    shutdown_timeout_ms: int = 10_000,
) -> MainWindow:
    """A main window over a freshly built ``Studio`` (not shown yet)."""
    studio = Studio.build(
        engine_factory, settings_store=settings_store, history=history, model_store=model_store
    )
    return MainWindow(studio, shutdown_timeout_ms=shutdown_timeout_ms)


class MainWindow(QMainWindow):
    generation_started = Signal(int)
    run_ended = Signal(object)  # JobStatus: finished, cancelled or failed
    shut_down = Signal()  # settings saved and the engine thread stopped (or left behind)

    def __init__(
        self, studio: Studio, *, shutdown_timeout_ms: int = 10_000, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("TeaCache Studio")
        self.studio = studio
        # The parts by name: what the window binds to (and tests and the lab reach through it).
        self.settings_store, self.settings = studio.settings_store, studio.settings
        self.history, self.model_store = studio.history, studio.model_store
        self.form, self.run, self.quality = studio.form, studio.run, studio.quality
        self.host, self.downloads = studio.host, studio.downloads
        self.session, self.comparer = studio.session, studio.comparer
        self.calibrator, self.availability = studio.calibrator, studio.availability
        self.notices, self.gate_advice = studio.notices, studio.gate_advice
        self.exporter = studio.exporter
        for part in (self.form, self.run, self.quality, self.host, self.downloads):
            part.setParent(self)  # the window's Qt parts live as long as it does
        self.session.started = self.generation_started.emit
        self._shutdown_timeout_ms = shutdown_timeout_ms
        self._shut_down = False
        self._closing_notice: QLabel | None = None  # "finishing the current step" while closing
        self._close_bound_ms = shutdown_timeout_ms
        self.compare_dialog: ThresholdCompareDialog | None = None
        self.history_dialog: HistoryDialog | None = None
        self.calibrate_dialog: CalibrateDialog | None = None
        self._rerun_timer = QTimer(self)
        self._rerun_timer.setSingleShot(True)
        self._rerun_timer.setInterval(RERUN_DELAY_MS)
        self._rerun_timer.timeout.connect(self.session.rerun_threshold)
        self._clock_timer = QTimer(self)  # the time left (or spent on a first step) ticks on
        self._clock_timer.setInterval(CLOCK_INTERVAL_MS)
        self._clock_timer.timeout.connect(lambda: self.refresh.schedule("status"))

        self._build()
        self.refresh = RefreshScheduler(
            lambda: self.run.busy,
            {
                "plot": self.results.refresh_plot,
                "timeline": self.results.refresh_timeline,
                "previews": self.results.refresh_images,
                "stats": self.results.refresh_stats,
                "status": self._show_status,
            },
            self,
        )
        self._build_menus()
        self._connect_callbacks()
        self._refresh_run_view()
        self._refresh_notices()
        self._refresh_staleness()
        self._restore_geometry()

    # -- construction
    def _build(self) -> None:
        self.controls = ControlsView()
        self.input_panel = InputPanel(self.studio.inputs)  # under the prompt
        prompt_at = self.controls.form_layout.indexOf(self.controls.prompt)
        self.controls.form_layout.insertWidget(prompt_at + 1, self.input_panel)
        self.controls.form_layout.insertSpacing(prompt_at + 1, 10)
        self.picture_drops = PictureDrops(self, self.studio.inputs)  # dropped anywhere on it
        self.quality_panel = QualityPanel(self.quality)
        rerun_at = self.controls.form_layout.indexOf(self.controls.rerun)
        self.controls.form_layout.insertWidget(rerun_at + 1, self.quality_panel)
        self.results = r = ResultsView(self.studio)
        self.banners, self.compare, self.run_details = r.banners, r.compare, r.run_details
        self.timeline, self.legend, self.gate_plot = r.timeline, r.legend, r.gate_plot
        self.results_splitter, self.results_scroll = r.splitter, r.scroll_area
        self.stale_caption = r.stale_caption
        self.compare.message.connect(
            lambda text: self.statusBar().showMessage(text, EXPORT_MESSAGE_MS)
        )

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.controls)
        splitter.addWidget(self.results)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setHandleWidth(1)
        self.splitter = splitter
        self.setCentralWidget(splitter)

        self.status_label = QLabel()
        self.status_label.setFont(small_font(self.status_label.font()))
        self.status_label.setContentsMargins(10, 0, 0, 0)
        self.saved_label = QLabel()
        self.saved_label.setFont(small_font(self.saved_label.font()))
        mute(self.saved_label)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setMaximumHeight(10)
        self.progress.setTextVisible(False)
        self.progress.setRange(0, 1000)
        bar = self.statusBar()
        bar.setSizeGripEnabled(True)
        bar.addWidget(self.status_label, 1)
        bar.addPermanentWidget(self.saved_label)
        bar.addPermanentWidget(self.progress)
        self.resize(1320, 860)
        self.setMinimumSize(960, 640)

    def _build_menus(self) -> None:
        actions = build_menus(self, self.studio.folders, self._model_folders_changed)
        self.history_action, self.export_action = actions.history, actions.export
        self.quit_action, self.generate_action = actions.quit, actions.generate
        self.cancel_action, self.random_seed_action = actions.cancel, actions.random_seed
        self.reset_threshold_action, self.compare_action = actions.reset_threshold, actions.compare
        self.model_folders = actions.model_folders
        self.calibrate_action = actions.calibrate

    def _connect_callbacks(self) -> None:
        c, f, r, s = self.controls, self.form, self.run, self.session
        self.form_panel = FormPanel(c, self.studio)  # the sidebar: bound, its buttons connected
        for signal in (
            f.variant_id_changed,
            f.steps_changed,
            f.threshold_changed,
            f.gate_changed,  # each gate's banner is its own
            f.quantize_changed,
            f.size_changed,
            r.band_changed,
            r.engagement_changed,
            r.request_changed,
            r.error_changed,
            r.notices_changed,
            self.studio.inputs.note_changed,  # what strength leaves the gate
        ):
            signal.connect(self._refresh_notices)
        f.threshold_changed.connect(self._on_threshold_changed)
        c.history_button.clicked.connect(self.show_history)
        self.run_details.expanded_changed.connect(s.set_details_expanded)

        self.generate_action.triggered.connect(s.generate)
        self.cancel_action.triggered.connect(s.cancel)
        self.random_seed_action.triggered.connect(s.randomize_seed)
        self.reset_threshold_action.triggered.connect(f.reset_threshold)
        self.history_action.triggered.connect(self.show_history)
        self.compare_action.triggered.connect(lambda: self.show_comparison())
        self.calibrate_action.triggered.connect(lambda: self.show_calibration())
        c.calibrate_button.clicked.connect(lambda: self.show_calibration())
        self.calibrator.saved.append(lambda _variant_id: self._model_folders_changed())
        self.export_action.triggered.connect(lambda: self.export_current())
        r.gated_image_changed.connect(self._refresh_export_action)
        self._refresh_export_action()
        self.quit_action.triggered.connect(self.close)

        # The engine's events reach the view-models through the one router (``Studio.build``);
        # the window follows the view-models.
        self.host.busy_changed.connect(self._on_engine_busy)
        r.status_changed.connect(self._on_status)
        f.steps_changed.connect(self._refresh_generate_enabled)
        f.variant_id_changed.connect(self._refresh_generate_enabled)
        self.results.connect_run(self.refresh)
        r.phase_changed.connect(lambda *_: self.refresh.schedule("status"))
        r.progress_changed.connect(lambda *_: self.refresh.schedule("status"))
        r.saved_entry_changed.connect(self._show_saved)
        for signal in (
            f.variant_id_changed,
            f.prompt_changed,
            f.steps_changed,
            f.seed_changed,
            f.threshold_changed,
            f.gate_changed,
            f.size_changed,
            f.guidance_changed,
            f.loras_changed,
            self.studio.inputs.picture_changed,
            self.studio.inputs.strength_changed,
            r.request_changed,
            r.status_changed,
            r.gated_image_changed,
        ):
            signal.connect(self._refresh_staleness)

        self.banners.action_triggered.connect(self._on_banner_action)
        self.banners.dismissed.connect(self._dismiss)

    # -- actions that need a window (dialogs, geometry); the rest are the session's
    def show_history(self) -> HistoryDialog:
        if self.history_dialog is None:
            self.history_dialog = HistoryDialog(self.history, self)
            self.history_dialog.open_requested.connect(self.open_history_entry)
        else:
            self.history_dialog.refresh()
        self.history_dialog.show()
        self.history_dialog.raise_()
        return self.history_dialog

    def show_comparison(self) -> ThresholdCompareDialog:
        if self.compare_dialog is None:
            self.compare_dialog = ThresholdCompareDialog(self.comparer, self)
        elif self.comparer.status is JobStatus.idle:  # nothing shown yet: follow the form
            self.compare_dialog.fill_defaults()
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        return self.compare_dialog

    def show_calibration(self) -> CalibrateDialog:
        """Calibrate This Model… for the form's model and settings (the one going on, if any)."""
        if self.calibrate_dialog is None:
            self.calibrate_dialog = CalibrateDialog(self.calibrator, self)
        else:
            if not self.calibrate_dialog.isVisible():  # opened again: the last run is past
                self.calibrator.forget_last_run()
            self.calibrate_dialog.fill_defaults()
        self.calibrate_dialog.show()
        self.calibrate_dialog.raise_()
        return self.calibrate_dialog

    def open_history_entry(self, entry: HistoryEntry) -> bool:
        """A saved run reopens in the window; a saved comparison in the comparison view too."""
        if not self.session.open_entry(entry):
            return False
        if is_comparison(entry) and self.comparer.open_entry(entry):
            self.show_comparison()
        return True

    def _refresh_export_action(self, *_args: object) -> None:
        """Export only where a finished result is on screen (Ctrl+E said "Cannot generate")."""
        self.export_action.setEnabled(self.run.gated_image is not None)

    def export_current(self, path: Path | None = None) -> Path | None:
        """Export the shown run side by side; asks where unless ``path`` is given."""
        if not self.exporter.can_export():
            return None
        if path is None:
            suggested = Path.home() / self.exporter.suggested_export_name()
            name, _ = QFileDialog.getSaveFileName(
                self, "Export Side-by-Side", str(suggested), "PNG (*.png)"
            )
            if not name:
                return None
            path = Path(name)
        written = self.exporter.export(path)
        if written is not None:
            self.statusBar().showMessage(f"Exported {written}", EXPORT_MESSAGE_MS)
        return written

    def shutdown(self, timeout_ms: int | None = None) -> bool:
        """Persist settings and geometry, stop downloads and the engine thread (bounded)."""
        if self._shut_down:
            return True
        self._shut_down = True
        self._rerun_timer.stop()
        self._clock_timer.stop()
        if self.isVisible():
            self._save_geometry()
        bound = self._shutdown_timeout_ms if timeout_ms is None else timeout_ms
        stopped = self.session.shutdown(bound)
        self.shut_down.emit()
        return stopped

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._shut_down and self._closing_notice is None and self.host.busy:
            # A step can take many seconds: hide at once and let it finish off the GUI thread,
            # instead of freezing a visible window in a blocking wait.
            self._save_geometry()
            if self.session.begin_close():
                event.ignore()
                self._wait_for_engine_then_close()
                return
        self.shutdown(timeout_ms=self._close_bound_ms)
        if self._closing_notice is not None:
            self._closing_notice.close()
        if self.history_dialog is not None:
            self.history_dialog.close()
        super().closeEvent(event)

    def _wait_for_engine_then_close(self) -> None:
        self.hide()
        if self.history_dialog is not None:
            self.history_dialog.close()
        notice = QLabel("Finishing the current step…\nTeaCache Studio closes when it ends.")
        notice.setWindowTitle("TeaCache Studio")
        notice.setContentsMargins(24, 18, 24, 18)
        notice.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self._closing_notice = notice
        notice.show()
        self.host.busy_changed.connect(self._on_engine_idle_while_closing)
        # Bounded: a step that never ends is left behind (the launcher exits hard) after this.
        QTimer.singleShot(self._shutdown_timeout_ms, self._give_up_waiting)

    def _on_engine_idle_while_closing(self, busy: bool) -> None:
        if not busy:
            QTimer.singleShot(0, self.close)

    def _give_up_waiting(self) -> None:
        if not self._shut_down:
            log.warning("the current step did not end within %d ms", self._shutdown_timeout_ms)
            self._close_bound_ms = 0
            self.close()

    # -- reactions
    def _model_folders_changed(self) -> None:
        """The model list changed (a folder added or removed, a calibration saved): the picker
        lists it, and the texts follow the form's model."""
        self.form_panel.refresh_availability()
        self.form_panel.refresh_variant_info()
        self._refresh_notices()

    def _refresh_staleness(self, *_args: object) -> None:
        self.results.set_stale(self.session.result_caption(), self.gate_advice.same_schedule)

    def is_dimmed(self, part: str) -> bool:
        """Whether the veil is over ``part`` ("compare", "timeline" or "plot")."""
        return self.results.is_dimmed(part)

    def _on_threshold_changed(self, _value: object) -> None:
        if self.session.wants_threshold_rerun():
            self._rerun_timer.start()

    def _on_status(self, status: object) -> None:
        busy = self.run.busy or self.host.busy
        c = self.controls
        c.variant_picker.setEnabled(not busy)  # a run's result belongs to its own selection
        self._refresh_generate_enabled()
        c.cancel_button.setEnabled(busy and status is not JobStatus.cancelling)
        self.cancel_action.setEnabled(busy)
        self.results.refresh_images()
        if busy and not self._clock_timer.isActive():
            self._clock_timer.start()
        elif not busy:
            self._clock_timer.stop()
        if status in TERMINAL_STATUSES:
            # The summary line waits for the end; whoever waits for the end sees the final plot
            # and numbers.
            self.refresh.flush("stats")
            self.run_ended.emit(status)

    def _on_engine_busy(self, _busy: bool) -> None:
        """A comparison keeps the engine busy without a run in the main view: Generate waits."""
        busy = self.run.busy or self.host.busy
        self.controls.variant_picker.setEnabled(not busy)
        self._refresh_generate_enabled()

    def _refresh_generate_enabled(self, *_args: object) -> None:
        """Generate waits for the engine, and for steps the variant can run: the inline sentence
        under Steps already says why, so pressing it would only repeat that in a banner."""
        ready = not (self.run.busy or self.host.busy) and self.form.steps_problem() is None
        self.controls.generate_button.setEnabled(ready)
        self.generate_action.setEnabled(ready)

    def _show_status(self) -> None:
        # QProgressBar.setValue repaints synchronously: once per frame, not once per step.
        self.status_label.setText(self.run.status_text())
        self._show_progress(self.run.progress)

    def _refresh_run_view(self) -> None:
        self._on_status(self.run.status)
        self.results.refresh_timeline()
        self.results.refresh_plot()
        self.results.refresh_stats()
        self._show_status()

    def _show_progress(self, value: object) -> None:
        fraction = float(value)  # type: ignore[arg-type]
        if fraction < 0:
            self.progress.setRange(0, 0)  # indeterminate
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(round(fraction * 1000))

    def _show_saved(self, folder: object) -> None:
        self.saved_label.setText("Saved to history" if folder else "")
        self.saved_label.setToolTip(str(folder) if folder else "")

    def current_schedule_notice(self) -> Notice | None:
        return self.gate_advice.schedule_notice()

    def _refresh_notices(self) -> None:
        self.banners.set_notices(self.notices.notices())

    def _dismiss(self, key: str) -> None:
        self.notices.dismiss(key)
        self._refresh_notices()

    def _on_banner_action(self, fix: BannerFix) -> None:
        self.notices.apply_fix(fix)
        self._refresh_notices()

    # -- persistence
    def _splitters(self) -> dict[str, QSplitter]:
        return {"splitter": self.splitter, "results_splitter": self.results_splitter}

    def _save_geometry(self) -> None:
        save_geometry(self, self._splitters())

    def _restore_geometry(self) -> None:
        restore_geometry(self, self._splitters())
