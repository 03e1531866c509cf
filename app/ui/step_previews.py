"""Live step previews in the window: a preview fitted to an image pane, and the timeline's
thumbnail popup (the step's picture, framed in its decision's colour, with the step's numbers).

A real model's preview is the latent's linear projection at an eighth of the image size; the panes
show it scaled up to the image's frame (nearest neighbour: the blocks are honest about what it
is), so the frame does not jump when the decoded image replaces it."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QImage, QPixmap
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from app.engine.request import GenerationRequest
from app.gate import Decision
from app.ui.theme import DECISION_COLOURS, small_font

POPUP_SIDE = 192  # the thumbnail's long side in the timeline popup, in pixels


def fit_preview(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` (h, w, 3) scaled to (height, width) by nearest neighbour (returned as is where it
    already has that size)."""
    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image
    rows = np.minimum(np.arange(height) * h // height, h - 1)
    cols = np.minimum(np.arange(width) * w // width, w - 1)
    return np.ascontiguousarray(image[rows][:, cols])


def live_image(
    image: np.ndarray | None,
    preview: np.ndarray | None,
    request: GenerationRequest | None,
    *,
    busy: bool,
) -> np.ndarray | None:
    """What an image pane shows: the pass's image, else (while the run goes) its latest step
    preview fitted to the request's size, else nothing: a cancelled pass's half-formed picture
    is not left standing as if it were a result."""
    if image is not None or preview is None or request is None or not busy:
        return image
    return fit_preview(preview, request.height, request.width)


def to_pixmap(image: np.ndarray, side: int) -> QPixmap:
    """A uint8 RGB array as a pixmap whose long side is ``side`` (pixelated, not smoothed)."""
    array = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = array.shape[:2]
    qimage = QImage(array.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()
    return QPixmap.fromImage(qimage).scaled(
        side,
        side,
        Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.FastTransformation,
    )


class StepThumbnailPopup(QFrame):
    """A tooltip-like window: the step's preview above the step's description."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.ToolTip)
        self.setFrameShape(QFrame.Shape.Box)
        self.setLineWidth(3)
        self.image = QLabel(self)
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel(self)
        self.caption.setTextFormat(Qt.TextFormat.RichText)
        self.caption.setFont(small_font(self.caption.font()))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.image)
        layout.addWidget(self.caption)
        self.decision: Decision | None = None

    def show_step(
        self, image: np.ndarray, caption: str, decision: Decision | None, at: QPoint
    ) -> None:
        self.decision = decision
        colour = QColor(DECISION_COLOURS[decision]) if decision is not None else QColor("gray")
        self.setStyleSheet(f"StepThumbnailPopup {{ border: 3px solid {colour.name()}; }}")
        self.image.setPixmap(to_pixmap(image, POPUP_SIDE))
        self.caption.setText(caption)
        self.adjustSize()
        self.move(at + QPoint(12, 16))
        self.show()
