"""Live step previews in the window, with the real engine on the embedded demo.

Signal-based: the image panes are watched through ``ComparePanel.set_images`` (a frame counts as
live when the pass's own image had not arrived yet), the timeline's hover through the ToolTip
event it handles. The preview cadence is set to every frame here so a short CPU run shows several;
the window's own cadence is RUN_TIMELINE_INTERVAL_MS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from ui_support import image_rgb

import app.ui.refresh as refresh_module
from app.engine.events import Pass
from app.gate import Decision
from app.ui.job_slot import JobStatus
from app.ui.step_previews import fit_preview
from app.ui.window import MainWindow

pytestmark = [pytest.mark.slow]
REAL_TIMEOUT_MS = 300_000  # CPU MLX on a shared 2-core machine; the run itself takes seconds
STEPS = 16


@pytest.fixture
def window(
    make_real_window: Callable[[int], MainWindow], monkeypatch: pytest.MonkeyPatch
) -> MainWindow:
    monkeypatch.setitem(refresh_module.SLOW_REFRESHES, "previews", 0)
    win = make_real_window(STEPS)
    win.form.threshold = 0.3  # loose: this schedule skips (asserted below)
    return win


def test_panes_show_steps_forming_and_the_timeline_shows_each_steps_thumbnail(
    qtbot: QtBot, window: MainWindow
) -> None:
    live: dict[str, list[np.ndarray]] = {"gated": [], "vanilla": []}
    shown = window.compare.set_images

    def watch(gated: Any, vanilla: Any, *args: Any, **kwargs: Any) -> None:
        if gated is not None and window.run.gated_image is None:
            live["gated"].append(gated)
        if vanilla is not None and window.run.vanilla_image is None:
            live["vanilla"].append(vanilla)
        shown(gated, vanilla, *args, **kwargs)

    window.compare.set_images = watch  # type: ignore[method-assign]
    with qtbot.waitSignal(window.run_ended, timeout=REAL_TIMEOUT_MS) as blocker:
        assert window.session.generate() is not None
    assert blocker.args is not None and blocker.args[0] is JobStatus.finished, window.run.error
    run = window.run
    assert run.request is not None and run.request.previews
    assert run.skips is not None and run.skips > 0  # engagement: skipped steps were previewed

    # Both panes received frames while their pass ran, at the image's size.
    for which in ("gated", "vanilla"):
        assert live[which], f"no live frame in the {which} pane"
        assert all(frame.shape == (128, 128, 3) for frame in live[which])
    # The panes now show the passes' images, and the last step's preview is that image (demo).
    thumbnails: list[np.ndarray | None] = list(run.gated_thumbnails)
    last, final = thumbnails[-1], run.gated_image
    assert last is not None and final is not None and np.array_equal(last, final)
    assert all(t is not None for t in (*thumbnails, *run.vanilla_thumbnails))

    # Hover a skipped step: the popup shows its thumbnail, framed as skipped.
    timeline = window.timeline
    skipped = next(
        i for i, s in enumerate(run.gated_steps) if s is not None and s.decision is Decision.skipped
    )
    centre = timeline.cell_rect(Pass.gated, skipped).center().toPoint()
    event = QHelpEvent(QEvent.Type.ToolTip, centre, timeline.mapToGlobal(centre))
    QApplication.sendEvent(timeline, event)
    popup = timeline.thumbnail_popup
    assert popup.isVisible()
    assert popup.decision is Decision.skipped
    assert f"Step {skipped + 1} of {STEPS}" in popup.caption.text()
    assert "Skipped" in popup.caption.text()
    pixmap = popup.image.pixmap()
    assert not pixmap.isNull() and max(pixmap.width(), pixmap.height()) > 0
    # …and the popup's picture is that step's preview, not another step's.
    shown_rgb = image_rgb(pixmap.toImage())
    height, side = shown_rgb.shape[:2]
    hovered = thumbnails[skipped]
    assert hovered is not None
    expected = fit_preview(hovered, height, side)
    assert np.array_equal(shown_rgb, expected)

    # Leaving the timeline hides it; a cell without a preview falls back to the plain tooltip.
    QApplication.sendEvent(timeline, QEvent(QEvent.Type.Leave))
    assert not popup.isVisible()
    outside = QPoint(2, 2)  # the gutter: no step
    QApplication.sendEvent(
        timeline, QHelpEvent(QEvent.Type.ToolTip, outside, timeline.mapToGlobal(outside))
    )
    assert not popup.isVisible()


def test_a_preview_fills_the_pane_only_while_the_run_goes() -> None:
    from app.engine.request import make_request
    from app.ui.step_previews import live_image

    request = make_request("flux2-klein-4b", "a cat", size=(256, 128))
    preview = np.arange(16 * 32 * 3, dtype=np.uint8).reshape(16, 32, 3)
    shown = live_image(None, preview, request, busy=True)
    assert shown is not None and shown.shape == (128, 256, 3)
    assert np.array_equal(shown[::8, ::8], preview)  # nearest neighbour: 8 × 8 blocks
    final = np.zeros((128, 256, 3), dtype=np.uint8)
    assert live_image(final, preview, request, busy=True) is final  # the image wins
    assert live_image(None, preview, request, busy=False) is None  # cancelled: no half picture
