"""The comparison view: the vanilla reference and one cell per threshold, side by side, with skips
"k of n", SSIM and time under each, zoom and pan linked across every image. Click an image (or
its "Use" button) to make that threshold the current one. Layout and wiring only: every action is
``app.ui.threshold_compare_model.ThresholdComparer``'s."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.report import label_head
from app.metrics import ssimulacra2_words
from app.storage.comparisons import ComparisonRow
from app.ui.job_slot import JobStatus
from app.ui.plain_words import LOCAL_VISIBLE, similarity_words
from app.ui.theme import mute, muted, small_font
from app.ui.threshold_compare_model import ThresholdComparer

CELL_MIN = QSize(170, 150)  # below this the grid scrolls instead of squeezing the images
STATS_LINES = 4  # the numbers under each image
CELL_CHROME = QSize(14, 120)  # a cell's frame, title, numbers and button around its image
STATUS_INTERVAL_MS = 500  # the progress line's cadence while a comparison runs


class _ImageView(pg.GraphicsView):
    """A graphics view that asks for no more than the minimum: the scroll area sizes the grid
    from its children's hints, and a large hint made it taller than the window."""

    def sizeHint(self) -> QSize:
        return CELL_MIN


class ComparisonCell(QFrame):
    """One image with its numbers. ``index`` is -1 for the vanilla reference."""

    picked = Signal(int)

    def __init__(self, index: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.index = index
        self.setObjectName("Card")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.view = _ImageView()
        self.view.setFrameShape(QFrame.Shape.NoFrame)
        self.view.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Expanding)
        self.view.setMinimumSize(CELL_MIN)
        self.box = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.box.setDefaultPadding(0.0)
        self.view.setCentralItem(self.box)
        self.image = pg.ImageItem()
        self.box.addItem(self.image)
        self.placeholder = pg.TextItem("", anchor=(0.5, 0.5))
        self.box.addItem(self.placeholder, ignoreBounds=True)
        scene = self.view.sceneObj
        if scene is not None:
            scene.sigMouseClicked.connect(self._clicked)  # a click, not the end of a drag
        self.stats = QLabel()
        self.stats.setWordWrap(True)
        self.stats.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.stats.setFont(small_font(self.stats.font()))
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Four lines in every cell (the long speedup label goes to the tooltip), so every view
        # gets the same height and the linked ranges stay equal.
        self.stats.setFixedHeight(self.stats.fontMetrics().lineSpacing() * STATS_LINES + 4)
        self.use_button = QToolButton()
        self.use_button.setText("Use this threshold")
        self.use_button.clicked.connect(lambda: self.picked.emit(self.index))
        # The reference has no button but keeps its room: equal views keep the linked ranges equal.
        policy = self.use_button.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        self.use_button.setSizePolicy(policy)
        self.use_button.setVisible(index >= 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.title)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.stats)
        layout.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.has_image = False

    def show_image(self, array: np.ndarray | None, placeholder: str) -> None:
        self.has_image = array is not None
        self.use_button.setEnabled(self.has_image and self.index >= 0)
        if array is None:
            self.image.clear()
            self.placeholder.setText(placeholder)
            self.placeholder.setColor(muted(self))
            self.placeholder.setPos(64, 64)
            self.placeholder.setVisible(True)
            return
        self.placeholder.setVisible(False)
        self.image.setImage(array, levels=(0, 255), autoLevels=False)

    def set_background(self) -> None:
        self.view.setBackground(self.palette().color(QPalette.ColorRole.Base))

    def _clicked(self, event: object) -> None:
        if self.index >= 0 and self.has_image:
            self.picked.emit(self.index)


