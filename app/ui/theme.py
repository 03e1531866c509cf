"""Colours and type that follow the system palette (light and dark), plus the decision palette.

Decision colours are Okabe–Ito (distinguishable with the common colour-vision deficiencies) and
every decision also has a shape cue in the timeline (hatching, a mark), so colour is never the
only signal.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from app.gate import Decision

DECISION_COLOURS: dict[Decision, str] = {
    Decision.computed: "#0072B2",  # blue
    Decision.forced: "#56B4E9",  # sky blue, hatched: computed because the step is protected
    Decision.skipped: "#E69F00",  # orange: the cached residual was reused
    Decision.numerical_miss: "#D55E00",  # vermillion, with a cross
}
DECISION_LABELS: dict[Decision, str] = {
    Decision.computed: "Computed",
    Decision.forced: "First/last",
    Decision.skipped: "Skipped (reused)",
    Decision.numerical_miss: "Unmeasured",
}
DECISION_HELP: dict[Decision, str] = {
    Decision.computed: "computed in full: the picture had changed too much since the last "
    "computed step to reuse its result",
    Decision.forced: "computed in full: the first and last steps always are",
    Decision.skipped: "not computed: the picture was barely changing, so the last computed "
    "result was reused",
    Decision.numerical_miss: "computed in full: the change could not be measured (not a finite "
    "number), so the gate did not risk a skip",
}
# A step a run from a picture never runs (strength starts the loop later): no decision at all.
NOT_RUN_LABEL = "Not run (strength)"
NOT_RUN_HELP = (
    "never run: the run starts from the picture, noised to a later step, so strength leaves the "
    "first steps out of both passes"
)
BAND_COLOUR = "#009E73"  # bluish green: the thresholds where skipping begins
THRESHOLD_COLOUR = "#CC79A7"  # reddish purple


def is_dark(palette: QPalette | None = None) -> bool:
    palette = palette or QGuiApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def muted(widget: QWidget | None = None) -> QColor:
    """Secondary text: the text colour blended halfway towards the background."""
    palette = widget.palette() if widget is not None else QGuiApplication.palette()
    text = palette.color(QPalette.ColorRole.WindowText)
    window = palette.color(QPalette.ColorRole.Window)
    return blend(text, window, 0.45)


def mute(widget: QWidget) -> QWidget:
    """Secondary text that follows the theme live (light/dark switches need no restyling)."""
    widget.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return widget


def blend(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


@dataclass(frozen=True)
class BannerColours:
    background: str
    border: str
    text: str
    accent: str


def banner_colours(kind: str, dark: bool) -> BannerColours:
    if kind == "error":
        return (
            BannerColours("#3d1e1c", "#7a3330", "#f6d5d2", "#ff7b72")
            if dark
            else BannerColours("#fdeceb", "#f1b8b4", "#6e1a14", "#c9372c")
        )
    if kind == "warning":
        return (
            BannerColours("#3a3116", "#6f5a1c", "#f5e6b8", "#e3b341")
            if dark
            else BannerColours("#fff8e1", "#f0d489", "#5c4300", "#b58100")
        )
    return (
        BannerColours("#1c2b3a", "#2f4c6b", "#d3e4f5", "#58a6ff")
        if dark
        else BannerColours("#eef5fd", "#bcd6f2", "#17395c", "#1f6feb")
    )


def caption_font(base: QFont | None = None) -> QFont:
    font = QFont(base or QApplication.font())
    size = font.pointSizeF()
    if size > 0:
        font.setPointSizeF(max(8.0, size - 1.5))
    font.setWeight(QFont.Weight.DemiBold)
    font.setCapitalization(QFont.Capitalization.AllUppercase)
    font.setLetterSpacing(QFont.SpacingType.PercentageSpacing, 105)
    return font


def small_font(base: QFont | None = None) -> QFont:
    font = QFont(base or QApplication.font())
    size = font.pointSizeF()
    if size > 0:
        font.setPointSizeF(max(8.0, size - 1.0))
    return font


def value_font(base: QFont | None = None) -> QFont:
    font = QFont(base or QApplication.font())
    size = font.pointSizeF()
    if size > 0:
        font.setPointSizeF(size + 4.0)
    font.setWeight(QFont.Weight.DemiBold)
    return font


def monospace_digits(font: QFont) -> QFont:
    font = QFont(font)
    font.setFeature(QFont.Tag("tnum"), 1)  # tabular figures: live numbers do not jitter
    return font


def app_stylesheet(*, native_buttons: bool = False) -> str:
    """Only structural touches; colours come from the palette so dark mode just works. On macOS
    the default button is already the accent-coloured one, so it is left native there."""
    primary = (
        ""
        if native_buttons
        else """
    QPushButton#Primary {
        background: palette(highlight);
        color: palette(highlighted-text);
        border: 1px solid palette(highlight);
        border-radius: 6px;
        padding: 6px 18px;
        font-weight: 600;
    }
    QPushButton#Primary:disabled {
        background: palette(midlight);
        color: palette(mid);
        border-color: palette(midlight);
    }
    """
    )
    return (
        primary
        + """
    QFrame#Card {
        background: palette(base);
        border: 1px solid palette(midlight);
        border-radius: 10px;
    }
    QFrame#Sidebar {
        background: palette(window);
    }
    QPlainTextEdit#Prompt {
        border: 1px solid palette(mid);
        border-radius: 6px;
        padding: 4px;
        background: palette(base);
    }
    QToolButton#Flat {
        border: none;
        padding: 2px 4px;
    }
    """
    )
