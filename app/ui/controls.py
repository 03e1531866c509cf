"""The input side of the window (a view: widgets and layout; behaviour lives in the window)."""

from __future__ import annotations

import math

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QKeySequence, QPainter, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
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
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import signals_blocked

from app.engine.request import GUIDANCE_RANGE, MAX_STEPS
from app.families import FAMILIES
from app.ui.defaults import MAX_SEED
from app.ui.gate_picker import GatePicker
from app.ui.lora_list import LoraList
from app.ui.quantize import QuantizeControl
from app.ui.theme import caption_font, mute, muted, small_font
from app.variants import Variant, all_variants

VARIANT_ROLE = Qt.ItemDataRole.UserRole + 1
BADGE_ROLE = Qt.ItemDataRole.UserRole + 2


def section(text: str) -> QLabel:
    label = QLabel(text)
    label.setFont(caption_font(label.font()))
    mute(label)
    return label


class _BadgeDelegate(QStyledItemDelegate):
    """Draws a right-aligned grey badge (distilled, size to download) next to each variant."""

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        super().paint(painter, option, index)
        badge = index.data(BADGE_ROLE)
        if not badge:
            return
        painter.save()
        painter.setFont(small_font(option.font))  # type: ignore[attr-defined]
        selected = bool(option.state & option.state.State_Selected)  # type: ignore[attr-defined]
        palette = option.palette  # type: ignore[attr-defined]
        painter.setPen(palette.highlightedText().color() if selected else muted())
        rect: QRect = option.rect.adjusted(0, 0, -10, 0)  # type: ignore[attr-defined]
        painter.drawText(rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, badge)
        painter.restore()

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        size = super().sizeHint(option, index)
        badge = index.data(BADGE_ROLE)
        extra = option.fontMetrics.horizontalAdvance(badge) + 24 if badge else 0  # type: ignore[attr-defined]
        return QSize(size.width() + extra, max(size.height(), 24))


class VariantPicker(QComboBox):
    """Variants grouped by family (headers are not selectable), distilled ones marked."""

    variant_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._model = QStandardItemModel(self)
        self.setModel(self._model)
        self.setItemDelegate(_BadgeDelegate(self))
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(16)
        self._availability: dict[str, str] = {}
        self.rebuild()
        self.currentIndexChanged.connect(self._emit_selected)

    def rebuild(self, availability: dict[str, str] | None = None) -> None:
        """``availability`` maps a variant id to a badge suffix (e.g. "24.1 GB ↓")."""
        current = self.current_variant_id()
        self._availability = dict(availability or self._availability)
        self.blockSignals(True)
        self._model.clear()
        for family in FAMILIES.values():  # the families' own order
            members = [v for v in all_variants().values() if v.family is family]
            if not members:
                continue
            header = QStandardItem(family.display_name)
            header.setFlags(Qt.ItemFlag.NoItemFlags)
            font = header.font()
            font.setBold(True)
            header.setFont(font)
            self._model.appendRow(header)
            for variant in members:
                item = QStandardItem("   " + variant.display_name)
                item.setData(variant.id, VARIANT_ROLE)
                item.setData(self._badge(variant), BADGE_ROLE)
                item.setToolTip(variant_tooltip(variant))
                self._model.appendRow(item)
        self.blockSignals(False)
        if current:
            self.set_variant(current)

    def _badge(self, variant: Variant) -> str:
        parts = []
        if variant.distilled:
            parts.append("distilled")
        extra = self._availability.get(variant.id)
        if extra:
            parts.append(extra)
        return " · ".join(parts)

    def current_variant_id(self) -> str | None:
        data = self.currentData(VARIANT_ROLE)
        return data if isinstance(data, str) else None

    def set_variant(self, variant_id: str) -> None:
        for row in range(self._model.rowCount()):
            if self._model.item(row).data(VARIANT_ROLE) == variant_id:
                if self.currentIndex() != row:
                    self.setCurrentIndex(row)
                return

    def variant_rows(self) -> dict[str, int]:
        rows = {}
        for row in range(self._model.rowCount()):
            vid = self._model.item(row).data(VARIANT_ROLE)
            if isinstance(vid, str):
                rows[vid] = row
        return rows

    def badge_of(self, variant_id: str) -> str:
        row = self.variant_rows().get(variant_id)
        return "" if row is None else str(self._model.item(row).data(BADGE_ROLE) or "")

    def _emit_selected(self, _index: int) -> None:
        vid = self.current_variant_id()
        if vid is not None:
            self.variant_selected.emit(vid)


