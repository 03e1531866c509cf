"""The input side of the window: the sidebar's widgets and layout, bound to ``FormModel``
(``app.ui.form_model``) by ``bind_form``; what its buttons do is the session's (or, for a
download, the availability's)."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import signals_blocked

from app.engine.request import GUIDANCE_RANGE, MAX_STEPS
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.ui.app import Studio
from app.ui.defaults import MAX_SEED, MIN_SEED, default_threshold, size_allowed, size_presets
from app.ui.downloads import format_bytes
from app.ui.fill_picker import FillPicker
from app.ui.form_model import FormModel
from app.ui.gate_picker import GatePicker
from app.ui.lora_list import LoraList
from app.ui.observable import Binding, bind
from app.ui.plain_words import calibration_tooltip, gate_unavailable
from app.ui.quantize_view import QuantizeControl, bind_quantize
from app.ui.range_spin_box import RangeDoubleSpinBox, RangeNote, RangeWholeNumberBox
from app.ui.theme import caption_font, mute, small_font
from app.ui.variant_picker import VariantPicker
from app.variants import Variant, get_variant
from app.variants.user import SEPARATOR


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setFont(caption_font(label.font()))
    mute(label)
    return label


def calibration_summary(variant: Variant, gate: str = DEFAULT_GATE) -> str:
    """The sidebar's plain line; the fit figures and their source sit under Details
    (``plain_words.calibration_detail_lines``). A calibration made with LoRAs says so: it is for
    that LoRA set only."""
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    if calibration is None:
        return gate_unavailable(variant, gate) or ""
    scope = variant.calibration_scope
    threshold = kind.default_threshold(calibration)
    if scope is None or threshold is None:
        return kind.calibration_summary(calibration)
    # A calibration made in this app: its threshold is the one it was given or its base's,
    # not one measured for it (as the built-in table's are).
    name = variant.id.rpartition(SEPARATOR)[2]
    text = f"Your own calibration “{name}”; its default threshold is {threshold:g}."
    if scope.loras:
        text += f" Made {scope.lora_words()}: for that LoRA set only."
    return text + " Figures: Details, under the images."


def threshold_tooltip(gate: str) -> str:
    """The threshold's tooltip: what it means for the picked gate, and how the slider reads."""
    return (
        f"{gate_kind(gate).threshold_meaning}. 0 turns skipping off. Most of the slider's track "
        "covers up to three times this model's default, where thresholds that skip live; type "
        "any value from 0 to 1 in the box."
    )


def rerun_tooltip(gate: str) -> str:
    return (
        "Threshold-only changes reuse the cached vanilla pass: only the "
        f"{gate_kind(gate).label} pass runs again"
    )


class ThresholdControl(QWidget):
    """A slider on a square-root scale (finer near 0: calibrated thresholds run from about 0.01
    to 0.3) over an exact numeric entry, 0–1 with four decimals.

    With a ``knee`` (``set_knee``: the window sets three times the gate's default threshold) the
    first ``KNEE_SHARE`` of the track covers 0 to the knee evenly and the rest the knee to 1, so a
    short drag near the default moves it a little (the walk: 30 px moved 0.1 to 0.35); the slider
    spans the sidebar's width, the entry and Reset sit under it (``entry_row``)."""

    valueChanged = Signal(float)
    STEPS = 1000
    KNEE_SHARE = 0.8

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, self.STEPS)
        self.slider.setPageStep(50)
        self.spin = RangeDoubleSpinBox("The threshold", 0.0, 1.0)
        self.spin.setDecimals(4)
        self.spin.setSingleStep(0.0025)
        self.spin.setKeyboardTracking(False)  # commit on Enter or focus-out, not per keystroke
        self.spin.setAccelerated(True)
        self.spin.setFixedWidth(self.spin.fontMetrics().horizontalAdvance("0.00000") + 40)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.slider)
        self.entry_row = QHBoxLayout()
        self.entry_row.setSpacing(6)
        self.entry_row.addWidget(self.spin)
        layout.addLayout(self.entry_row)
        self._value = 0.0
        self._knee: float | None = None
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)

    def value(self) -> float:
        return self._value

    def setValue(self, value: float) -> None:
        self._apply(round(min(1.0, max(0.0, float(value))), 4))

    def set_knee(self, knee: float | None) -> None:
        """Where the fine part of the track ends (None: one square-root scale over 0–1); the
        value stays, the handle moves to it."""
        knee = None if knee is None or not 0.0 < knee < 1.0 else knee
        if knee == self._knee:
            return
        self._knee = knee
        with signals_blocked(self.slider):
            self.slider.setValue(self.position_of(self._value))

    def position_of(self, value: float) -> int:
        knee, steps = self._knee, self.STEPS
        if knee is None:
            return self.to_position(value)
        fine = self.KNEE_SHARE * steps
        if value <= knee:
            return round(max(0.0, value) / knee * fine)
        return round(fine + (min(1.0, value) - knee) / (1.0 - knee) * (steps - fine))

    def value_at(self, position: int) -> float:
        knee, steps = self._knee, self.STEPS
        if knee is None:
            return self.from_position(position)
        fine = self.KNEE_SHARE * steps
        if position <= fine:
            return round(knee * position / fine, 4)
        return round(knee + (position - fine) / (steps - fine) * (1.0 - knee), 4)

    @staticmethod
    def to_position(value: float) -> int:
        return round(math.sqrt(max(0.0, value)) * ThresholdControl.STEPS)

    @staticmethod
    def from_position(position: int) -> float:
        return round((position / ThresholdControl.STEPS) ** 2, 4)

    def _from_slider(self, position: int) -> None:
        self._apply(self.value_at(position), moved_slider=True)

    def _from_spin(self, value: float) -> None:
        self._apply(round(value, 4))

    def _apply(self, value: float, *, moved_slider: bool = False) -> None:
        with signals_blocked(self.slider), signals_blocked(self.spin):
            if not moved_slider:
                self.slider.setValue(self.position_of(value))
            self.spin.setValue(value)
        if value != self._value:
            self._value = value
            self.valueChanged.emit(value)


