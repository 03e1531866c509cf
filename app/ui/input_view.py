"""The sidebar's "Start from a picture" panel, bound to ``InputModel``: the picture's thumbnail
with its name and size (drop a picture on it, or anywhere on the window: ``PictureDrops``),
Choose…, the shipped sketch, Clear, and the strength slider with what it leaves the gate. Where
the picked model cannot start from a picture the slider goes and a line says so."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImageReader, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.request import InputImage
from app.ui.form_view import section
from app.ui.input_model import STRENGTH_STEPS, InputModel
from app.ui.theme import mute, small_font

THUMBNAIL = 72  # pixels, the longer side
PICTURE_FILTER = "Pictures (*.png *.jpg *.jpeg *.webp *.bmp *.tif *.tiff *.gif);;All files (*)"


def dropped_file(event: QDragEnterEvent | QDropEvent) -> Path | None:
    """The first local file a drag carries, or None."""
    mime = event.mimeData()
    if mime is None or not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile():
            return Path(url.toLocalFile())
    return None


def thumbnail(picture: InputImage, side: int = THUMBNAIL) -> QPixmap:
    """The picture at most ``side`` pixels on its longer side, its EXIF orientation applied."""
    reader = QImageReader(picture.path)
    reader.setAutoTransform(True)
    image = reader.read()
    if image.isNull():
        return QPixmap()
    return QPixmap.fromImage(image).scaled(
        QSize(side, side),
        Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation,
    )


class PictureDrops(QObject):
    """Lets a picture be dropped anywhere on ``window`` (a drop lands on the nearest widget that
    accepts drops, the window itself where no child does): it goes to ``InputModel.choose``."""

    def __init__(self, window: QWidget, model: InputModel) -> None:
        super().__init__(window)
        self.model = model
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, QDragEnterEvent) and dropped_file(event) is not None:
            event.acceptProposedAction()
            return True
        if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop:
            path = dropped_file(event)
            if path is not None:
                event.acceptProposedAction()
                self.model.choose(path)
                return True
        return super().eventFilter(watched, event)


class InputPanel(QWidget):
    def __init__(self, model: InputModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setAcceptDrops(True)
        self.setAccessibleName("Start from a picture")

        self.choose_button = QToolButton()
        self.choose_button.setText("Choose…")
        self.choose_button.setToolTip("Start from a picture (or drop one on the window)")
        self.sample_button = QToolButton()
        self.sample_button.setText("Sketch")
        self.sample_button.setObjectName("Flat")
        self.sample_button.setToolTip("Start from the crayon sketch that ships with the demo")
        self.clear_button = QToolButton()
        self.clear_button.setText("✕")
        self.clear_button.setObjectName("Flat")
        self.clear_button.setToolTip("Start from noise again (clear the picture)")
        self.clear_button.setAccessibleName("Clear the picture")

        self.thumbnail = QLabel("Drop a\npicture")
        self.thumbnail.setObjectName("PictureWell")
        self.thumbnail.setFixedSize(THUMBNAIL + 6, THUMBNAIL + 6)
        self.thumbnail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.thumbnail.setFrameShape(QFrame.Shape.StyledPanel)
        self.thumbnail.setFont(small_font(self.thumbnail.font()))
        mute(self.thumbnail)
        self.name = QLabel("From noise: no picture.")
        self.name.setWordWrap(True)
        self.name.setFont(small_font(self.name.font()))
        self.strength_label = QLabel("Strength")
        self.strength = QSlider(Qt.Orientation.Horizontal)
        self.strength.setRange(1, STRENGTH_STEPS)
        self.strength.setPageStep(10)
        self.strength.setAccessibleName("Strength")
        self.strength.setToolTip(
            "How far the result may move from the picture: the share of the steps that run "
            "(1: every step, from noise; 0.4: only the last 40 %)"
        )
        self.strength_value = QLabel()
        self.strength_value.setMinimumWidth(
            self.strength_value.fontMetrics().horizontalAdvance("0.00") + 4
        )
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setFont(small_font(self.note.font()))
        mute(self.note)
        self.message = QLabel()  # a file refused, in one sentence
        self.message.setObjectName("InputProblem")
        self.message.setWordWrap(True)
        self.message.setFont(small_font(self.message.font()))
        self.message.setStyleSheet("color: #c62828;")
        self.unused = QLabel()
        self.unused.setWordWrap(True)
        self.unused.setFont(small_font(self.unused.font()))
        mute(self.unused)

        header = QHBoxLayout()
        header.setSpacing(4)
        header.addWidget(section("Start from a picture"))
        header.addStretch(1)
        header.addWidget(self.sample_button)
        header.addWidget(self.choose_button)
        picture_row = QHBoxLayout()
        picture_row.setSpacing(8)
        picture_row.addWidget(self.thumbnail, 0, Qt.AlignmentFlag.AlignTop)
        beside = QVBoxLayout()
        beside.setSpacing(4)
        name_row = QHBoxLayout()
        name_row.addWidget(self.name, 1)
        name_row.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignTop)
        beside.addLayout(name_row)
        self.strength_row = QWidget()
        strength_layout = QHBoxLayout(self.strength_row)
        strength_layout.setContentsMargins(0, 0, 0, 0)
        strength_layout.setSpacing(6)
        strength_layout.addWidget(self.strength_label)
        strength_layout.addWidget(self.strength, 1)
        strength_layout.addWidget(self.strength_value)
        beside.addWidget(self.strength_row)
        beside.addStretch(1)
        picture_row.addLayout(beside, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addLayout(picture_row)
        layout.addWidget(self.note)
        layout.addWidget(self.unused)
        layout.addWidget(self.message)

        self.choose_button.clicked.connect(self.choose_file)
        self.sample_button.clicked.connect(model.use_sample)
        self.clear_button.clicked.connect(model.clear)
        self.strength.valueChanged.connect(lambda value: model.set_strength(value / STRENGTH_STEPS))
        model.picture_changed.connect(lambda _picture: self._show_picture())
        model.strength_changed.connect(lambda _strength: self._show_strength())
        for signal in (model.offered_changed, model.note_changed, model.unused_changed):
            signal.connect(lambda _value: self._show_notes())
        model.message_changed.connect(lambda _message: self._show_notes())
        self._show_picture()
        self._show_strength()

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Start from a picture", "", PICTURE_FILTER)
        if path:
            self.model.choose(path)

    # -- drops on the panel itself (the window's other parts: ``PictureDrops``)
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_file(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        path = dropped_file(event)
        if path is not None:
            event.acceptProposedAction()
            self.model.choose(path)

    # -- showing the model
    def _show_picture(self) -> None:
        picture = self.model.picture
        if picture is None:
            self.thumbnail.setPixmap(QPixmap())
            self.thumbnail.setText("Drop a\npicture")
            self.name.setText("From noise: no picture.")
            self.name.setToolTip("")
        else:
            self.thumbnail.setPixmap(thumbnail(picture))
            self.name.setText(self.model.label())
            self.name.setToolTip(f"{picture.path}\nSHA-256 {picture.sha256}")
        self.clear_button.setVisible(picture is not None)
        self._show_notes()

    def _show_strength(self) -> None:
        value = float(self.model.strength)
        self.strength.blockSignals(True)
        self.strength.setValue(round(value * STRENGTH_STEPS))
        self.strength.blockSignals(False)
        self.strength_value.setText(f"{value:.2f}")

    def _show_notes(self) -> None:
        m = self.model
        has_picture = m.picture is not None
        self.strength_row.setVisible(has_picture and m.offered)
        self.note.setText(m.note)
        self.note.setVisible(bool(m.note))
        self.unused.setText(m.unused)
        self.unused.setVisible(bool(m.unused))
        self.message.setText(m.message)
        self.message.setVisible(bool(m.message))