class ThresholdCompareDialog(QDialog):
    """See the module docstring. Non-modal: the main window stays usable beside it."""

    def __init__(self, comparer: ThresholdComparer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare Thresholds")
        self.setModal(False)
        self.comparer = comparer
        self.resize(1280, 820)

        self.thresholds = QLineEdit()
        self.thresholds.setPlaceholderText("0.05, 0.1, 0.2, 0.3")
        self.thresholds.setToolTip(comparer.limits_text())
        self.thresholds.returnPressed.connect(self.start)
        self.defaults_button = QPushButton("Defaults")
        self.defaults_button.setToolTip(
            "Thresholds around the current one; after a run of this prompt, seed and steps, "
            "each default skips a different number of steps on its vanilla trace"
        )
        self.defaults_button.clicked.connect(self.fill_defaults)
        self.run_button = QPushButton("Run Comparison")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.comparer.cancel)
        self.fit_button = QToolButton()
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip("Reset zoom and pan (every image moves together)")
        self.fit_button.clicked.connect(self.fit)

        inputs = QHBoxLayout()
        inputs.setSpacing(8)
        label = QLabel("Thresholds")
        inputs.addWidget(label)
        inputs.addWidget(self.thresholds, 1)
        inputs.addWidget(self.defaults_button)
        inputs.addWidget(self.run_button)
        inputs.addWidget(self.cancel_button)

        self.error = QLabel()  # one sentence: why nothing started, or why the batch stopped
        self.error.setObjectName("InlineError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b3261e;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hint = QLabel(comparer.hint_text())
        self.hint.setWordWrap(True)
        self.hint.setFont(small_font(self.hint.font()))
        mute(self.hint)
        # One line that never changes the layout: a step's progress must not re-lay (and so
        # repaint) every image while the engine's steps are being timed.
        self.status = QLabel()
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.setInterval(STATUS_INTERVAL_MS)
        self._status_timer.timeout.connect(self._show_status)
        self.about = QLabel()  # the request and the hardware the times come from
        self.about.setWordWrap(True)
        self.about.setFont(small_font(self.about.font()))
        self.about.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mute(self.about)
        status_row = QHBoxLayout()
        status_row.addWidget(self.status, 1)
        status_row.addWidget(self.fit_button)

        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(8)
        self.grid_scroll = QScrollArea()
        self.grid_scroll.setWidgetResizable(True)
        self.grid_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.grid_scroll.setWidget(self.grid_host)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(6)
        layout.addLayout(inputs)
        layout.addWidget(self.error)
        layout.addWidget(self.hint)
        layout.addLayout(status_row)
        layout.addWidget(self.about)
        layout.addWidget(self.grid_scroll, 1)

        self.cells: list[ComparisonCell] = []
        self._frame: tuple[int, int] = (128, 128)
        self._user_zoomed = False
        self._columns = 0
        self._shown: tuple[object, ...] = ()
        comparer.listeners.append(self.refresh)
        # "✓ current" follows the main window's result: a Generate or a reopened run ends it.
        comparer.run.report_changed.connect(lambda _report: self.refresh())
        self.fill_defaults()
        self.refresh()

    # -- actions -----------------------------------------------------------------------------------
    def fill_defaults(self) -> None:
        self.thresholds.setText(self.comparer.default_text())
        self.hint.setText(self.comparer.hint_text())  # the form's gate may have changed

    def start(self) -> int | None:
        return self.comparer.start(self.thresholds.text())

    def fit(self) -> None:
        self._user_zoomed = False
        if self.cells:
            h, w = self._frame
            self.cells[0].box.setRange(xRange=(0, w), yRange=(0, h), padding=0.02)

    # -- state → widgets ---------------------------------------------------------------------------
    def refresh(self) -> None:
        c = self.comparer
        key = (c.status, c.picked, c.thresholds, tuple(id(r) for r in c.rows), id(c.vanilla))
        if key == self._shown and c.status.busy:  # only the step progress moved: throttled
            if not self._status_timer.isActive():
                self._status_timer.start()
            return
        busy = c.status.busy
        self.run_button.setEnabled(not busy)
        self.defaults_button.setEnabled(not busy)
        self.thresholds.setReadOnly(busy)
        self.cancel_button.setEnabled(busy and c.status is not JobStatus.cancelling)
        self.error.setText(c.message)
        self.error.setVisible(bool(c.message))
        self.hint.setText(c.hint_text())
        self._show_status()
        self.about.setText(self._about_text())
        self.about.setVisible(bool(self.about.text()))
        if c.status is JobStatus.opened and c.thresholds:
            self.thresholds.setText(", ".join(f"{t:g}" for t in c.thresholds))
        # Images are repainted only when an entry, the pick or the state changed: repaints on the
        # GUI thread take the CPU the engine's timed steps need (lab.bench.window_timing measured
        # that for the main window).
        if key != self._shown:
            self._shown = key
            self._ensure_cells(len(c.thresholds))
            self._fill_cells()

    def _show_status(self) -> None:
        c = self.comparer
        status = c.progress or "Pick thresholds and run the comparison."
        if c.saved_entry and not c.status.busy and c.status is not JobStatus.opened:
            status += " · saved to the history"
        self.status.setText(status)
        self.status.setToolTip(status)

    def _about_text(self) -> str:
        c = self.comparer
        base = c.base
        if base is None:
            return ""
        prompt = base.prompt if len(base.prompt) <= 80 else base.prompt[:79] + "…"
        text = f"{base.variant_id} · seed {base.seed} · {base.steps} steps · “{prompt}”"
        if c.hardware:
            text += f" · times measured on {c.hardware}"
        if c.origin:
            text = f"From {c.origin}: {text}"
        if c.warnings:
            text += "\n" + "\n".join(c.warnings)
        return text

    def _ensure_cells(self, count: int) -> None:
        wanted = count + 1 if count else 0  # the vanilla reference first
        if len(self.cells) != wanted:
            for cell in self.cells:
                cell.setParent(None)
                cell.deleteLater()
            self.cells = []
            for index in range(-1, count):
                cell = ComparisonCell(index)
                cell.picked.connect(self.comparer.pick)
                cell.set_background()
                cell.box.sigRangeChangedManually.connect(self._on_manual_zoom)
                if self.cells:
                    cell.box.setXLink(self.cells[0].box)
                    cell.box.setYLink(self.cells[0].box)
                self.cells.append(cell)
            self._columns = 0
        self._layout_cells()

    def _layout_cells(self) -> None:
        if not self.cells:
            return
        viewport = self.grid_scroll.viewport()
        columns = best_columns(len(self.cells), viewport.width(), viewport.height())
        if columns == self._columns:
            return
        self._columns = columns
        for cell in self.cells:
            self.grid.removeWidget(cell)
        for i, cell in enumerate(self.cells):
            self.grid.addWidget(cell, i // columns, i % columns)
        for column in range(self.grid.columnCount()):
            self.grid.setColumnStretch(column, 1 if column < columns else 0)

    def _fill_cells(self) -> None:
        c = self.comparer
        if not self.cells:
            return
        same = c.same_skips()
        reference = next((r.image for r in c.rows if r is not None and r.image is not None), None)
        reference = c.vanilla if c.vanilla is not None else reference
        if reference is not None and reference.shape[:2] != self._frame:
            self._frame = (int(reference.shape[0]), int(reference.shape[1]))
            self._user_zoomed = False
        vanilla = self.cells[0]
        vanilla.title.setText("Vanilla (reference)")
        vanilla.show_image(c.vanilla, "Generating…" if c.status.busy else "No image")
        first = next((r for r in c.rows if r is not None), None)
        vanilla.stats.setText(_vanilla_stats(first))
        for i, cell in enumerate(self.cells[1:]):
            row = c.rows[i] if i < len(c.rows) else None
            threshold = c.thresholds[i]
            picked = " ✓ current" if c.picked == i else ""
            cell.title.setText(f"t = {threshold:g}{picked}")
            if row is None:
                waiting = "Waiting…" if c.status.busy else "Not run"
                cell.show_image(None, waiting)
                cell.stats.setText("")
                cell.stats.setToolTip("")
                continue
            cell.show_image(row.image, "")
            twin = same.get(i)
            note = f"same steps skipped as t = {c.thresholds[twin]:g}" if twin is not None else ""
            cell.stats.setText(_row_stats(row, note))
            cell.stats.setToolTip(_row_tooltip(row))
        if not self._user_zoomed:
            QTimer.singleShot(0, self.fit)

    def _on_manual_zoom(self, *_args: object) -> None:
        self._user_zoomed = True

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._layout_cells()
        if not self._user_zoomed:
            QTimer.singleShot(0, self.fit)


def best_columns(cells: int, width: int, height: int) -> int:
    """The column count that gives the images the largest square side in ``width`` × ``height``
    (each cell also holds a title, its numbers and a button); fewer rows on a tie."""
    spacing = 8
    best, best_side = 1, -1.0
    for columns in range(1, cells + 1):
        rows = math.ceil(cells / columns)
        cell_w = (width - spacing * (columns - 1)) / columns - CELL_CHROME.width()
        cell_h = (height - spacing * (rows - 1)) / rows - CELL_CHROME.height()
        side = min(cell_w, cell_h)
        if side > best_side + 0.5:
            best, best_side = columns, side
    rows = math.ceil(cells / best)
    return math.ceil(cells / rows)  # balanced rows: 4 + 3, not 5 + 2


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _row_tooltip(row: ComparisonRow) -> str:
    """The speedup's full label, and what the tile's "S2" score is."""
    lines = [f"Speedup: {row.speedup_label}"] if row.speedup_label else []
    if row.ssimulacra2 is not None:
        lines.append(
            f"S2: SSIMULACRA2 {row.ssimulacra2:.1f} against vanilla (100 = identical): "
            f"{ssimulacra2_words(row.ssimulacra2)}"
        )
    return "\n".join(lines)


def _row_stats(row: ComparisonRow, note: str) -> str:
    skips = "—" if row.skips is None else f"{row.skips} of {row.steps} skipped"
    ssim = "—" if row.ssim is None else f"{row.ssim:.4f}"
    if row.ssimulacra2 is not None:
        ssim += f" · S2 {row.ssimulacra2:.0f}"  # SSIMULACRA2: the tile's tooltip spells it out
    figure = row.report.speedup_figure if row.report is not None else None
    if row.speedup is not None and figure is not None:
        # The two times the speedup is the ratio of, re-timed ones where the figure was re-timed
        # (its label, on the next line, says so): the vanilla tile's measured time can differ.
        timed = (
            f"time {_seconds(figure.gated_seconds)} · vanilla {_seconds(figure.vanilla_seconds)}"
        )
        speedup = f"{row.speedup:.2f}× {short_label(row.speedup_label)}"
    else:  # a row saved without its report: the times and speedup it recorded
        timed = f"time {_seconds(row.gated_seconds)}"
        speedup = ""
        if row.speedup is not None:
            timed += f" · {row.speedup:.2f}×"
            speedup = short_label(row.speedup_label)
    lines = [f"{skips} · SSIM {ssim}", timed]
    local = row.local_diff
    if row.ssim is not None and local is not None and local > LOCAL_VISIBLE:
        # As the Similarity card says it; one line with the twin's note (the cell holds four).
        spot = similarity_words(row.ssim, local)
        note = f"{spot} · {note.replace('same steps skipped as', 'same as')}" if note else spot
    if speedup:
        lines.append(speedup)
    if note:
        lines.append(note)
    return "\n".join(lines)


def short_label(label: str) -> str:
    """The label's first clause ("measured", "re-timed estimate (3 of 28 steps replayed)"): it
    says whether the figure is the ratio of the times shown; the cell's tooltip carries all of
    it."""
    return label_head(label)


def _vanilla_stats(row: ComparisonRow | None) -> str:
    if row is None or row.vanilla_seconds is None:
        return "every step computed"
    return f"every step computed\ntime {_seconds(row.vanilla_seconds)}"
