"""The main window: layout and wiring only. It builds the widgets, binds them to the view-models
(``FormModel``, ``RunModel``) and connects their signals to ``Session``, which holds every action
(generate, cancel, reopen, export, download, banner fixes) without Qt."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app import paths
from app.gate.gates import GATE_LABELS
from app.storage.comparisons import is_comparison
from app.storage.history import HistoryEntry, HistoryStore
from app.storage.settings import Settings, SettingsStore
from app.ui.analysis import BannerFix, Notice
from app.ui.banner import BannerStack
from app.ui.defaults import MAX_SEED, size_allowed, size_presets
from app.ui.downloads import DownloadController, ModelStore, default_model_store, format_bytes
from app.ui.form_model import FormModel
from app.ui.form_view import ControlsView, calibration_summary, calibration_text
from app.ui.gate_plot import GatePlot
from app.ui.history_view import HistoryDialog
from app.ui.images import ComparePanel
from app.ui.model_folders_view import ModelFolderActions
from app.ui.observable import Binding, bind
from app.ui.quality_model import QualityModel
from app.ui.quality_view import QualityPanel
from app.ui.quantize_view import bind_quantize
from app.ui.run_details import RunDetails, describe_run
from app.ui.run_model import RunModel, RunStatus
from app.ui.session import Session
from app.ui.step_previews import live_image
from app.ui.theme import mute, small_font
from app.ui.threshold_compare_model import CompareStatus, ThresholdComparer, comparison_saver
from app.ui.threshold_compare_view import ThresholdCompareDialog
from app.ui.timeline import StepTimeline, TimelineLegend
from app.ui.veil import Veil
from app.ui.worker import EngineFactory, EngineHost
from app.variants import get_variant

log = logging.getLogger(__name__)
RERUN_DELAY_MS = 400
FRAME_INTERVAL_MS = 100  # number and progress refresh cadence during a run
# The gate plot's cadence during a run. A software-rendered pyqtgraph repaint (axes included) costs
# the GUI thread several milliseconds, on the cores and under the GIL the engine thread's timed
# steps need: lab.bench.window_timing measures the window's step time against the command line's.
RUN_PLOT_INTERVAL_MS = 500
# The step timeline's cadence during a run, for the same reason: a repaint per step (about ten a
# second on the demo) runs inside the engine's timed steps. Filled in live at this cadence; the
# final state is painted at once when the run ends (and at once whenever no run is going).
RUN_TIMELINE_INTERVAL_MS = 500
# Live step previews in the image panes, at the timeline's cadence (an image upload per step
# would cost the GUI thread as a repaint does).
SLOW_REFRESHES = {
    "plot": RUN_PLOT_INTERVAL_MS,
    "timeline": RUN_TIMELINE_INTERVAL_MS,
    "previews": RUN_TIMELINE_INTERVAL_MS,
}
CLOCK_INTERVAL_MS = 1000  # the status line's time left, while a run is going
TERMINAL_STATUSES = (RunStatus.finished, RunStatus.cancelled, RunStatus.failed)


EXPORT_MESSAGE_MS = 10_000  # how long the status bar confirms an export


class MainWindow(QMainWindow):
    generation_started = Signal(int)
    run_ended = Signal(object)  # RunStatus: finished, cancelled or failed
    shut_down = Signal()  # settings saved and the engine thread stopped (or left behind)

    def __init__(
        self,
        engine_factory: EngineFactory,
        *,
        settings_store: SettingsStore | None = None,
        history: HistoryStore | None = None,
        model_store: ModelStore | None = None,
        shutdown_timeout_ms: int = 10_000,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("TeaCache Studio")
        self.settings_store = settings_store or SettingsStore()
        self.settings: Settings = self.settings_store.load()
        self.history = history or HistoryStore()
        self.model_store = model_store or default_model_store()
        self._shutdown_timeout_ms = shutdown_timeout_ms
        self._shut_down = False
        self._closing_notice: QLabel | None = None  # "finishing the current step" while closing
        self._close_bound_ms = shutdown_timeout_ms
        self._bindings: list[Binding] = []

        self.form = FormModel(self.settings, self)
        self.run = RunModel(self)
        self.host = EngineHost(
            engine_factory, self.history.save, self, save_comparison=comparison_saver(self.history)
        )
        self.downloads = DownloadController(self.model_store, self)
        self.quality = QualityModel(self)
        self.session = Session(
            self.form,
            self.run,
            self.host,
            self.downloads,
            settings=self.settings,
            settings_store=self.settings_store,
            history=self.history,
            model_store=self.model_store,
            started=self.generation_started.emit,
            quality=self.quality,
        )
        self.comparer = ThresholdComparer(self.session, self.host)
        self.compare_dialog: ThresholdCompareDialog | None = None
        self.history_dialog: HistoryDialog | None = None
        self._rerun_timer = QTimer(self)
        self._rerun_timer.setSingleShot(True)
        self._rerun_timer.setInterval(RERUN_DELAY_MS)
        self._rerun_timer.timeout.connect(self.session.rerun_threshold)
        self._pending_refreshes: set[str] = set()
        self._frame_timer = QTimer(self)
        self._frame_timer.setSingleShot(True)
        self._frame_timer.timeout.connect(self._flush_refreshes)
        self._plot_refreshed_at = 0.0  # time.monotonic() of the last plot refresh
        self._timeline_refreshed_at = 0.0  # … and of the last timeline refresh
        self._previews_refreshed_at = 0.0  # … and of the last live preview in the panes
        self._clock_timer = QTimer(self)  # the time left (or spent on a first step) ticks on
        self._clock_timer.setInterval(CLOCK_INTERVAL_MS)
        self._clock_timer.timeout.connect(self._schedule_status)

        self._build()
        self._build_menus()
        self._connect_callbacks()
        self._refresh_availability()
        self._on_variant_changed(self.form.variant_id)
        self._refresh_run_view()
        self._refresh_notices()
        self._refresh_staleness()
        self._restore_geometry()

    # -- construction
    def _build(self) -> None:
        self.controls = ControlsView()
        self.quality_panel = QualityPanel(self.quality)
        rerun_at = self.controls.form_layout.indexOf(self.controls.rerun)
        self.controls.form_layout.insertWidget(rerun_at + 1, self.quality_panel)
        self.banners = BannerStack()
        self.compare = ComparePanel()
        self.compare.metadata_source = self.session.export_metadata
        self.compare.message.connect(
            lambda text: self.statusBar().showMessage(text, EXPORT_MESSAGE_MS)
        )
        self.run_details = RunDetails()  # the plain summary line and the Details disclosure
        self._shown_details: tuple[str, list[str]] | None = None
        self.run_details.set_expanded(self.settings.details_expanded)
        compare_layout = self.compare.layout()
        assert compare_layout is not None  # ComparePanel lays itself out in __init__
        compare_layout.addWidget(self.run_details)
        self.timeline = StepTimeline()
        self.legend = TimelineLegend()
        self.gate_plot = GatePlot()

        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 2, 0, 0)
        lower_layout.setSpacing(6)
        steps_header = QHBoxLayout()
        steps_header.addWidget(_section("Steps"))
        steps_header.addSpacing(12)
        steps_header.addWidget(self.legend, 1)
        lower_layout.addLayout(steps_header)
        lower_layout.addWidget(self.timeline)
        gate_header = QHBoxLayout()
        gate_header.addWidget(_section("Gate"), 0, Qt.AlignmentFlag.AlignTop)
        gate_header.addSpacing(12)
        gate_header.addWidget(self.gate_plot.legend, 1)  # beside its title, as the steps' legend
        # The legend wraps to two lines in a narrow window; a splitter pane's minimum ignores
        # word wrap, so reserve both lines (else the pane comes up short and squeezes the plot).
        legend_lines = self.gate_plot.legend.fontMetrics().lineSpacing() * 2
        self.gate_plot.legend.setMinimumHeight(legend_lines)
        lower_layout.addLayout(gate_header)
        lower_layout.addWidget(self.gate_plot, 1)
        self.compare.header.insertWidget(0, _section("Images"))
        # The summary takes the row's room (the header's own stretch keeps a sliver).
        self.compare.header.insertWidget(1, self.run_details.summary, 20)
        self.compare.header.insertWidget(self.compare.header.count() - 1, self.run_details.toggle)
        # A splitter, not stretch factors: it never squeezes a pane below its minimum, and the
        # user can trade image space for plot space.
        self.results_splitter = QSplitter(Qt.Orientation.Vertical)
        self.results_splitter.setChildrenCollapsible(False)
        self.results_splitter.addWidget(self.compare)
        self.results_splitter.addWidget(lower)
        self.results_splitter.setStretchFactor(0, 5)
        self.results_splitter.setStretchFactor(1, 4)
        self.results_splitter.setHandleWidth(8)
        self.results_splitter.setSizes([470, 400])

        # Below the banners, the images and plots scroll when the window is shorter than their
        # minimum heights (1024×700 with a long banner): they never overlap or squash to a strip.
        self.results_scroll = QScrollArea()
        self.results_scroll.setWidgetResizable(True)
        self.results_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.results_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.results_scroll.setWidget(self.results_splitter)

        results = QWidget()
        results_layout = QVBoxLayout(results)
        results_layout.setContentsMargins(16, 12, 16, 10)
        results_layout.setSpacing(8)
        results_layout.addWidget(self.banners)
        self.stale_caption = QLabel()  # what made the shown result, once the inputs differ
        self.stale_caption.setObjectName("StaleCaption")
        self.stale_caption.setWordWrap(True)
        self.stale_caption.setVisible(False)
        results_layout.addWidget(self.stale_caption)
        results_layout.addWidget(self.results_scroll, 1)
        self._veils = {
            "compare": Veil(self.compare),
            "timeline": Veil(self.timeline),
            "plot": Veil(self.gate_plot),
        }

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.controls)
        splitter.addWidget(results)
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
        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        self.history_action = QAction("History…", self)
        self.history_action.setShortcut(QKeySequence("Ctrl+Y"))
        self.export_action = QAction("Export Side-by-Side…", self)
        self.export_action.setShortcut(QKeySequence("Ctrl+E"))
        self.quit_action = QAction("Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        file_menu.addAction(self.history_action)
        file_menu.addAction(self.export_action)
        file_menu.addSeparator()
        self.model_folders = ModelFolderActions(self, self.session, self._model_folders_changed)
        self.model_folders.install(file_menu)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)

        run_menu = menu.addMenu("&Run")
        self.generate_action = QAction("Generate", self)
        self.generate_action.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")])
        self.cancel_action = QAction("Cancel", self)
        self.cancel_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.random_seed_action = QAction("Random Seed", self)
        self.random_seed_action.setShortcut(QKeySequence("Ctrl+R"))
        self.reset_threshold_action = QAction("Reset Threshold", self)
        self.reset_threshold_action.setShortcut(QKeySequence("Ctrl+0"))
        self.compare_action = QAction("Compare Thresholds…", self)
        self.compare_action.setShortcut(QKeySequence("Ctrl+Shift+T"))
        for action in (
            self.generate_action,
            self.cancel_action,
            self.random_seed_action,
            self.reset_threshold_action,
            self.compare_action,
        ):
            run_menu.addAction(action)
            self.addAction(action)  # shortcuts work even where the menu bar is hidden
        for action in (self.history_action, self.export_action):
            self.addAction(action)

    def _connect_callbacks(self) -> None:
        c, f, r, s = self.controls, self.form, self.run, self.session
        self._bindings += [
            bind(f, "variant_id", c.variant_picker.set_variant),
            bind(
                f,
                "prompt",
                c.prompt.set_text_if_different,
                c.prompt.textChanged,
                to_model=lambda _v: c.prompt.toPlainText(),
            ),
            bind(f, "steps", c.steps.setValue, c.steps.valueChanged),
            bind(
                f,
                "seed",
                c.seed.setValue,
                c.seed.valueChanged,
                to_widget=lambda v: min(int(v), MAX_SEED),
            ),
            bind(
                f,
                "threshold",
                c.threshold.setValue,
                c.threshold.valueChanged,
                to_model=lambda v: round(float(v), 6),
            ),
            bind(
                f,
                "guidance",
                lambda v: c.guidance.setValue(v if v is not None else 0.0),
                c.guidance.valueChanged,
                to_model=lambda v: float(v) if f.variant.default_guidance is not None else None,
            ),
            bind(f, "loras", c.loras.set_loras, c.loras.loras_edited),
        ]
        self._bindings.append(bind(f, "gate", c.gate_picker.set_gate))
        c.gate_picker.gate_selected.connect(f.select_gate)
        f.gate_changed.connect(self._refresh_threshold_hint)
        f.gate_changed.connect(lambda _gate: self._refresh_variant_info())
        c.variant_picker.variant_selected.connect(s.select_variant)
        f.variant_loaded.connect(self._on_variant_changed)
        f.size_changed.connect(self._show_size)
        bind_quantize(c.quantize, c.quantize_label, f)
        f.steps_changed.connect(self._refresh_input_problem)
        c.size_combo.currentIndexChanged.connect(self._on_size_picked)
        for signal in (
            f.variant_id_changed,
            f.steps_changed,
            f.threshold_changed,
            f.quantize_changed,
            f.size_changed,
            r.band_changed,
            r.engagement_changed,
            r.request_changed,
            r.error_changed,
            r.notices_changed,
        ):
            signal.connect(self._refresh_notices)
        f.threshold_changed.connect(self._on_threshold_changed)
        f.steps_changed.connect(self._refresh_threshold_hint)
        r.band_changed.connect(self._refresh_threshold_hint)

        c.generate_button.clicked.connect(s.generate)
        c.cancel_button.clicked.connect(s.cancel)
        c.random_seed.clicked.connect(s.randomize_seed)
        c.threshold_reset.clicked.connect(f.reset_threshold)
        c.history_button.clicked.connect(self.show_history)
        c.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        c.rerun.setChecked(self.settings.rerun_on_threshold_change)
        c.rerun.toggled.connect(s.set_rerun_on_threshold_change)
        self.run_details.expanded_changed.connect(s.set_details_expanded)
        c.download_button.clicked.connect(s.download_current)
        c.download_cancel.clicked.connect(self.downloads.cancel)

        self.generate_action.triggered.connect(s.generate)
        self.cancel_action.triggered.connect(s.cancel)
        self.random_seed_action.triggered.connect(s.randomize_seed)
        self.reset_threshold_action.triggered.connect(f.reset_threshold)
        self.history_action.triggered.connect(self.show_history)
        self.compare_action.triggered.connect(lambda: self.show_comparison())
        self.export_action.triggered.connect(lambda: self.export_current())
        self.quit_action.triggered.connect(self.close)

        self.host.event_received.connect(s.apply_target_result)  # before the run model's
        self.host.event_received.connect(r.handle_event)
        self.host.event_received.connect(self.comparer.handle_event)
        self.host.busy_changed.connect(self._on_engine_busy)
        self.host.event_received.connect(self.quality.handle_event)
        r.status_changed.connect(self._on_status)
        for signal in (
            r.gated_steps_changed,
            r.vanilla_steps_changed,
            r.resumed_from_changed,
            r.vanilla_cached_changed,
            r.active_pass_changed,
            r.gated_thumbnails_changed,
            r.vanilla_thumbnails_changed,
        ):
            signal.connect(self._schedule_timeline)
        for signal in (r.gated_preview_changed, r.vanilla_preview_changed):
            signal.connect(lambda *_: self._schedule("previews"))
        for signal in (
            r.gated_steps_changed,
            r.vanilla_steps_changed,
            r.band_changed,
            r.request_changed,
        ):
            signal.connect(self._schedule_plot)
        for signal in (f.threshold_changed, f.variant_id_changed, f.steps_changed):
            signal.connect(self._schedule_plot)
        for signal in (
            r.gated_image_changed,
            r.vanilla_image_changed,
            r.difference_changed,
            r.vanilla_cached_changed,
            r.origin_changed,
        ):
            signal.connect(self._refresh_images)
        for signal in (
            r.report_changed,  # every figure of a finished result is its report's
            r.gated_steps_changed,  # the skips so far, while a run goes
            r.gated_seconds_changed,
            r.vanilla_seconds_changed,
            r.request_changed,
            r.vanilla_cached_changed,
            r.resumed_from_changed,
            r.origin_changed,
            r.difference_changed,
        ):
            signal.connect(self._schedule_stats)
        r.phase_changed.connect(self._schedule_status)
        r.progress_changed.connect(self._schedule_status)
        r.saved_entry_changed.connect(self._show_saved)
        for signal in (
            f.variant_id_changed,
            f.prompt_changed,
            f.steps_changed,
            f.seed_changed,
            f.threshold_changed,
            f.size_changed,
            f.guidance_changed,
            f.loras_changed,
            r.request_changed,
            r.status_changed,
            r.gated_image_changed,
        ):
            signal.connect(self._refresh_staleness)
        f.loras_changed.connect(self._schedule_plot)

        self.banners.action_triggered.connect(self._on_banner_action)
        self.banners.dismissed.connect(self._dismiss)
        self.downloads.started.connect(lambda _vid: self._refresh_download_row())
        self.downloads.progressed.connect(self._on_download_progress)
        self.downloads.finished.connect(self._on_download_done)
        self.downloads.cancelled.connect(self._on_download_cancelled)
        self.downloads.failed.connect(self._on_download_failed)

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
        elif self.comparer.status is CompareStatus.idle:  # nothing shown yet: follow the form
            self.compare_dialog.fill_defaults()
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        return self.compare_dialog

    def open_history_entry(self, entry: HistoryEntry) -> bool:
        """A saved run reopens in the window; a saved comparison in the comparison view too."""
        if not self.session.open_entry(entry):
            return False
        if is_comparison(entry) and self.comparer.open_entry(entry):
            self.show_comparison()
        return True

    def export_current(self, path: Path | None = None) -> Path | None:
        """Export the shown run side by side; asks where unless ``path`` is given."""
        if not self.session.can_export():
            return None
        if path is None:
            suggested = Path.home() / self.session.suggested_export_name()
            name, _ = QFileDialog.getSaveFileName(
                self, "Export Side-by-Side", str(suggested), "PNG (*.png)"
            )
            if not name:
                return None
            path = Path(name)
        written = self.session.export(path)
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
    def _on_variant_changed(self, variant_id: object) -> None:
        variant = get_variant(str(variant_id))
        c = self.controls
        # No minimum beyond 1 on the box: steps below the variant's get the request check's
        # sentence inline, instead of the box silently putting the old value back.
        c.steps.setValue(self.form.steps)
        c.gate_picker.set_variant(variant)
        self._fill_sizes()
        has_guidance = variant.default_guidance is not None
        c.guidance.setVisible(has_guidance)
        c.guidance_label.setVisible(has_guidance)
        if has_guidance and self.form.guidance is not None:
            c.guidance.setValue(self.form.guidance)
        c.loras.set_available(not variant.embedded)
        self._refresh_variant_info()
        self._refresh_threshold_hint()
        self._refresh_input_problem()

    def _fill_sizes(self) -> None:
        """The variant's sizes only (and the form's own, where the variant can draw it)."""
        variant, combo = self.form.variant, self.controls.size_combo
        presets = size_presets(variant)
        if self.form.size not in presets and size_allowed(variant, self.form.size):
            presets.append(self.form.size)
        combo.blockSignals(True)
        combo.clear()
        for width, height in presets:
            combo.addItem(f"{width} × {height}", (width, height))
        combo.blockSignals(False)
        self._show_size(self.form.size, refill=False)

    def _show_size(self, size: object, refill: bool = True) -> None:
        combo = self.controls.size_combo
        for i in range(combo.count()):
            if tuple(combo.itemData(i)) == tuple(size):  # type: ignore[arg-type]
                combo.setCurrentIndex(i)
                return
        if refill:
            self._fill_sizes()

    def _refresh_staleness(self, *_args: object) -> None:
        caption = self.session.result_caption()
        stale = bool(caption)
        self.stale_caption.setText(caption[:1].upper() + caption[1:] if caption else "")
        self.stale_caption.setVisible(stale)
        self._veils["compare"].set_shown(stale)
        self._veils["timeline"].set_shown(stale)
        # A threshold-only change keeps the plot bright: its what-if line is about the inputs.
        self._veils["plot"].set_shown(stale and not self.session.same_schedule)

    def is_dimmed(self, part: str) -> bool:
        """Whether the veil is over ``part`` ("compare", "timeline" or "plot")."""
        return self._veils[part].isVisible()

    def _refresh_input_problem(self, *_args: object) -> None:
        problem = self.session.steps_problem()
        self.controls.steps_problem.setText(problem or "")
        self.controls.steps_problem.setVisible(bool(problem))

    def _on_size_picked(self, index: int) -> None:
        data = self.controls.size_combo.itemData(index)
        if data:
            self.form.size = (int(data[0]), int(data[1]))

    def _on_threshold_changed(self, _value: object) -> None:
        if self.session.wants_threshold_rerun():
            self._rerun_timer.start()

    def _on_status(self, status: object) -> None:
        busy = self.run.busy or self.host.busy
        c = self.controls
        c.generate_button.setEnabled(not busy)
        c.variant_picker.setEnabled(not busy)  # a run's result belongs to its own selection
        self.generate_action.setEnabled(not busy)
        c.cancel_button.setEnabled(busy and status is not RunStatus.cancelling)
        self.cancel_action.setEnabled(busy)
        self._refresh_images()
        if busy and not self._clock_timer.isActive():
            self._clock_timer.start()
        elif not busy:
            self._clock_timer.stop()
        if status in TERMINAL_STATUSES:
            self._pending_refreshes.add("stats")  # the summary line waits for the end
            self._flush_refreshes()  # whoever waits for the end sees the final plot and numbers
            self.run_ended.emit(status)

    def _on_engine_busy(self, _busy: bool) -> None:
        """A comparison keeps the engine busy without a run in the main view: Generate waits."""
        busy = self.run.busy or self.host.busy
        for widget in (self.controls.generate_button, self.controls.variant_picker):
            widget.setEnabled(not busy)
        self.generate_action.setEnabled(not busy)

    def _schedule_plot(self, *_args: object) -> None:
        self._schedule("plot")

    def _schedule_timeline(self, *_args: object) -> None:
        if self.run.busy:
            self._schedule("timeline")
        else:
            self._pending_refreshes.discard("timeline")
            self._refresh_timeline()

    def _schedule_stats(self, *_args: object) -> None:
        self._schedule("stats")

    def _schedule_status(self, *_args: object) -> None:
        # QProgressBar.setValue repaints synchronously: once per frame, not once per step.
        self._schedule("status")

    def _schedule(self, what: str) -> None:
        """Coalesce plot and number updates: at most one per frame interval while a run is going
        (software-rendered plots cost milliseconds per paint), at once otherwise."""
        self._pending_refreshes.add(what)
        if not self._frame_timer.isActive():
            self._frame_timer.start(FRAME_INTERVAL_MS if self.run.busy else 0)

    def _flush_refreshes(self) -> None:
        self._frame_timer.stop()
        pending, self._pending_refreshes = self._pending_refreshes, set()
        for what, interval_ms in SLOW_REFRESHES.items():
            if what not in pending or not self.run.busy:
                continue
            last = getattr(self, f"_{what}_refreshed_at")
            wait_ms = interval_ms - 1000 * (time.monotonic() - last)
            if wait_ms > 0:  # the plot and timeline wait for their slower cadence; numbers go now
                pending.discard(what)
                self._pending_refreshes.add(what)
                self._frame_timer.start(min(FRAME_INTERVAL_MS, math.ceil(wait_ms)))
        if "plot" in pending:
            self._plot_refreshed_at = time.monotonic()
            self._refresh_plot()
        if "timeline" in pending:
            self._timeline_refreshed_at = time.monotonic()
            self._refresh_timeline()
        if "previews" in pending:
            self._previews_refreshed_at = time.monotonic()
            self._refresh_images()
        if "stats" in pending:
            self._refresh_stats()
        if "status" in pending:
            self.status_label.setText(self.run.status_text())
            self._show_progress(self.run.progress)

    def _gate_name(self) -> str:
        request = self.run.request
        return GATE_LABELS.get(request.gate if request is not None else self.form.gate, "TeaCache")

    def _refresh_timeline(self) -> None:
        r = self.run
        self.timeline.gate_name = self._gate_name()
        self.timeline.set_rows(
            r.gated_steps,
            r.vanilla_steps,
            resumed_from=r.resumed_from,
            vanilla_cached=r.vanilla_cached,
            active=r.active_pass,
        )
        self.timeline.set_previews(r.gated_thumbnails, r.vanilla_thumbnails)

    def _refresh_plot(self) -> None:
        r = self.run
        request = r.request
        threshold = request.threshold if request is not None else self.form.threshold
        # what-if on this very trace
        preview = self.form.threshold if self.session.same_schedule else None
        self.gate_plot.set_data(r.gated_steps, r.vanilla_steps, threshold, r.band, preview=preview)
        self.gate_plot.set_note(self.session.gate_plot_note())

    def _refresh_images(self) -> None:
        r = self.run
        self.compare.gate_name = self._gate_name()
        self.compare.set_images(
            live_image(r.gated_image, r.gated_preview, r.request, busy=r.busy),
            live_image(r.vanilla_image, r.vanilla_preview, r.request, busy=r.busy),
            r.difference,
            vanilla_cached=r.vanilla_cached and not r.origin,  # "cached" describes its own run
            busy=r.busy,
        )

    def _refresh_stats(self) -> None:
        r = self.run
        steps = r.request.steps if r.request is not None else len(r.gated_steps)
        self.compare.set_stats(
            ssim=r.ssim,
            gated_seconds=r.gated_seconds,
            vanilla_seconds=r.vanilla_seconds,
            speedup=r.speedup,
            speedup_label=f"{r.origin} · {r.speedup_label}" if r.origin else r.speedup_label,
            skips=r.skips,
            steps=steps,
            vanilla_cached=r.vanilla_cached and not r.origin,
            resumed_from=r.resumed_from,
            local_diff=r.local_diff,
        )
        details = describe_run(r)
        if details != self._shown_details:  # stats refresh per step during a run: no relayout
            self._shown_details = details
            self.run_details.set_run(*details)
            self.compare.hint.setVisible(not details[0])  # its tips are the titles' tooltips

    def _refresh_run_view(self) -> None:
        self._on_status(self.run.status)
        self._refresh_timeline()
        self._refresh_plot()
        self._refresh_stats()
        self.status_label.setText(self.run.status_text())
        self._show_progress(self.run.progress)

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
        return self.session.schedule_notice()

    def _refresh_notices(self) -> None:
        self.banners.set_notices(self.session.notices())

    def _dismiss(self, key: str) -> None:
        self.session.dismiss(key)
        self._refresh_notices()

    def _on_banner_action(self, fix: BannerFix) -> None:
        self.session.apply_fix(fix)
        self._refresh_notices()

    def _refresh_threshold_hint(self) -> None:
        self.controls.threshold_hint.setText(self.session.threshold_hint())

    def _fill_recent_menu(self) -> None:
        menu = self.controls.recent_menu
        menu.clear()
        prompts = self.session.recent_prompts
        if not prompts:
            action = menu.addAction("No recent prompts")
            action.setEnabled(False)
            return
        for prompt in prompts:
            text = prompt if len(prompt) <= 70 else prompt[:69] + "…"
            action = menu.addAction(text)
            action.setToolTip(prompt)
            action.triggered.connect(lambda _=False, p=prompt: self.session.use_prompt(p))
        menu.addSeparator()
        menu.addAction("Clear Recent Prompts").triggered.connect(self.session.clear_recent_prompts)

    # -- model availability and downloads
    def _refresh_availability(self) -> None:
        self.controls.variant_picker.rebuild(self.session.availability_badges())
        self.controls.variant_picker.set_variant(self.form.variant_id)

    def _model_folders_changed(self) -> None:
        self._refresh_availability()
        self._refresh_variant_info()
        self._refresh_notices()

    def _refresh_variant_info(self) -> None:
        variant = self.form.variant
        self.controls.variant_info.setText(self.session.variant_info())
        gate = self.form.gate
        full = calibration_text(variant, gate)
        # The sidebar's plain line (TeaCache's fit figures sit under Details); the full text is
        # one hover away for either gate.
        summary = calibration_summary(variant) if gate == "teacache" else full.splitlines()[0]
        self.controls.calibration.setText(summary)
        self.controls.calibration.setToolTip(full)
        self._refresh_download_row()

    def _refresh_download_row(self) -> None:
        c = self.controls
        variant = self.form.variant
        this_one = self.downloads.variant_id == variant.id
        c.download_button.setVisible(self.session.needs_download() and not this_one)
        c.download_button.setEnabled(not self.downloads.busy)
        c.download_button.setText(f"Download ({self.session.download_label(variant)})")
        c.download_box.setVisible(this_one)

    def _on_download_progress(
        self, variant_id: str, done: object, total: object, message: str
    ) -> None:
        bar = self.controls.download_progress
        if isinstance(total, int) and total > 0 and isinstance(done, int):
            bar.setRange(0, 1000)
            bar.setValue(round(1000 * done / total))
            text = f"{format_bytes(done)} of {format_bytes(total)}"
        else:
            bar.setRange(0, 0)
            text = "Downloading…"
        self.controls.download_status.setText(f"{message} · {text}" if message else text)

    def _on_download_done(self, variant_id: str) -> None:
        self._refresh_availability()
        self._refresh_variant_info()

    def _on_download_cancelled(self, variant_id: str) -> None:
        self.controls.download_status.setText("Download cancelled")
        self._refresh_variant_info()

    def _on_download_failed(self, variant_id: str, message: str) -> None:
        self.session.download_failed(message)
        self._refresh_variant_info()

    # -- persistence
    def _qsettings(self) -> QSettings:
        return QSettings(str(paths.config_dir() / "window.ini"), QSettings.Format.IniFormat)

    def _save_geometry(self) -> None:
        store = self._qsettings()
        store.setValue("geometry", self.saveGeometry())
        store.setValue("splitter", self.splitter.saveState())
        store.setValue("results_splitter", self.results_splitter.saveState())
        store.sync()

    def _restore_geometry(self) -> None:
        store = self._qsettings()
        geometry = store.value("geometry")
        if isinstance(geometry, QByteArray | bytes):
            self.restoreGeometry(QByteArray(geometry))
        for key, widget in (
            ("splitter", self.splitter),
            ("results_splitter", self.results_splitter),
        ):
            state = store.value(key)
            if isinstance(state, QByteArray | bytes):
                widget.restoreState(QByteArray(state))


def _section(text: str) -> QLabel:
    from app.ui.form_view import section

    return section(text)
