"""Gated beside vanilla with linked zoom and pan, a difference view, and the numbers under them."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QMimeData, QObject, QPoint, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QDrag,
    QGuiApplication,
    QImage,
    QMouseEvent,
    QPalette,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from superqt import QElidingLabel

from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.metrics import ssimulacra2_words
from app.storage.export import write_png
from app.ui.plain_words import similarity_words
from app.ui.theme import caption_font, monospace_digits, mute, muted, small_font, value_font

pg.setConfigOptions(imageAxisOrder="row-major")

DEFAULT_LABEL = gate_kind(DEFAULT_GATE).label  # the gated pane's name before any run


NOTHING_SKIPPED_NOTE = (
    "both passes did the same work, so the ratio of their times (the two cards) is timing noise"
)


def speedup_tooltip(label: str, gate: str = DEFAULT_LABEL) -> str:
    """The speedup card's tooltip: what the figure divides (``gate``: the label of the gate that
    ran), then its one full label (which ends with the times a re-timed figure is the ratio of)."""
    divides = f"Vanilla time ÷ {gate} time"
    if not label:
        return divides
    if label == "nothing skipped":
        return f"{divides}: nothing skipped, so 1.00×; {NOTHING_SKIPPED_NOTE}"
    return f"{divides}: {label}"


def similarity_tooltip(
    gate: str = DEFAULT_LABEL, local_diff: float | None = None, ssimulacra2: float | None = None
) -> str:
    text = f"How alike the {gate} and vanilla pictures are: SSIM, 1 = identical (uint8 RGB)"
    if local_diff is not None:
        text = (
            f"{text}. Worst local difference {local_diff:.3f} (0–1): the mean difference of the "
            "most changed 16 × 16 window, which SSIM can miss"
        )
    if ssimulacra2 is not None:
        text = (
            f"{text}. SSIMULACRA2 {ssimulacra2:.1f}, a score of the changes eyes notice, colour "
            f"included (100 = identical): {ssimulacra2_words(ssimulacra2)}"
        )
    return text


def card_tooltips(gate: str = DEFAULT_LABEL) -> dict[str, str]:
    """The time and skip cards' tooltips, naming the gate that ran (its label)."""
    return {
        "gated_time": f"Time of the steps with {gate} (model loading not included)",
        "vanilla_time": f"Time of the steps without {gate} (model loading not included)",
        "skips": f"Steps {gate} did not compute: it reused a result",
    }


class StatCard(QFrame):
    """A caption over a large value, with a small note under it."""

    def __init__(self, caption: str, tooltip: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.caption = QLabel(caption)
        self.caption.setFont(caption_font(self.font()))
        self.value = QLabel("—")
        self.value.setFont(monospace_digits(value_font(self.font())))
        # Elided where the card is narrow (a long speedup label must not widen the card row
        # past a 1024-px window); text() and the card's tooltip keep the whole note.
        self.note = QElidingLabel("")
        self.note.setFont(small_font(self.font()))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 6)
        layout.setSpacing(1)
        layout.addWidget(self.caption)
        layout.addWidget(self.value)
        layout.addWidget(self.note)
        self.setToolTip(tooltip)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._apply_palette()

    def set(self, value: str, note: str = "") -> None:
        self.value.setText(value)
        self.note.setText(note)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        mute(self.caption)
        mute(self.note)


IMAGE_NAMES = (DEFAULT_LABEL, "Vanilla", "Difference")
IMAGES_MIN_HEIGHT = 144  # the image row's card: a title and a ~115 px image
MESSAGE_MS = 10_000  # how long the status bar shows a save or copy


class DragTitle(QLabel):
    """An image's title: drag it to drag the image out (to the Finder or another app); the view
    under it pans with a plain drag, so the title is the handle."""

    def __init__(self, text: str, start_drag: Callable[[QWidget], None]) -> None:
        super().__init__(text)
        self._start_drag = start_drag
        self._pressed_at: QPoint | None = None
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.setToolTip("Drag to another app or the Finder · right-click to save or copy")

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._pressed_at = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        start = self._pressed_at
        if start is not None and event.buttons() & Qt.MouseButton.LeftButton:
            moved = (event.position().toPoint() - start).manhattanLength()
            if moved >= QApplication.startDragDistance():
                self._pressed_at = None
                self._start_drag(self)
                return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._pressed_at = None
        super().mouseReleaseEvent(event)


