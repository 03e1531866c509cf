"""The plain summary line under the images and the "Details" disclosure with the technical figures
(collapsed by default; the window remembers its state in the typed settings)."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QMoveEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget
from superqt import QCollapsible

from app.gate.kinds import gate_kind
from app.ui.plain_words import DetailFacts, detail_lines, run_summary, short_summary
from app.ui.run_model import RunModel
from app.ui.theme import monospace_digits, mute, small_font
from app.variants import UnknownVariantError, Variant

DETAILS_TITLE = "Details"
NO_DETAILS = "No run yet."
RUNNING_DETAILS = "A run is going: its figures come here when this run finishes."


class FittedLabel(QLabel):
    """One line: the full text where it fits, else the short one, else the short one elided."""

    def __init__(self) -> None:
        super().__init__()
        self._texts: tuple[str, str] = ("", "")

    def set_texts(self, full: str, short: str) -> None:
        self._texts = (full, short)
        self._fit()

    def full_text(self) -> str:
        return self._texts[0]

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        full, short = self._texts
        metrics = self.fontMetrics()
        room = self.width()
        if metrics.horizontalAdvance(full) <= room:
            text = full
        else:
            text = metrics.elidedText(short, Qt.TextElideMode.ElideRight, room)
        if text != self.text():
            self.setText(text)


class RunDetails(QWidget):
    """``summary`` reads the run in plain words; ``disclosure`` holds R², fits, the polynomial,
    resume details, latent difference and digests for whoever wants them. The window puts
    ``summary`` and the ``toggle`` button in the images' header row (no height of their own, so the
    layout at 1024×700 still fits) and this widget, the disclosed figures, under the cards."""

    expanded_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = FittedLabel()
        self.summary.setObjectName("RunSummary")
        # One line in the header row: never taller than it (the full text is its tooltip too).
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures = QLabel(NO_DETAILS)
        self.figures.setWordWrap(True)
        self.figures.setFont(monospace_digits(small_font(self.figures.font())))
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mute(self.figures)
        self.disclosure = QCollapsible(DETAILS_TITLE, expandedIcon="▾", collapsedIcon="▸")
        self.disclosure.setDuration(120)
        self.disclosure.toggleButton().setToolTip(
            "The technical figures behind the summary: SSIM, the calibration's fit, resume, digests"
        )
        disclosure_layout = self.disclosure.layout()
        if disclosure_layout is not None:
            disclosure_layout.setContentsMargins(0, 0, 0, 0)
            disclosure_layout.setSpacing(0)
        # One button in the header row stands in for QCollapsible's own (hidden) one.
        self.disclosure.toggleButton().setVisible(False)
        self.toggle = QToolButton()
        self.toggle.setObjectName("DetailsToggle")
        self.toggle.setCheckable(True)
        self.toggle.setToolTip(self.disclosure.toggleButton().toolTip())
        self.toggle.toggled.connect(self._on_toggle_clicked)
        self.disclosure.addWidget(self.figures)
        self._quiet = False  # programmatic expand/collapse: not the user's choice
        self.disclosure.toggled.connect(self._on_toggled)
        # Long lines (digests, the calibration) wrap to the panel's width and never widen it.
        for widget in (self.figures, self.disclosure):
            widget.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.disclosure)
        self._show_toggle_state()

    @property
    def expanded(self) -> bool:
        return self.disclosure.isExpanded()

    def set_expanded(self, expanded: bool) -> None:
        """From settings: no animation, no ``expanded_changed``."""
        if expanded != self.expanded:
            self._set_quietly(expanded)

    def _set_quietly(self, expanded: bool) -> None:
        self._quiet = True
        try:
            if expanded:
                self.disclosure.expand(animate=False)
            else:
                self.disclosure.collapse(animate=False)
        finally:
            self._quiet = False

    def _on_toggled(self, expanded: bool) -> None:
        self._show_toggle_state()
        if not self._quiet:
            self.expanded_changed.emit(expanded)

    def _on_toggle_clicked(self, checked: bool) -> None:
        if checked != self.expanded:
            if checked:
                self.disclosure.expand(animate=False)
            else:
                self.disclosure.collapse(animate=False)

    def _fit_height(self) -> None:
        """QCollapsible sizes its content by ``sizeHint``, which ignores word wrap: the figures'
        height at the panel's real width instead, so no line is cut off."""
        if self.expanded:
            width = max(1, self.figures_width())
            height = self.figures.heightForWidth(width) + 4
            self.disclosure.content().setMaximumHeight(height)
            # A minimum too, so the results splitter gives the figures their room (and the
            # results scroll) instead of cutting their last lines off in a short window.
            if self.minimumHeight() != height:
                self.setMinimumHeight(height)

    def figures_width(self) -> int:
        """The width the figures wrap at: the disclosure's, less its content's margins (the
        disclosure's width counted 5 px too many, so a line that wrapped only in those 5 px
        went uncounted and the last line was cut at 1024×700)."""
        content = self.disclosure.content()
        layout = content.layout()
        margins = layout.contentsMargins() if layout is not None else None
        inset = margins.left() + margins.right() if margins is not None else 0
        return self.disclosure.width() - inset

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_height()
        self._repaint_left_area(QRect(self.pos(), event.oldSize()))

    def moveEvent(self, event: QMoveEvent) -> None:
        super().moveEvent(event)
        self._repaint_left_area(QRect(event.oldPos(), self.size()))

    def _repaint_left_area(self, old: QRect) -> None:
        """When the figures' height changes, the layout moves and resizes this widget; after a
        paint at the old geometry in between (the gate popup's closing does one) Qt left the
        strip it moved away from unrepainted (not even a repaint of the window cleared it), and
        half a line of the old text stayed on screen (#27 item 19). The parent repaints the old
        and the new area."""
        parent = self.parentWidget()
        if parent is not None and old.isValid():
            parent.update(old.united(self.geometry()))

    def _show_toggle_state(self) -> None:
        expanded = self.expanded
        self.toggle.blockSignals(True)
        self.toggle.setChecked(expanded)
        self.toggle.blockSignals(False)
        self.toggle.setText(f"{DETAILS_TITLE} {'▾' if expanded else '▸'}")
        self.setHidden(not expanded)  # collapsed costs no height at all (1024×700 fits)
        self._fit_height()

    def figures_shown(self) -> bool:
        """Whether the technical figures take any room on screen (collapsed: height 0)."""
        return (
            self.expanded and not self.isHidden() and self.disclosure.content().maximumHeight() > 0
        )

    def set_run(self, summary: str, lines: list[str]) -> None:
        self.summary.set_texts(summary, short_summary(summary))
        self.summary.setToolTip(summary)
        self.summary.setVisible(bool(summary))
        self.figures.setText("\n".join(lines) if lines else NO_DETAILS)
        if self.expanded:  # the content's height follows its new text
            self._set_quietly(True)
            self._fit_height()


