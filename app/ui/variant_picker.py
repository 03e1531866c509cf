"""The model picker: variants grouped by family (headers are not selectable), each with a grey
badge (distilled, on disk, the size to download) and a tooltip of its defaults."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QPainter, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.families import FAMILIES
from app.ui.theme import muted, small_font
from app.variants import Variant, all_variants

VARIANT_ROLE = Qt.ItemDataRole.UserRole + 1
BADGE_ROLE = Qt.ItemDataRole.UserRole + 2


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

    def popup_width(self) -> int:
        """The list's width that shows every row whole: its name, the gap and its badge
        (``_BadgeDelegate.sizeHint``), beside the scroll bar. Qt sizes the list by the names
        alone, so a badge ran into a long name ("Turbodistilled")."""
        view = self.view()
        option = QStyleOptionViewItem()
        option.initFrom(view)
        option.font = view.font()  # type: ignore[attr-defined]
        option.fontMetrics = view.fontMetrics()  # type: ignore[attr-defined]
        delegate = self.itemDelegate()
        rows = (self._model.index(row, 0) for row in range(self._model.rowCount()))
        widest = max((delegate.sizeHint(option, index).width() for index in rows), default=0)
        scroll_bar = view.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        return widest + scroll_bar + 2 * view.frameWidth()

    def showPopup(self) -> None:
        self.view().setMinimumWidth(self.popup_width())
        super().showPopup()

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