class PromptEdit(QPlainTextEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Prompt")
        self.setTabChangesFocus(True)
        self.setPlaceholderText("Describe the image…")
        line = self.fontMetrics().lineSpacing()
        self.setMinimumHeight(line * 3 + 16)
        self.setMaximumHeight(line * 6 + 16)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_text_if_different(self, text: str) -> None:
        if self.toPlainText() != text:
            self.setPlainText(text)


class ControlsView(QFrame):
    """Sidebar widgets. Public attributes are the widgets the window binds to."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Sidebar")
        self.variant_picker = VariantPicker()
        self.variant_info = QLabel()
        self.variant_info.setWordWrap(True)
        self.variant_info.setFont(small_font(self.variant_info.font()))
        mute(self.variant_info)
        self.download_button = QPushButton("Download")
        self.download_progress = QProgressBar()
        self.download_progress.setTextVisible(False)
        self.download_progress.setMaximumHeight(6)
        self.download_cancel = QToolButton()
        self.download_cancel.setText("Cancel")
        self.download_status = QLabel()
        self.download_status.setFont(small_font(self.download_status.font()))
        mute(self.download_status)

        self.prompt = PromptEdit()
        self.recent_button = QToolButton()
        self.recent_button.setText("Recent")
        self.recent_button.setObjectName("Flat")
        self.recent_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.recent_menu = QMenu(self.recent_button)
        self.recent_button.setMenu(self.recent_menu)
        self.recent_button.setToolTip("Recent prompts")
        # What the family's prompts are, where it reads more than plain text (its
        # ``prompt_format``): a line under the prompt and its example to start from
        self.prompt_note = QLabel()
        self.prompt_note.setWordWrap(True)
        self.prompt_note.setFont(small_font(self.prompt_note.font()))
        mute(self.prompt_note)
        self.prompt_note.setVisible(False)
        self.example_button = QToolButton()
        self.example_button.setText("Example")
        self.example_button.setObjectName("Flat")
        self.example_button.setToolTip("Put this model's example prompt in the prompt box")
        self.example_button.setVisible(False)

        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.steps.setAccelerated(True)
        self.steps_problem = QLabel()  # the request check's sentence, inline
        self.steps_problem.setObjectName("InputProblem")
        self.steps_problem.setWordWrap(True)
        self.steps_problem.setFont(small_font(self.steps_problem.font()))
        self.steps_problem.setStyleSheet("color: #c62828;")
        self.steps_problem.setVisible(False)
        self.seed = RangeWholeNumberBox("The seed", MIN_SEED, MAX_SEED)
        self.seed.setAccelerated(True)
        self.seed_note = RangeNote(self.seed)
        self.random_seed = QToolButton()
        self.random_seed.setText("Random")
        self.random_seed.setToolTip("Pick a random seed (Ctrl+R)")
        self.size_combo = QComboBox()
        self.guidance_label = QLabel("Guidance")
        self.guidance = RangeDoubleSpinBox("Guidance", *GUIDANCE_RANGE)  # make_request's range
        self.guidance.setSingleStep(0.5)
        self.guidance.setDecimals(1)
        self.guidance_note = RangeNote(self.guidance)
        self.quantize_label = QLabel("Quantization")
        self.quantize = QuantizeControl()

        self.gate_picker = GatePicker()
        self.fill_picker = FillPicker()
        self.threshold = ThresholdControl()
        self.threshold.setToolTip(threshold_tooltip(DEFAULT_GATE))
        self.threshold_note = RangeNote(self.threshold.spin)
        # The entry's own change signal is blocked while the slider, Reset or a gate switch sets
        # it: the note goes with the control's change of value, however made.
        self.threshold.valueChanged.connect(lambda _value: self.threshold_note.say(""))
        self.threshold_reset = QToolButton()
        self.threshold_reset.setText("Reset")
        self.threshold_reset.setToolTip("Back to this variant's default threshold")
        self.threshold_hint = QLabel()
        self.threshold_hint.setWordWrap(True)
        self.threshold_hint.setFont(small_font(self.threshold_hint.font()))
        mute(self.threshold_hint)
        self.rerun = QCheckBox("Re-run when the threshold changes")
        self.rerun.setFont(small_font(self.rerun.font()))
        self.rerun.setToolTip(rerun_tooltip(DEFAULT_GATE))

        self.history_button = QPushButton("History…")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the run after the current step (Esc)")
        self.generate_button = QPushButton("Generate")
        self.generate_button.setObjectName("Primary")
        self.generate_button.setDefault(True)
        shortcut = QKeySequence("Ctrl+Return").toString(QKeySequence.SequenceFormat.NativeText)
        self.generate_button.setToolTip(f"Generate ({shortcut})")

        # The form scrolls when the window is short; the buttons stay in view under it.
        form = QWidget()
        layout = QVBoxLayout(form)
        layout.setContentsMargins(16, 16, 16, 6)
        layout.setSpacing(6)
        layout.addWidget(section("Model"))
        layout.addWidget(self.variant_picker)
        layout.addWidget(self.variant_info)
        download_row = QHBoxLayout()
        download_row.setSpacing(6)
        download_row.addWidget(self.download_progress, 1)
        download_row.addWidget(self.download_cancel)
        self.download_box = QWidget()
        box_layout = QVBoxLayout(self.download_box)
        box_layout.setContentsMargins(0, 0, 0, 0)
        box_layout.setSpacing(2)
        box_layout.addLayout(download_row)
        box_layout.addWidget(self.download_status)
        layout.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.download_box)
        layout.addSpacing(10)

        prompt_header = QHBoxLayout()
        prompt_header.addWidget(section("Prompt"))
        prompt_header.addStretch(1)
        prompt_header.addWidget(self.example_button)
        prompt_header.addWidget(self.recent_button)
        layout.addLayout(prompt_header)
        layout.addWidget(self.prompt)
        layout.addWidget(self.prompt_note)
        layout.addSpacing(10)

        layout.addWidget(section("Sampling"))
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(6)
        grid.addWidget(QLabel("Steps"), 0, 0)
        grid.addWidget(self.steps, 0, 1)
        grid.addWidget(self.steps_problem, 1, 1)
        grid.addWidget(QLabel("Seed"), 2, 0)
        seed_row = QHBoxLayout()
        seed_row.setSpacing(4)
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.random_seed)
        grid.addLayout(seed_row, 2, 1)
        grid.addWidget(self.seed_note, 3, 1)
        grid.addWidget(QLabel("Size"), 4, 0)
        grid.addWidget(self.size_combo, 4, 1)
        grid.addWidget(self.guidance_label, 5, 0)
        grid.addWidget(self.guidance, 5, 1)
        grid.addWidget(self.guidance_note, 6, 1)
        # The levels' labels ("16-bit · up to 39 GB · cannot load") need the sidebar's width:
        # beside the label they were cut.
        grid.addWidget(self.quantize_label, 7, 0, 1, 2)
        grid.addWidget(self.quantize, 8, 0, 1, 2)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        layout.addSpacing(10)

        layout.addWidget(section("LoRA"))
        self.loras = LoraList()
        layout.addWidget(self.loras)
        layout.addSpacing(10)

        layout.addWidget(section("Gate and threshold"))
        layout.addWidget(self.gate_picker)
        layout.addWidget(self.fill_picker)
        # The slider takes the sidebar's width (a short drag is a small change); the entry and
        # Reset sit under it.
        self.threshold.entry_row.addWidget(self.threshold_reset)
        self.threshold.entry_row.addStretch(1)
        layout.addWidget(self.threshold)
        layout.addWidget(self.threshold_note)
        layout.addWidget(self.threshold_hint)
        layout.addWidget(self.rerun)
        self.form_layout = layout  # the window adds the target-quality panel below the rerun box
        layout.addSpacing(10)
        calibration_header = QHBoxLayout()
        calibration_header.addWidget(section("Calibration"))
        calibration_header.addStretch(1)
        self.calibrate_button = QToolButton()  # Model ▸ Calibrate This Model…, beside the note
        self.calibrate_button.setText("Calibrate…")
        self.calibrate_button.setObjectName("Flat")
        self.calibrate_button.setToolTip(
            "Calibrate This Model…: measure this model's own pace (with its LoRAs and "
            "quantization) for TeaCache and MagCache"
        )
        calibration_header.addWidget(self.calibrate_button)
        layout.addLayout(calibration_header)
        self.calibration = QLabel()
        self.calibration.setWordWrap(True)
        self.calibration.setFont(small_font(self.calibration.font()))
        mute(self.calibration)
        self.calibration.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.calibration)
        layout.addStretch(1)
        self.form_scroll = QScrollArea()
        self.form_scroll.setWidgetResizable(True)
        self.form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.form_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.form_scroll.setWidget(form)
        form.setAutoFillBackground(False)
        self.form_scroll.viewport().setAutoFillBackground(False)

        buttons = QHBoxLayout()
        buttons.setContentsMargins(16, 6, 16, 16)
        buttons.setSpacing(8)
        buttons.addWidget(self.history_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.generate_button)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self.form_scroll, 1)
        outer.addLayout(buttons)
        self.setMinimumWidth(300)
        self.setMaximumWidth(380)


def bind_form(view: ControlsView, form: FormModel) -> list[Binding]:
    """Both ways between the sidebar's inputs and ``FormModel`` (the quantization picker binds
    itself: ``app.ui.quantize_view.bind_quantize``)."""
    c, f = view, form
    bindings = [
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
            to_model=int,
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
        bind(f, "gate", c.gate_picker.set_gate),
        bind(f, "fill", c.fill_picker.set_fill),
    ]
    c.gate_picker.gate_selected.connect(f.select_gate)
    c.fill_picker.fill_selected.connect(f.select_fill)
    bind_quantize(c.quantize, c.quantize_label, f)
    return bindings


class FormPanel:
    """The sidebar at work: ``ControlsView`` bound to ``FormModel``, its buttons connected to the
    session and the availability, and the texts it shows (model, calibration, threshold hint,
    steps problem, download row) refreshed from them and the gate advice as the inputs change."""

    def __init__(self, view: ControlsView, studio: Studio) -> None:
        self.view = view
        self.form, self.session, self.downloads = studio.form, studio.session, studio.downloads
        self.availability, self.gate_advice = studio.availability, studio.gate_advice
        self.notices = studio.notices
        c, f, s = view, studio.form, studio.session
        self.bindings = bind_form(c, f)
        f.gate_changed.connect(lambda _gate: self.refresh_threshold_hint())
        f.gate_changed.connect(lambda _gate: self.refresh_variant_info())
        f.gate_note_changed.connect(lambda _note: self.refresh_variant_info())
        c.variant_picker.variant_selected.connect(s.select_variant)
        f.variant_loaded.connect(self.show_variant)
        f.size_changed.connect(self._show_size)
        f.steps_changed.connect(self.refresh_input_problem)
        f.steps_changed.connect(lambda _steps: self.refresh_threshold_hint())
        studio.run.band_changed.connect(lambda _band: self.refresh_threshold_hint())
        c.size_combo.currentIndexChanged.connect(self._on_size_picked)
        c.generate_button.clicked.connect(s.generate)
        c.cancel_button.clicked.connect(s.cancel)
        c.random_seed.clicked.connect(s.randomize_seed)
        c.threshold_reset.clicked.connect(f.reset_threshold)
        c.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        c.example_button.clicked.connect(self._use_example)
        c.rerun.setChecked(studio.settings.rerun_on_threshold_change)
        c.rerun.toggled.connect(s.set_rerun_on_threshold_change)
        c.download_button.clicked.connect(self.availability.download_current)
        c.download_cancel.clicked.connect(self.downloads.cancel)
        self.downloads.started.connect(lambda _vid: self._refresh_download_row())
        self.downloads.progressed.connect(self._on_download_progress)
        self.downloads.finished.connect(self._on_download_done)
        self.downloads.cancelled.connect(self._on_download_cancelled)
        self.downloads.failed.connect(self._on_download_failed)
        self.refresh_availability()
        self.show_variant(f.variant_id)

    def show_variant(self, variant_id: object) -> None:
        variant = get_variant(str(variant_id))
        c = self.view
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
        c.loras.set_available(variant.family.supports_lora)
        prompt_format = variant.family.prompt_format
        c.prompt_note.setText(prompt_format.note if prompt_format else "")
        c.prompt_note.setVisible(prompt_format is not None)
        c.example_button.setVisible(prompt_format is not None and bool(prompt_format.example))
        self.refresh_variant_info()
        self.refresh_threshold_hint()
        self.refresh_input_problem()

    def _fill_sizes(self) -> None:
        """The variant's sizes only (and the form's own, where the variant can draw it)."""
        variant, combo = self.form.variant, self.view.size_combo
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
        combo = self.view.size_combo
        for i in range(combo.count()):
            if tuple(combo.itemData(i)) == tuple(size):  # type: ignore[arg-type]
                combo.setCurrentIndex(i)
                return
        if refill:
            self._fill_sizes()

    def refresh_input_problem(self, *_args: object) -> None:
        problem = self.form.steps_problem()
        self.view.steps_problem.setText(problem or "")
        self.view.steps_problem.setVisible(bool(problem))

    def _on_size_picked(self, index: int) -> None:
        data = self.view.size_combo.itemData(index)
        if data:
            self.form.size = (int(data[0]), int(data[1]))

    def refresh_threshold_hint(self) -> None:
        self.view.threshold_hint.setText(self.gate_advice.threshold_hint())
        self.view.threshold.setToolTip(threshold_tooltip(self.form.gate))
        self.view.rerun.setToolTip(rerun_tooltip(self.form.gate))
        # The slider's fine part reaches three times the gate's default for this model.
        self.view.threshold.set_knee(
            min(1.0, 3 * default_threshold(self.form.variant, self.form.gate))
        )

    def _use_example(self) -> None:
        prompt_format = self.form.variant.family.prompt_format
        if prompt_format is not None and prompt_format.example:
            self.session.use_prompt(prompt_format.example)

    def _fill_recent_menu(self) -> None:
        menu = self.view.recent_menu
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
    def refresh_availability(self) -> None:
        self.view.variant_picker.rebuild(self.availability.availability_badges())
        self.view.variant_picker.set_variant(self.form.variant_id)

    def refresh_variant_info(self) -> None:
        variant = self.form.variant
        self.view.variant_info.setText(self.availability.variant_info())
        gate = self.form.gate
        # The sidebar's plain line; the figures and their source sit under Details (#27 item 24:
        # the hover held the calibrate command, formulas and commit hashes). Where the form opened
        # on the probe because TeaCache has no calibration for this model, that line says why.
        note = self.form.gate_note
        self.view.calibration.setText(note or calibration_summary(variant, gate))
        self.view.calibration.setToolTip(calibration_tooltip(gate))
        self._refresh_download_row()

    def _refresh_download_row(self) -> None:
        c = self.view
        variant = self.form.variant
        this_one = self.downloads.variant_id == variant.id
        c.download_button.setVisible(self.availability.needs_download() and not this_one)
        c.download_button.setEnabled(not self.downloads.busy)
        c.download_button.setText(f"Download ({self.availability.download_label(variant)})")
        c.download_box.setVisible(this_one)

    def _on_download_progress(
        self, variant_id: str, done: object, total: object, message: str
    ) -> None:
        bar = self.view.download_progress
        if isinstance(total, int) and total > 0 and isinstance(done, int):
            bar.setRange(0, 1000)
            bar.setValue(round(1000 * done / total))
            text = f"{format_bytes(done)} of {format_bytes(total)}"
        else:
            bar.setRange(0, 0)
            text = "Downloading…"
        self.view.download_status.setText(f"{message} · {text}" if message else text)

    def _on_download_done(self, variant_id: str) -> None:
        self.refresh_availability()
        self.refresh_variant_info()

    def _on_download_cancelled(self, variant_id: str) -> None:
        self.view.download_status.setText("Download cancelled")
        self.refresh_variant_info()

    def _on_download_failed(self, variant_id: str, message: str) -> None:
        self.notices.download_failed(message)
        self.refresh_variant_info()
