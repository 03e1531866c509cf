"""The result side of the window: the banners, what made the shown result (once the inputs differ),
the images with their numbers, the summary line and Details, the step timeline and the gate plot.

A view of ``RunModel`` (``app.ui.run_model``): it renders the run going on or the result on screen
and nothing else, at the cadence of ``app.ui.refresh`` while a run is going; the gate plot reads
``GateAdvice``. The actions are the Qt-free models'; the window lays this view out beside the form.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.gate.kinds import gate_kind
from app.ui.app import Studio
from app.ui.banner import BannerStack
from app.ui.form_view import section
from app.ui.gate_plot import GatePlot
from app.ui.images import ComparePanel
from app.ui.plain_words import calibration_detail_lines
from app.ui.refresh import RefreshScheduler
from app.ui.run_details import NO_DETAILS, RunDetails, describe_run
from app.ui.step_previews import live_image
from app.ui.timeline import StepTimeline, TimelineLegend, forecast_mark
from app.ui.veil import Veil


class ResultsView(QWidget):
    def __init__(self, studio: Studio, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run, self.form, self.gate_advice = studio.run, studio.form, studio.gate_advice
        self.banners = BannerStack()
        self.compare = ComparePanel()
        self.compare.metadata_source = studio.exporter.export_metadata
        self.run_details = RunDetails()  # the plain summary line and the Details disclosure
        self._shown_details: tuple[str, list[str]] | None = None
        self.run_details.set_expanded(studio.settings.details_expanded)
        compare_layout = self.compare.layout()
        assert compare_layout is not None  # ComparePanel lays itself out in __init__
        compare_layout.addWidget(self.run_details)
        self.timeline = StepTimeline()
        self.legend = TimelineLegend()
        self.gate_plot = GatePlot()

        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 2, 0, 0)
        lower_layout.setSpacing(4)
        steps_header = QHBoxLayout()
        steps_header.addWidget(section("Steps"))
        steps_header.addSpacing(12)
        steps_header.addWidget(self.legend, 1)
        lower_layout.addLayout(steps_header)
        lower_layout.addWidget(self.timeline)
        gate_header = QHBoxLayout()
        gate_header.addWidget(section("Gate"), 0, Qt.AlignmentFlag.AlignTop)
        gate_header.addSpacing(12)
        gate_header.addWidget(self.gate_plot.legend, 1)  # beside its title, as the steps' legend
        # The legend wraps to two lines in a narrow window; a splitter pane's minimum ignores
        # word wrap, so reserve both lines (else the pane comes up short and squeezes the plot).
        legend_lines = self.gate_plot.legend.fontMetrics().lineSpacing() * 2
        self.gate_plot.legend.setMinimumHeight(legend_lines)
        lower_layout.addLayout(gate_header)
        lower_layout.addWidget(self.gate_plot, 1)
        self.compare.header.insertWidget(0, section("Images"))
        # The summary takes the row's room (the header's own stretch keeps a sliver).
        self.compare.header.insertWidget(1, self.run_details.summary, 20)
        self.compare.header.insertWidget(self.compare.header.count() - 1, self.run_details.toggle)
        # A splitter, not stretch factors: it never squeezes a pane below its minimum, and the
        # user can trade image space for plot space.
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.compare)
        self.splitter.addWidget(lower)
        self.splitter.setStretchFactor(0, 5)
        self.splitter.setStretchFactor(1, 4)
        self.splitter.setHandleWidth(6)
        self.splitter.setSizes([470, 400])

        # Below the banners, the images and plots scroll when the window is shorter than their
        # minimum heights (1024×700 with a long banner): they never overlap or squash to a strip.
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(self.splitter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 10, 16, 8)
        layout.setSpacing(8)
        layout.addWidget(self.banners)
        self.stale_caption = QLabel()  # what made the shown result, once the inputs differ
        self.stale_caption.setObjectName("StaleCaption")
        self.stale_caption.setWordWrap(True)
        self.stale_caption.setVisible(False)
        layout.addWidget(self.stale_caption)
        layout.addWidget(self.scroll_area, 1)
        self._veils = {
            "compare": Veil(self.compare),
            "timeline": Veil(self.timeline),
            "plot": Veil(self.gate_plot),
        }

    def connect_run(self, refresh: RefreshScheduler) -> None:
        """Repaint what each change of the run (or of the inputs the plot previews) touches:
        numbers at frame rate, the plot, timeline and live previews at their run cadence."""
        r, f = self.run, self.form
        for signal in (
            r.gated_steps_changed,
            r.vanilla_steps_changed,
            r.resumed_from_changed,
            r.vanilla_cached_changed,
            r.active_pass_changed,
            r.gated_thumbnails_changed,
            r.vanilla_thumbnails_changed,
            f.gate_changed,  # before any run the gated row is the picked gate's
        ):
            signal.connect(lambda *_: self._timeline_changed(refresh))
        for signal in (r.gated_preview_changed, r.vanilla_preview_changed):
            signal.connect(lambda *_: refresh.schedule("previews"))
        for signal in (
            r.gated_steps_changed,
            r.vanilla_steps_changed,
            r.band_changed,
            r.request_changed,
            f.threshold_changed,
            f.gate_changed,  # the plot draws the picked gate's terms
            f.variant_id_changed,
            f.steps_changed,
            f.loras_changed,
        ):
            signal.connect(lambda *_: refresh.schedule("plot"))
        for signal in (
            r.gated_image_changed,
            r.vanilla_image_changed,
            r.difference_changed,
            r.vanilla_cached_changed,
            r.origin_changed,
            f.gate_changed,  # the gated image's title, before any run
        ):
            signal.connect(lambda *_: self.refresh_images())
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
            f.variant_id_changed,  # Details before a run: the picked calibration's figures
            f.gate_changed,
        ):
            signal.connect(lambda *_: refresh.schedule("stats"))

    def _timeline_changed(self, refresh: RefreshScheduler) -> None:
        if self.run.busy:
            refresh.schedule("timeline")
        else:
            refresh.now("timeline")

    # -- what the view shows
    def set_stale(self, caption: str, same_schedule: bool) -> None:
        """Dim the result and say what made it, once the inputs no longer match it (a
        threshold-only change keeps the plot bright: its what-if line is about the inputs)."""
        stale = bool(caption)
        self.stale_caption.setText(caption[:1].upper() + caption[1:] if caption else "")
        self.stale_caption.setVisible(stale)
        self._veils["compare"].set_shown(stale)
        self._veils["timeline"].set_shown(stale)
        self._veils["plot"].set_shown(stale and not same_schedule)

    def is_dimmed(self, part: str) -> bool:
        """Whether the veil is over ``part`` ("compare", "timeline" or "plot")."""
        return self._veils[part].isVisible()

    def gate_name(self) -> str:
        request = self.run.request
        return gate_kind(request.gate if request is not None else self.form.gate).label

    def refresh_timeline(self) -> None:
        r = self.run
        self.timeline.gate_name = self.gate_name()
        request = r.request
        left_out = request.steps_left_out if request is not None else 0
        self.timeline.set_rows(
            r.gated_steps,
            r.vanilla_steps,
            resumed_from=r.resumed_from,
            vanilla_cached=r.vanilla_cached,
            active=r.active_pass,
            left_out=left_out,
            strength=request.strength if request is not None else None,
        )
        self.legend.show_not_run(left_out > 0)
        self.timeline.set_previews(r.gated_thumbnails, r.vanilla_thumbnails)
        self.legend.show_forecast(any(forecast_mark(step) for step in r.gated_steps))

    def refresh_plot(self) -> None:
        d = self.gate_advice.gate_plot_data()  # the what-if line: the inputs' on this very trace
        request = self.run.request
        self.gate_plot.set_data(
            d.gated,
            d.vanilla,
            d.threshold,
            d.band,
            d.preview,
            gate=d.gate,
            left_out=request.steps_left_out if request is not None else 0,
        )
        self.gate_plot.set_note(self.gate_advice.gate_plot_note())

    def refresh_images(self) -> None:
        r = self.run
        self.compare.gate_name = self.gate_name()
        self.compare.set_images(
            live_image(r.gated_image, r.gated_preview, r.request, busy=r.busy),
            live_image(r.vanilla_image, r.vanilla_preview, r.request, busy=r.busy),
            r.difference,
            vanilla_cached=r.vanilla_cached and not r.origin,  # "cached" describes its own run
            busy=r.busy,
        )

    def refresh_stats(self) -> None:
        r = self.run
        self.compare.gate_name = self.gate_name()  # the cards' captions and tooltips name it
        steps = r.request.active_steps if r.request is not None else len(r.gated_steps)
        self.compare.set_stats(
            ssim=r.ssim,
            gated_seconds=r.gated_seconds,
            vanilla_seconds=r.vanilla_seconds,
            speedup=r.speedup,
            # What the figure is comes first: a narrow card elides the end (#39).
            speedup_label=f"{r.speedup_label} · {r.origin}" if r.origin else r.speedup_label,
            skips=r.skips,
            steps=steps,
            vanilla_cached=r.vanilla_cached and not r.origin,
            resumed_from=r.resumed_from,
            local_diff=r.local_diff,
            ssimulacra2=r.ssimulacra2,
        )
        details = describe_run(r)
        if not details[1]:  # nothing run (or shown) yet: the picked gate's calibration
            lines = calibration_detail_lines(self.form.variant, self.form.gate)
            details = ("", [NO_DETAILS, *lines])
        if details != self._shown_details:  # stats refresh per step during a run: no relayout
            self._shown_details = details
            self.run_details.set_run(*details)
            self.compare.hint.setVisible(not details[0])  # its tips are the titles' tooltips
