"""Target quality's panel: a toggle beside the threshold, the minimum SSIM and largest local
difference, and the search as it runs (every threshold tried, with its SSIM, local difference and
skips; the chosen one marked). ``QualityPanel`` only renders and edits
``app.ui.quality_model.QualityModel``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QGridLayout,
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.ui.observable import Binding, bind
from app.ui.quality_model import QualityModel
from app.ui.theme import mute, small_font

COLUMNS = ("Threshold", "Skips", "SSIM", "Local")


class QualityPanel(QWidget):
    """The toggle, the two bounds and the list of thresholds tried."""

    def __init__(self, model: QualityModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.toggle = QCheckBox("Target quality")
        self.toggle.setToolTip(
            "Generate searches for the threshold with the most skips whose SSIM against vanilla "
            "and worst local difference meet these bounds, then sets the slider to it"
        )
        self.min_ssim = QDoubleSpinBox()
        self.min_ssim.setRange(0.5, 1.0)
        self.min_ssim.setDecimals(3)
        self.min_ssim.setSingleStep(0.005)
        self.min_ssim.setToolTip("The lowest SSIM against vanilla the search accepts")
        self.max_local_diff = QDoubleSpinBox()
        self.max_local_diff.setRange(0.0, 1.0)
        self.max_local_diff.setDecimals(2)
        self.max_local_diff.setSingleStep(0.05)
        self.max_local_diff.setToolTip(
            "The largest difference the worst 16 × 16 window may show (0–1): SSIM averages over "
            "the whole image and can stay high while one object is lost"
        )
        self.tried = QTreeWidget()
        self.tried.setColumnCount(len(COLUMNS))
        self.tried.setHeaderLabels(list(COLUMNS))
        self.tried.setRootIsDecorated(False)
        self.tried.setUniformRowHeights(True)
        self.tried.setFont(small_font(self.tried.font()))
        # The sidebar is narrow: four columns share its width, none scrolls sideways.
        header = self.tried.header()
        header.setMinimumSectionSize(24)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.tried.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.tried.setToolTip("Every threshold the search ran: ✓ chosen, ✗ missed the target")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setFont(small_font(self.note.font()))
        mute(self.note)

        self.bounds = QWidget()
        grid = QGridLayout(self.bounds)
        grid.setContentsMargins(18, 0, 0, 0)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        grid.addWidget(QLabel("Minimum SSIM"), 0, 0)
        grid.addWidget(self.min_ssim, 0, 1)
        grid.addWidget(QLabel("Largest local diff"), 1, 0)
        grid.addWidget(self.max_local_diff, 1, 1)
        grid.setColumnStretch(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.toggle)
        layout.addWidget(self.bounds)
        layout.addWidget(self.tried)
        layout.addWidget(self.note)

        self.bindings: list[Binding] = [
            bind(model, "enabled", self.toggle.setChecked, self.toggle.toggled),
            bind(model, "min_ssim", self.min_ssim.setValue, self.min_ssim.valueChanged),
            bind(
                model, "max_local_diff", self.max_local_diff.setValue,
                self.max_local_diff.valueChanged,
            ),
        ]  # fmt: skip
        for signal in (model.enabled_changed, model.probes_changed, model.chosen_changed):
            signal.connect(self._refresh)
        model.note_changed.connect(self._refresh)
        self._refresh()

    def rows(self) -> list[tuple[str, ...]]:
        """The list as shown (tests read it): one row per threshold tried, in order."""
        items = [self.tried.topLevelItem(i) for i in range(self.tried.topLevelItemCount())]
        return [tuple(it.text(c) for c in range(len(COLUMNS))) for it in items if it is not None]

    def _refresh(self, *_args: object) -> None:
        m = self.model
        self.bounds.setVisible(bool(m.enabled))
        self.tried.clear()
        for probe in m.probes:
            chosen = m.chosen is not None and probe.threshold == m.chosen
            mark = "✓ " if chosen else ("" if probe.met else "✗ ")
            item = QTreeWidgetItem(
                [
                    f"{mark}{probe.threshold:.4g}",
                    str(probe.skipped),
                    "—" if probe.ssim is None else f"{probe.ssim:.4f}",
                    "—" if probe.local_diff is None else f"{probe.local_diff:.3f}",
                ]
            )
            verdict = "meets the target" if probe.met else "misses the target"
            for column in range(len(COLUMNS)):
                item.setToolTip(column, f"{verdict}; pattern {probe.pattern}")
                if column:
                    item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight)
            if chosen:
                font = QFont(item.font(0))
                font.setBold(True)
                for column in range(len(COLUMNS)):
                    item.setFont(column, font)
            self.tried.addTopLevelItem(item)
        # As tall as its rows (up to the 8 passes a search may run), so the note stays close.
        rows = max(1, min(len(m.probes), 9))
        row_height = self.tried.sizeHintForRow(0) if m.probes else self.fontMetrics().height() + 4
        height = self.tried.header().sizeHint().height() + rows * row_height + 6
        self.tried.setFixedHeight(height)
        # Only while the option is on (the walk: the list stayed after unticking).
        shown = bool(m.enabled) and (bool(m.probes) or bool(m.run_id))
        self.tried.setVisible(shown)
        self.note.setText(m.note if m.run_id else "")
        self.note.setVisible(bool(m.enabled) and bool(m.note) and bool(m.run_id))
