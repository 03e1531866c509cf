"""Inline banners (not modals): red for errors, yellow for warnings, blue for information.

Shape of krita-ai-diffusion's ``ErrorBox``: the message is elided to a few lines with the full text
in the tooltip, a copy button puts title, message and details on the clipboard, optional action
buttons offer the fix, and a close button dismisses it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QGuiApplication, QResizeEvent, QTextLayout
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.analysis import Notice
from app.ui.theme import BannerColours, banner_colours, is_dark

_ICONS = {"error": "⨯", "warning": "⚠", "info": "ℹ"}
MESSAGE_LINES = 3  # a banner's message is clamped to this many lines until "More" is pressed


class ClampedLabel(QLabel):
    """Word-wrapped text clamped to ``max_lines`` lines at the label's width, the last one elided
    with "…"; ``expanded`` shows it all. ``full_text`` keeps the whole text (the tooltip and the
    copy button have it too)."""

    clamped_changed = Signal(bool)

    def __init__(self, text: str, max_lines: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.full_text = text
        self.max_lines = max_lines
        self.expanded = False
        self.clamped = False
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._relayout(400)

    def set_expanded(self, expanded: bool) -> None:
        self.expanded = expanded
        self._relayout(self.width())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._relayout(event.size().width())

    def _relayout(self, width: int) -> None:
        lines = self._lines(max(width, 80))
        clamped = len(lines) > self.max_lines
        if clamped and not self.expanded:
            head = lines[: self.max_lines - 1]
            rest = self.full_text[len("".join(head)) :].replace("\n", " ")
            last = self.fontMetrics().elidedText(rest, Qt.TextElideMode.ElideRight, width)
            shown = "".join(head) + last
        else:
            shown = self.full_text
        if shown != self.text():
            self.setText(shown)
        if clamped != self.clamped:
            self.clamped = clamped
            self.clamped_changed.emit(clamped)

    def _lines(self, width: int) -> list[str]:
        """The text split where word wrap breaks it at ``width`` (each piece keeps its spaces)."""
        layout = QTextLayout(self.full_text, self.font())
        layout.beginLayout()
        pieces: list[str] = []
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            start, length = line.textStart(), line.textLength()
            pieces.append(self.full_text[start : start + length])
        layout.endLayout()
        return pieces


class Banner(QFrame):
    action_triggered = Signal(object)  # BannerFix
    dismissed = Signal(str)
    copied = Signal(str)

    def __init__(self, notice: Notice, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.notice = notice
        self.setObjectName("Banner")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self._icon = QLabel(_ICONS.get(notice.kind.value, "ℹ"))
        self._icon.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter)
        self._icon.setFixedWidth(18)
        self.title = QLabel(notice.title)
        title_font = self.title.font()
        title_font.setWeight(title_font.Weight.DemiBold)
        self.title.setFont(title_font)
        self.title.setWordWrap(True)
        self.message = ClampedLabel(notice.message, MESSAGE_LINES)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setToolTip(notice.copy_text)
        self.more_button = QToolButton()
        self.more_button.setText("More")
        self.more_button.setToolTip("Show the whole message")
        self.more_button.setVisible(self.message.clamped)
        self.more_button.clicked.connect(self.toggle_more)
        self.message.clamped_changed.connect(
            lambda clamped: self.more_button.setVisible(clamped or self.message.expanded)
        )

        text = QVBoxLayout()
        text.setSpacing(2)
        text.addWidget(self.title)
        text.addWidget(self.message)
        self.action_buttons: list[QPushButton] = []
        if notice.actions:
            row = QHBoxLayout()
            row.setSpacing(6)
            row.setContentsMargins(0, 4, 0, 0)
            for action in notice.actions:
                button = QPushButton(action.label)
                button.setCursor(Qt.CursorShape.PointingHandCursor)
                button.clicked.connect(
                    lambda _=False, fix=action.fix: self.action_triggered.emit(fix)
                )
                row.addWidget(button)
                self.action_buttons.append(button)
            row.addStretch(1)
            text.addLayout(row)

        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the full message (with details) to the clipboard")
        self.copy_button.clicked.connect(self.copy)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.clicked.connect(lambda: self.dismissed.emit(self.notice.key))
        buttons = QVBoxLayout()
        buttons.setSpacing(2)
        top = QHBoxLayout()
        top.setSpacing(2)
        top.addWidget(self.copy_button)
        top.addWidget(self.close_button)
        buttons.addLayout(top)
        buttons.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignRight)
        buttons.addStretch(1)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        layout.setSpacing(10)
        layout.addWidget(self._icon)
        layout.addLayout(text, 1)
        layout.addLayout(buttons)
        self._styling = False
        self._dark: bool | None = None
        self._apply_colours()

    def toggle_more(self) -> None:
        expanded = not self.message.expanded
        self.message.set_expanded(expanded)
        self.more_button.setText("Less" if expanded else "More")
        self.more_button.setToolTip("Show less" if expanded else "Show the whole message")

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.notice.copy_text)
        self.copied.emit(self.notice.copy_text)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and not self._styling:
            self._apply_colours()
        super().changeEvent(event)

    def _apply_colours(self) -> None:
        dark = is_dark(QGuiApplication.palette())
        if dark == self._dark:
            return
        self._dark = dark
        self._styling = True  # setStyleSheet sends a PaletteChange of its own
        try:
            self._set_style(banner_colours(self.notice.kind.value, dark))
        finally:
            self._styling = False

    def _set_style(self, c: BannerColours) -> None:
        self.setStyleSheet(
            f"""
            QFrame#Banner {{ background: {c.background}; border: 1px solid {c.border};
                             border-radius: 8px; }}
            QFrame#Banner QLabel {{ color: {c.text}; background: transparent; border: none; }}
            QFrame#Banner QToolButton {{ color: {c.text}; border: none; padding: 2px 6px;
                                         border-radius: 4px; background: transparent; }}
            QFrame#Banner QToolButton:hover {{ background: {c.border}; }}
            QFrame#Banner QPushButton {{ color: {c.text}; border: 1px solid {c.accent};
                                         border-radius: 5px; padding: 3px 10px;
                                         background: transparent; }}
            QFrame#Banner QPushButton:hover {{ background: {c.border}; }}
            """
        )
        self._icon.setStyleSheet(f"color: {c.accent}; font-weight: 700;")
        self.copy_button.setStyleSheet("")


class BannerStack(QWidget):
    """Shows a list of notices; rebuilt when the list changes."""

    action_triggered = Signal(object)  # BannerFix
    dismissed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._notices: tuple[Notice, ...] = ()
        self.banners: list[Banner] = []
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.hide()

    def set_notices(self, notices: tuple[Notice, ...]) -> None:
        if notices == self._notices:
            return
        self._notices = notices
        for banner in self.banners:
            banner.setParent(None)
            banner.deleteLater()
        self.banners = []
        for notice in notices:
            banner = Banner(notice, self)
            banner.action_triggered.connect(self.action_triggered)
            banner.dismissed.connect(self.dismissed)
            self._layout.addWidget(banner)
            self.banners.append(banner)
        self.setVisible(bool(notices))

    def banner(self, key: str) -> Banner | None:
        return next((b for b in self.banners if b.notice.key == key), None)
