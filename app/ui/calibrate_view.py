"""The Calibrate This Model… dialog, bound to ``ModelCalibrator`` (``app.ui.calibrate_model``):
the prompts (suggested ones offered) and the name, a progress bar with the time left and Cancel,
then the fit in plain words with its figures and provenance under Details. Non-modal: the window
stays usable, and the dialog can close and reopen while the calibration runs."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.calibration import MIN_PROMPTS, parse_prompts
from app.ui.calibrate_model import ModelCalibrator
from app.ui.job_slot import JobStatus
from app.ui.theme import mute, small_font

CLOCK_INTERVAL_MS = 1000  # the time left ticks on between steps


class CalibrateDialog(QDialog):
    """See the module docstring."""

    def __init__(self, calibrator: ModelCalibrator, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Calibrate This Model")
        self.setModal(False)
        self.calibrator = calibrator
        self.resize(640, 720)

        intro = QLabel(
            "Runs one full generation per prompt, computing every step, and measures how much "
            "each step changes the picture; then shorter runs of the same prompts choose each "
            "gate's threshold. TeaCache and MagCache then judge this model by its own pace "
            "instead of borrowed numbers. The result is saved as a new entry in the model list."
        )
        intro.setWordWrap(True)
        self.target = QLabel()
        self.target.setWordWrap(True)
        font = self.target.font()
        font.setBold(True)
        self.target.setFont(font)
        self.scope = QLabel()
        self.scope.setWordWrap(True)
        self.scope.setFont(small_font(self.scope.font()))
        mute(self.scope)

        self.prompts = QPlainTextEdit()
        self.prompts.setPlaceholderText("One prompt per line")
        self.prompts.setTabChangesFocus(True)
        self.suggested_button = QToolButton()
        self.suggested_button.setText("Suggested Prompts")
        self.suggested_button.setToolTip("Put back the suggested prompts for this model")
        self.count = QLabel()
        self.count.setFont(small_font(self.count.font()))
        mute(self.count)
        self.name = QLineEdit()
        self.name.setMaxLength(40)
        self.saved_as = QLabel()
        self.saved_as.setFont(small_font(self.saved_as.font()))
        mute(self.saved_as)

        self.error = QLabel()  # one sentence: why nothing started, or why it stopped
        self.error.setObjectName("InlineError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b3261e;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        # What the run is doing: wrapped, and never a reason to widen the dialog (a load line
        # can name a long model folder): the dialog keeps its width from idle through the run.
        self.status = QLabel()
        self.status.setFont(small_font(self.status.font()))
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.result_text = QLabel()
        self.result_text.setWordWrap(True)
        self.result_text.setTextFormat(Qt.TextFormat.RichText)
        self.result_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details_button = QToolButton()
        self.details_button.setText("Details")
        self.details_button.setCheckable(True)
        self.details_button.setArrowType(Qt.ArrowType.RightArrow)
        self.details_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.details_button.setObjectName("Flat")
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setFont(small_font(self.details.font()))
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setVisible(False)

        self.start_button = QPushButton("Calibrate")
        self.start_button.setObjectName("Primary")
        self.start_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop after the current step; nothing is saved")
        self.close_button = QPushButton("Close")

        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 14, 16, 14)
        layout.setSpacing(8)
        layout.addWidget(intro)
        layout.addWidget(self.target)
        layout.addWidget(self.scope)
        prompts_header = QHBoxLayout()
        prompts_header.addWidget(QLabel("Prompts (one per line)"))
        prompts_header.addStretch(1)
        prompts_header.addWidget(self.suggested_button)
        layout.addLayout(prompts_header)
        layout.addWidget(self.prompts, 1)
        layout.addWidget(self.count)
        name_row = QHBoxLayout()
        name_row.addWidget(QLabel("Name"))
        name_row.addWidget(self.name, 1)
        layout.addLayout(name_row)
        layout.addWidget(self.saved_as)
        layout.addWidget(self.error)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        # The fit and its Details scroll: the figures must never push the buttons off screen.
        outcome = QWidget()
        outcome_layout = QVBoxLayout(outcome)
        outcome_layout.setContentsMargins(0, 0, 14, 0)  # clear of the scroll bar
        outcome_layout.addWidget(self.result_text)
        outcome_layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignLeft)
        outcome_layout.addWidget(self.details)
        outcome_layout.addStretch(1)
        self.outcome = QScrollArea()
        self.outcome.setWidgetResizable(True)
        self.outcome.setFrameShape(QFrame.Shape.NoFrame)
        self.outcome.setWidget(outcome)
        self.outcome.setVisible(False)
        layout.addWidget(self.outcome, 2)
        buttons = QHBoxLayout()
        buttons.addWidget(self.close_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.start_button)
        layout.addLayout(buttons)

        self._clock = QTimer(self)
        self._clock.setInterval(CLOCK_INTERVAL_MS)
        self._clock.timeout.connect(self._show_progress)
        self.suggested_button.clicked.connect(self.fill_prompts)
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(calibrator.cancel)
        self.close_button.clicked.connect(self.close)
        self.details_button.toggled.connect(self._show_details)
        self.prompts.textChanged.connect(self._show_count)
        self.name.textChanged.connect(self._show_saved_as)
        self._filled_for: str | None = None
        self._shown_status: JobStatus | None = None
        calibrator.listeners.append(self.refresh)
        self.fill_defaults()

    # -- actions -----------------------------------------------------------------------------------
    def fill_defaults(self) -> None:
        """The form's model and settings; the suggested prompts and a free name where the model
        changed since the dialog last filled them (not while a calibration runs: the dialog then
        shows that one)."""
        if self.calibrator.status.busy:
            self.refresh()
            return
        self.target.setText(self.calibrator.target_text())
        scope = self.calibrator.scope_text()
        self.scope.setText(scope)
        self.scope.setVisible(bool(scope))
        base = self.calibrator.base_variant().id
        if base != self._filled_for or not self.prompts.toPlainText().strip():
            self.fill_prompts()
            self._filled_for = base
        self.name.setText(self.calibrator.suggested_name())
        self.refresh()

    def fill_prompts(self) -> None:
        self.prompts.setPlainText(self.calibrator.suggested_prompts())

    def start(self) -> int | None:
        return self.calibrator.start(self.prompts.toPlainText(), self.name.text())

    # -- state → widgets ---------------------------------------------------------------------------
    def refresh(self) -> None:
        c = self.calibrator
        busy = c.status.busy
        for widget in (self.prompts, self.name, self.suggested_button, self.start_button):
            widget.setEnabled(not busy)
        self.cancel_button.setEnabled(c.status is JobStatus.running)
        failed = c.status in (JobStatus.failed, JobStatus.cancelled)
        refused = c.status is JobStatus.idle and bool(c.message)
        self.error.setText(c.message if failed or refused else "")
        self.error.setVisible(failed or refused)
        started = c.job is not None
        self.progress.setVisible(started)
        self.status.setVisible(started and not failed)
        lines = c.result_lines() if c.status is JobStatus.finished else []
        self.result_text.setText("".join(f"<p>{escape(line)}</p>" for line in lines))
        self.result_text.setVisible(bool(lines))
        self.outcome.setVisible(bool(lines))
        self.details_button.setVisible(bool(lines))
        self.details.setText("\n".join(c.details_lines()) if lines else "")
        self.details.setVisible(bool(lines) and self.details_button.isChecked())
        finished = c.status is JobStatus.finished
        self.start_button.setText("Calibrate Again" if finished else "Calibrate")
        if finished and self._shown_status is not JobStatus.finished:
            self.name.setText(c.suggested_name())  # that name is taken now
        self._shown_status = c.status
        if busy and not self._clock.isActive():
            self._clock.start()
        elif not busy:
            self._clock.stop()
        self._show_count()
        self._show_progress()

    def _show_progress(self) -> None:
        c = self.calibrator
        fraction = c.progress()
        if fraction < 0:
            self.progress.setRange(0, 0)  # loading, before the first step
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(round(fraction * 1000))
        self.status.setText(c.progress_text())

    def _show_count(self) -> None:
        count = len(parse_prompts(self.prompts.toPlainText()))
        need = (
            f" (at least {MIN_PROMPTS}: the fit is checked on a prompt it was not fitted on)"
            if count < MIN_PROMPTS
            else "; more prompts give a steadier fit, each one is a full generation"
        )
        self.count.setText(f"{count} prompt{'s' if count != 1 else ''}{need}")

    def _show_saved_as(self, name: str) -> None:
        self.saved_as.setText(self.calibrator.saved_as_text(name))

    def _show_details(self, shown: bool) -> None:
        self.details_button.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )
        self.details.setVisible(shown and bool(self.details.text()))