class ComparePanel(QWidget):
    """Three linked views (TeaCache, vanilla, difference) and the comparison numbers. Right-click
    an image (or its title) to save or copy it; drag its title to drag it out."""

    message = Signal(str)  # a confirmation or an error for the status bar

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # The run's numbers for a saved image's PNG metadata (the window sets it to the session's).
        self.metadata_source: Callable[[], dict[str, str]] | None = None
        self._arrays: list[np.ndarray | None] = [None, None, None]
        self._levels: float = 8.0
        self.titles: list[QLabel] = []
        self.gate_name = IMAGE_NAMES[0]  # the gated pass's title: the gate that ran it
        self.views: list[pg.GraphicsView] = []
        self.boxes: list[pg.ViewBox] = []
        self.images: list[pg.ImageItem] = []
        self.placeholders: list[pg.TextItem] = []
        self.frames: list[QGraphicsRectItem] = []
        # One GraphicsView per image in an equal-stretch row: with locked aspect, views of
        # different widths would make the linked ranges fight.
        self.view = QFrame()
        self.view.setObjectName("Card")
        self.view.setMinimumHeight(IMAGES_MIN_HEIGHT)
        row = QHBoxLayout(self.view)
        row.setContentsMargins(8, 6, 8, 8)
        row.setSpacing(10)
        for index, name in enumerate(IMAGE_NAMES):
            title = DragTitle(name, lambda source, i=index: self.start_drag(i, source))
            title.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            title.customContextMenuRequested.connect(
                lambda pos, i=index, t=title: self._popup_menu(i, t.mapToGlobal(pos))
            )
            title.setAlignment(Qt.AlignmentFlag.AlignCenter)
            view = pg.GraphicsView()
            view.setFrameShape(QFrame.Shape.NoFrame)
            view.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Expanding)
            box = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
            box.setDefaultPadding(0.0)
            view.setCentralItem(box)
            view.viewport().installEventFilter(self)
            image = pg.ImageItem()
            box.addItem(image)
            frame = QGraphicsRectItem(0, 0, 128, 128)  # keeps the fit while an image is missing
            box.addItem(frame)
            placeholder = pg.TextItem("", anchor=(0.5, 0.5))
            box.addItem(placeholder, ignoreBounds=True)  # the fit follows the frame only
            column = QVBoxLayout()
            column.setSpacing(4)
            column.addWidget(title)
            column.addWidget(view, 1)
            row.addLayout(column, 1)
            self.titles.append(title)
            self.views.append(view)
            self.boxes.append(box)
            self.images.append(image)
            self.placeholders.append(placeholder)
            self.frames.append(frame)
        self.gated_box, self.vanilla_box, self.diff_box = self.boxes
        self._user_zoomed = False
        for box in (self.vanilla_box, self.diff_box):
            box.setXLink(self.gated_box)
            box.setYLink(self.gated_box)
        viridis = pg.colormap.get("viridis")  # perceptually uniform and colour-blind safe
        if viridis is not None:
            self.images[2].setColorMap(viridis)
        for box in self.boxes:
            box.sigRangeChangedManually.connect(self._on_manual_zoom)

        self.fit_button = QToolButton()
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip(
            "Reset zoom and pan (scroll to zoom, drag to pan; all three views move together)"
        )
        self.fit_button.clicked.connect(self.fit)

        tips = card_tooltips(self.gate_name)
        self.ssim_card = StatCard("Similarity", similarity_tooltip(self.gate_name))
        self.gated_time_card = StatCard(f"{self.gate_name} time", tips["gated_time"])
        self.vanilla_time_card = StatCard("Vanilla time", tips["vanilla_time"])
        self.speedup_card = StatCard("Speedup", speedup_tooltip("", self.gate_name))
        self.skips_card = StatCard("Skipped", tips["skips"])
        cards = QHBoxLayout()
        cards.setSpacing(8)
        for card in (
            self.ssim_card,
            self.gated_time_card,
            self.vanilla_time_card,
            self.speedup_card,
            self.skips_card,
        ):
            cards.addWidget(card)

        self.header = QHBoxLayout()
        self.header.setSpacing(8)
        self.hint = QLabel(
            "Scroll to zoom · drag to pan · right-click to save or copy · drag a title out"
        )
        self.hint.setFont(small_font(self.hint.font()))
        self.header.addStretch(1)
        self.header.addWidget(self.hint)
        self.header.addWidget(self.fit_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(self.header)
        layout.addWidget(self.view, 1)
        layout.addLayout(cards)
        self._frame_shape: tuple[int, ...] = (128, 128)
        self._apply_palette()
        self.set_images(None, None, None)

    def sizeHint(self) -> QSize:
        return QSize(720, 330)  # modest, so the stretch factors (not size hints) share the space

    def set_images(
        self,
        gated: np.ndarray | None,
        vanilla: np.ndarray | None,
        difference: np.ndarray | None,
        *,
        vanilla_cached: bool = False,
        busy: bool = False,
    ) -> None:
        refit = False
        reference = next((a for a in (gated, vanilla) if a is not None), None)
        if reference is not None and reference.shape[:2] != self._frame_shape:
            self._frame_shape = reference.shape[:2]
            refit = True
        h, w = self._frame_shape
        secondary = muted(self)
        self._arrays = [gated, vanilla, difference]
        for i, array in enumerate((gated, vanilla, difference)):
            image, placeholder, frame = self.images[i], self.placeholders[i], self.frames[i]
            frame.setRect(0, 0, w, h)
            if array is None:
                image.clear()
                placeholder.setText("Generating…" if busy else "No image yet")
                placeholder.setPos(w / 2, h / 2)
                placeholder.setVisible(True)
                frame.setPen(
                    pg.mkPen(secondary, width=1, style=Qt.PenStyle.DashLine, cosmetic=True)
                )
                continue
            placeholder.setVisible(False)
            frame.setPen(pg.mkPen(None))
            if i == 2:
                top = float(array.max()) if array.size else 0.0
                self._levels = max(8.0, top)
                image.setImage(array, levels=(0.0, self._levels), autoLevels=False)
            else:
                image.setImage(array, levels=(0, 255), autoLevels=False)
        self.titles[0].setText(self.gate_name)
        self.gated_time_card.caption.setText(f"{self.gate_name} time")
        self.titles[1].setText("Vanilla · cached ↺" if vanilla_cached else "Vanilla")
        top = float(difference.max()) if difference is not None and difference.size else None
        self.titles[2].setText(
            f"Difference · max {top:.0f}/255" if top is not None else "Difference"
        )
        if refit:
            self.fit()

    # -- save, copy and drag out ----------------------------------------------------------------
    def rgb_image(self, index: int) -> np.ndarray | None:
        """The shown image as uint8 RGB H×W×3: the difference as drawn (viridis, same levels)."""
        array = self._arrays[index]
        if array is None:
            return None
        if index == 2:
            viridis = pg.colormap.get("viridis")
            scaled = np.clip(np.asarray(array, dtype=np.float32) / self._levels, 0.0, 1.0)
            if viridis is None:
                grey = (scaled * 255).astype(np.uint8)
                return np.ascontiguousarray(np.stack([grey] * 3, axis=-1))
            rgba = np.asarray(viridis.map(scaled.ravel(), mode=pg.ColorMap.BYTE), dtype=np.uint8)
            return np.ascontiguousarray(rgba.reshape(*scaled.shape, -1)[..., :3])
        rgb = np.asarray(array)
        if rgb.dtype != np.uint8:
            rgb = np.clip(rgb, 0, 255).astype(np.uint8)
        if rgb.ndim == 2:
            rgb = np.stack([rgb] * 3, axis=-1)
        return np.ascontiguousarray(rgb[..., :3])

    def qimage(self, index: int) -> QImage | None:
        rgb = self.rgb_image(index)
        if rgb is None:
            return None
        h, w = rgb.shape[:2]
        return QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()

    def pane_name(self, index: int) -> str:
        """The pane's name in menus, file names and metadata: the gated one is the gate's."""
        return self.gate_name if index == 0 else IMAGE_NAMES[index]

    def suggested_name(self, index: int) -> str:
        """``<gate>-<variant>-s<seed>-<pane>.png``: the gate first, as the side-by-side export."""
        meta = self._metadata()
        stem = f"{meta.get('gate', DEFAULT_GATE)}-{meta.get('variant', 'image')}"
        if "seed" in meta:
            stem += f"-s{meta['seed']}"
        return f"{stem}-{self.pane_name(index).lower()}.png"

    def image_menu(self, index: int) -> QMenu:
        """Save Image…, Copy Image; disabled while the pane has no image."""
        menu = QMenu(self)
        has_image = self._arrays[index] is not None
        save = menu.addAction(f"Save {self.pane_name(index)} Image…")
        save.triggered.connect(lambda: self.save_image(index))
        copy = menu.addAction(f"Copy {self.pane_name(index)} Image")
        copy.triggered.connect(lambda: self.copy_image(index))
        for action in (save, copy):
            action.setEnabled(has_image)
        return menu

    def save_image(self, index: int, path: Path | None = None) -> Path | None:
        """Writes the pane's image as a PNG with the run's metadata; asks where unless given."""
        rgb = self.rgb_image(index)
        if rgb is None:
            return None
        if path is None:
            name, _ = QFileDialog.getSaveFileName(
                self, "Save Image", str(Path.home() / self.suggested_name(index)), "PNG (*.png)"
            )
            if not name:
                return None
            path = Path(name)
        meta = {**self._metadata(), "image": self.pane_name(index)}
        try:
            written = write_png(path, rgb, meta)
        except OSError as exc:
            self.message.emit(f"Could not save the image to {path}: {exc.strerror or exc}")
            return None
        self.message.emit(f"Saved {written}")
        return written

    def copy_image(self, index: int) -> bool:
        image = self.qimage(index)
        if image is None:
            return False
        QGuiApplication.clipboard().setImage(image)
        self.message.emit(f"Copied the {self.pane_name(index)} image")
        return True

    def drag_data(self, index: int) -> QMimeData | None:
        """The image itself and a temporary PNG file (with metadata) for apps that take files."""
        image = self.qimage(index)
        rgb = self.rgb_image(index)
        if image is None or rgb is None:
            return None
        folder = Path(tempfile.gettempdir()) / "teacache-studio-drag"
        meta = {**self._metadata(), "image": self.pane_name(index)}
        try:
            path = write_png(folder / self.suggested_name(index), rgb, meta)
        except OSError:
            path = None
        data = QMimeData()
        data.setImageData(image)
        if path is not None:
            data.setUrls([QUrl.fromLocalFile(str(path))])
        return data

    def start_drag(self, index: int, source: QWidget) -> None:
        data = self.drag_data(index)
        if data is None:
            return
        drag = QDrag(source)
        drag.setMimeData(data)
        image = self.qimage(index)
        if image is not None:
            drag.setPixmap(
                QPixmap.fromImage(image).scaled(96, 96, Qt.AspectRatioMode.KeepAspectRatio)
            )
        drag.exec(Qt.DropAction.CopyAction)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ContextMenu and isinstance(event, QContextMenuEvent):
            for index, view in enumerate(self.views):
                if watched is view.viewport():
                    self._popup_menu(index, event.globalPos())
                    return True
        return super().eventFilter(watched, event)

    def _popup_menu(self, index: int, at: QPoint) -> None:
        self.image_menu(index).popup(at)

    def _metadata(self) -> dict[str, str]:
        source = self.metadata_source
        return source() if source is not None else {}

    def fit(self) -> None:
        """Show the whole image; it stays fitted through resizes until the user zooms or pans."""
        self._user_zoomed = False
        h, w = self._frame_shape
        self.gated_box.setRange(xRange=(0, w), yRange=(0, h), padding=0.02)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if not self._user_zoomed:
            QTimer.singleShot(0, self.fit)  # after the graphics layout has settled

    def _on_manual_zoom(self, *_args: object) -> None:
        self._user_zoomed = True

    def set_stats(
        self,
        *,
        ssim: float | None,
        gated_seconds: float | None,
        vanilla_seconds: float | None,
        speedup: float | None,
        speedup_label: str,
        skips: int | None,
        steps: int,
        vanilla_cached: bool,
        resumed_from: int | None,
        local_diff: float | None = None,
        ssimulacra2: float | None = None,
    ) -> None:
        self.ssim_card.set(
            "—" if ssim is None else f"{ssim:.4f}",
            "" if ssim is None else _ssim_note(ssim, local_diff, ssimulacra2),
        )
        gate = self.gate_name
        self.ssim_card.setToolTip(similarity_tooltip(gate, local_diff, ssimulacra2))
        tips = card_tooltips(gate)
        self.gated_time_card.caption.setText(f"{gate} time")
        self.gated_time_card.setToolTip(tips["gated_time"])
        self.vanilla_time_card.setToolTip(tips["vanilla_time"])
        self.skips_card.setToolTip(tips["skips"])
        self.gated_time_card.set(_seconds(gated_seconds), _resume_note(resumed_from, steps))
        self.vanilla_time_card.set(
            _seconds(vanilla_seconds), "reused from the cache" if vanilla_cached else ""
        )
        label = speedup_label if speedup is not None else ""
        self.speedup_card.set("—" if speedup is None else f"{speedup:.2f}×", label)
        self.speedup_card.setToolTip(speedup_tooltip(label, gate))
        fraction = f"{skips / steps:.0%} of steps" if skips is not None and steps else ""
        self.skips_card.set("—" if skips is None else f"{skips} of {steps}", fraction)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        palette = self.palette()
        for view in self.views:
            view.setBackground(palette.color(QPalette.ColorRole.Base))
        secondary = muted(self)
        mute(self.hint)
        for placeholder in self.placeholders:
            placeholder.setColor(secondary)


def _resume_note(resumed_from: int | None, steps: int) -> str:
    if not resumed_from:  # re-seeded at step 0: nothing was replayed, every step ran
        return ""
    # Plain words here; "resumed from step k" and the rest sit under Details (app.ui.plain_words).
    if resumed_from >= steps:
        return "every step shared with vanilla"
    if resumed_from == 1:
        return "first step shared with vanilla"
    return f"first {resumed_from} steps shared with vanilla"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _ssim_note(
    value: float, local_diff: float | None = None, ssimulacra2: float | None = None
) -> str:
    """The card's word (``plain_words.similarity_words``) and the SSIMULACRA2 score beside it.
    Short: the card row must fit 1024 px (what the score means is in the card's tooltip)."""
    words = similarity_words(value, local_diff)
    return words if ssimulacra2 is None else f"{words} · SSIMULACRA2 {ssimulacra2:.0f}"
