"""Screenshots of live step previews (issue #20): the window mid-run, with the panes showing the
running pass's latest step preview, and the timeline's thumbnail popup over a skipped step.

Runs the real demo engine (28 steps unless told) once per size. Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.preview_screenshots OUT_DIR \
        [--steps N] [--size 1024x700]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

SIZES = ((1600, 1000), (1024, 700))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=28)
    parser.add_argument("--size", default="", help="only this size, e.g. 1024x700")
    args = parser.parse_args(argv)
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does
    sizes = SIZES
    if args.size:
        w, h = (int(v) for v in args.size.split("x"))
        sizes = ((w, h),)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))

    from PySide6.QtCore import QEvent, QTimer
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication

    from app.engine.events import Pass
    from app.gate import Decision
    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.form.select_variant("demo")
    window.form.steps = args.steps
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    state = {"size": 0, "mid": False}

    def start() -> None:
        w, h = sizes[state["size"]]
        window.resize(w, h)
        state["mid"] = False
        window.form.seed = 7 + state["size"]  # a fresh vanilla pass each time
        if window.session.generate() is None:  # the engine thread is still winding down
            QTimer.singleShot(200, start)

    def on_thumbnails(row: object) -> None:
        done = sum(t is not None for t in row)  # type: ignore[attr-defined]
        if not state["mid"] and window.run.active_pass is Pass.gated and done >= args.steps // 3:
            state["mid"] = True
            w, h = sizes[state["size"]]
            QTimer.singleShot(600, lambda: window.grab().save(str(args.out / f"mid-{w}x{h}.png")))

    def on_ended(_status: object) -> None:
        w, h = sizes[state["size"]]
        timeline = window.timeline
        steps = window.run.gated_steps
        index = next(
            (i for i, s in enumerate(steps) if s is not None and s.decision is Decision.skipped), 1
        )
        centre = timeline.cell_rect(Pass.gated, index).center().toPoint()
        event = QHelpEvent(QEvent.Type.ToolTip, centre, timeline.mapToGlobal(centre))
        QApplication.sendEvent(timeline, event)
        timeline.thumbnail_popup.grab().save(str(args.out / f"popup-{w}x{h}.png"))
        window.grab().save(str(args.out / f"done-{w}x{h}.png"))
        QApplication.sendEvent(timeline, QEvent(QEvent.Type.Leave))
        state["size"] += 1
        if state["size"] < len(sizes):
            QTimer.singleShot(200, start)
        else:
            window.shutdown()
            app.quit()

    window.run.gated_thumbnails_changed.connect(on_thumbnails)
    window.run_ended.connect(on_ended)
    QTimer.singleShot(200, start)
    app.exec()
    print(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
