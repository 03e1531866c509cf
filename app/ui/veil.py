"""A translucent veil over a widget: dims a result that no longer matches the inputs.

Not a ``QGraphicsOpacityEffect``: an effect on a ``QGraphicsView`` (pyqtgraph's plots and image
views) repaints it wrongly. The veil is a child painted on top, transparent to the mouse, so the
dimmed result can still be zoomed, scrolled and right-clicked.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QWidget

VEIL_ALPHA = 150  # of 255: the result stays legible, plainly in the background


class Veil(QWidget):
    def __init__(self, target: QWidget) -> None:
        super().__init__(target)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground)
        self._target = target
        target.installEventFilter(self)
        self.setGeometry(target.rect())
        self.hide()

    def set_shown(self, shown: bool) -> None:
        if shown:
            self.setGeometry(self._target.rect())
            self.raise_()
        self.setVisible(shown)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._target and event.type() == QEvent.Type.Resize:
            self.setGeometry(self._target.rect())
        return False

    def paintEvent(self, event: QPaintEvent) -> None:
        colour = QColor(self.palette().color(QPalette.ColorRole.Window))
        colour.setAlpha(VEIL_ALPHA)
        painter = QPainter(self)
        painter.fillRect(self.rect(), colour)