def calibration_text(variant: Variant, gate: str = "teacache") -> str:
    """Where the gate's numbers for this variant come from (TeaCache's polynomial or MagCache's
    table), in a few short lines."""
    if gate == "magcache" and variant.magcache is not None:
        m = variant.magcache
        p = m.provenance
        lines = [f"MagCache table: {p.source.rstrip('.')}."]
        if p.data_size:
            lines.append(f"Data: {p.data_size}.")
        lines.append(
            f"Recipe: the first {m.retention_ratio:.0%} of steps compute, at most "
            f"{m.max_consecutive_skips} reused in a row."
        )
        if p.notes:
            lines.append(p.notes[:1].upper() + p.notes[1:].rstrip(".") + ".")
        return " ".join(lines)
    p = variant.provenance
    lines = [p.source.rstrip(".") + "."]
    if p.fit_metric and p.fit_value is not None:
        lines.append(f"Fit quality: {p.fit_metric} {p.fit_value:g}.")
    if p.data_size:
        lines.append(f"Data: {p.data_size}.")
    if p.notes:
        lines.append(p.notes[:1].upper() + p.notes[1:].rstrip(".") + ".")
    if variant.calibrated_range is not None:
        lo, hi = variant.calibrated_range
        lines.append(f"Signal changes outside {lo:.3f}–{hi:.3f} always compute.")
    return " ".join(lines)


def calibration_summary(variant: Variant) -> str:
    """The sidebar's plain line; the fit figures (``calibration_text``) sit under Details."""
    own = variant.default_threshold
    if own is None:
        return (
            "This model has no threshold measured for it; TeaCache's guesses may be off. "
            "Figures: Details, under the images."
        )
    return (
        f"TeaCache was tuned for this model; {own:g} is its measured threshold. "
        "Figures: Details, under the images."
    )


def variant_tooltip(variant: Variant) -> str:
    lines = [f"<b>{variant.display_name}</b> ({variant.id})"]
    lines.append(f"{variant.default_steps} steps by default")
    if variant.default_threshold is not None:
        lines.append(f"default threshold {variant.default_threshold:g}")
    if variant.distilled and variant.distilled_reason:
        lines.append(f"distilled: {variant.distilled_reason}")
    if variant.provenance.source:
        lines.append(f"calibration: {variant.provenance.source}")
    return "<br>".join(lines)