def describe_run(run: RunModel) -> tuple[str, list[str]]:
    """The summary line and the Details lines of the shown result (its report's figures, the
    calibration of its variant); nothing until it has finished."""
    report = run.report
    if run.busy:
        return "", [RUNNING_DETAILS]
    if not run.finished or report is None:
        return "", []
    request = report.request
    steps = request.active_steps  # the steps that ran (from a picture, after strength's)
    gated, vanilla = report.gated, report.vanilla
    kind = gate_kind(request.gate)  # the gate that ran: its name, its own calibration
    summary = run_summary(gated.skipped, steps, report.ssim, report.local_diff_value, kind.name)
    try:
        variant: Variant | None = request.variant
    except UnknownVariantError:  # a reopened run of a variant since removed
        variant = None
    calibration = kind.calibration_of(variant) if variant is not None else None
    facts = DetailFacts(
        ssim=report.ssim,
        local_diff=report.local_diff_value,
        ssimulacra2=report.ssimulacra2,
        max_abs_diff=report.max_abs_diff,
        threshold=request.threshold,
        gate=kind.name,
        calibration_lines=tuple(kind.calibration_lines(calibration)) if calibration else (),
        calibration=kind.provenance_text(calibration) if calibration else "",
        resumed_from=gated.resumed_from,
        steps=steps,
        latents_sha256=gated.latents_sha256,
        vanilla_latents_sha256=vanilla.latents_sha256 if vanilla is not None else None,
        fill=request.fill,
        steps_detail=tuple(gated.steps),
    )
    return summary, detail_lines(facts)