class ThresholdControl(QWidget):
    """A slider on a square-root scale (finer near 0: calibrated thresholds run from about 0.01
    to 0.3) beside an exact numeric entry, 0–1 with four decimals."""

    valueChanged = Signal(float)
    STEPS = 1000

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, self.STEPS)
        self.slider.setPageStep(50)
        self.spin = QDoubleSpinBox()
        self.spin.setRange(0.0, 1.0)
        self.spin.setDecimals(4)
        self.spin.setSingleStep(0.0025)
        self.spin.setKeyboardTracking(False)  # commit on Enter or focus-out, not per keystroke
        self.spin.setAccelerated(True)
        self.spin.setFixedWidth(self.spin.fontMetrics().horizontalAdvance("0.00000") + 40)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)
        self._value = 0.0
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)

    def value(self) -> float:
        return self._value

    def setValue(self, value: float) -> None:
        self._apply(round(min(1.0, max(0.0, float(value))), 4))

    @staticmethod
    def to_position(value: float) -> int:
        return round(math.sqrt(max(0.0, value)) * ThresholdControl.STEPS)

    @staticmethod
    def from_position(position: int) -> float:
        return round((position / ThresholdControl.STEPS) ** 2, 4)

    def _from_slider(self, position: int) -> None:
        self._apply(self.from_position(position), moved_slider=True)

    def _from_spin(self, value: float) -> None:
        self._apply(round(value, 4))

    def _apply(self, value: float, *, moved_slider: bool = False) -> None:
        with signals_blocked(self.slider), signals_blocked(self.spin):
            if not moved_slider:
                self.slider.setValue(self.to_position(value))
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

        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.steps.setAccelerated(True)
        self.steps_problem = QLabel()  # the request check's sentence, inline
        self.steps_problem.setObjectName("InputProblem")
        self.steps_problem.setWordWrap(True)
        self.steps_problem.setFont(small_font(self.steps_problem.font()))
        self.steps_problem.setStyleSheet("color: #c62828;")
        self.steps_problem.setVisible(False)
        self.seed = QSpinBox()
        self.seed.setRange(0, MAX_SEED)
        self.seed.setAccelerated(True)
        self.random_seed = QToolButton()
        self.random_seed.setText("Random")
        self.random_seed.setToolTip("Pick a random seed (Ctrl+R)")
        self.size_combo = QComboBox()
        self.guidance_label = QLabel("Guidance")
        self.guidance = QDoubleSpinBox()
        self.guidance.setRange(*GUIDANCE_RANGE)  # the range make_request accepts
        self.guidance.setSingleStep(0.5)
        self.guidance.setDecimals(1)
        self.quantize_label = QLabel("Quantization")
        self.quantize = QuantizeControl()

        self.gate_picker = GatePicker()
        self.threshold = ThresholdControl()
        self.threshold.setToolTip(
            "TeaCache skips a step while the accumulated predicted change stays below this value. "
            "0 turns skipping off. The slider is finer near 0, where calibrated thresholds live."
        )
        self.threshold_reset = QToolButton()
        self.threshold_reset.setText("Reset")
        self.threshold_reset.setToolTip("Back to this variant's default threshold")
        self.threshold_hint = QLabel()
        self.threshold_hint.setWordWrap(True)
        self.threshold_hint.setFont(small_font(self.threshold_hint.font()))
        mute(self.threshold_hint)
        self.rerun = QCheckBox("Re-run when the threshold changes")
        self.rerun.setFont(small_font(self.rerun.font()))
        self.rerun.setToolTip(
            "Threshold-only changes reuse the cached vanilla pass: only the "
            "TeaCache pass runs again"
        )

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
        prompt_header.addWidget(self.recent_button)
        layout.addLayout(prompt_header)
        layout.addWidget(self.prompt)
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
        grid.addWidget(QLabel("Size"), 3, 0)
        grid.addWidget(self.size_combo, 3, 1)
        grid.addWidget(self.guidance_label, 4, 0)
        grid.addWidget(self.guidance, 4, 1)
        grid.addWidget(self.quantize_label, 5, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(self.quantize, 5, 1)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)
        layout.addSpacing(10)

        layout.addWidget(section("LoRA"))
        self.loras = LoraList()
        layout.addWidget(self.loras)
        layout.addSpacing(10)

        layout.addWidget(section("Gate and threshold"))
        layout.addWidget(self.gate_picker)
        threshold_row = QHBoxLayout()
        threshold_row.setSpacing(6)
        threshold_row.addWidget(self.threshold, 1)
        threshold_row.addWidget(self.threshold_reset)
        layout.addLayout(threshold_row)
        layout.addWidget(self.threshold_hint)
        layout.addWidget(self.rerun)
        self.form_layout = layout  # the window adds the target-quality panel below the rerun box
        layout.addSpacing(10)
        layout.addWidget(section("Calibration"))
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
