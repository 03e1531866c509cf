"""Screenshots of the window's three images (TeaCache, vanilla, difference) after one demo
generation at its defaults (the prompt, seed 42, 28 steps, TeaCache at its default threshold),
zoomed to 100 % and 200 % (one image pixel on one, and on 2×2, screen pixels; ``demo-zoom-100.png``
and ``demo-zoom-200.png``, each image centred in its view), as a user would zoom in to look for a
patch grid. The whole window for the README is ``lab.ui.main_window_screenshot``'s. Real demo
engine, a real window: run it under a display (Xvfb)::

    Xvfb :58 -screen 0 1600x1000x24 &
    DISPLAY=:58 uv run python -m lab.ui.zoom_screenshots resources/screenshots
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

SIZE = (1600, 1000)
ZOOMS = (1, 2)  # screen pixels per image pixel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.resize(*SIZE)
    window.form.select_variant("demo")
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    panel = window.results.compare

    def save(widget: object, name: str) -> None:
        path = args.out / name
        widget.grab().save(str(path))  # type: ignore[attr-defined]
        print(f"saved {path}", flush=True)

    def zoom(index: int) -> None:
        if index >= len(ZOOMS):
            window.close()
            return
        factor = ZOOMS[index]
        view = panel.views[0]
        width, height = view.width() / factor, view.height() / factor
        # The image centred, one image pixel on factor × factor screen pixels.
        centre = 64.0
        panel.gated_box.setRange(
            xRange=(centre - width / 2, centre + width / 2),
            yRange=(centre - height / 2, centre + height / 2),
            padding=0.0,
        )

        def grab() -> None:
            save(panel.view, f"demo-zoom-{100 * factor}.png")
            zoom(index + 1)

        QTimer.singleShot(600, grab)

    window.run_ended.connect(lambda _status: QTimer.singleShot(600, lambda: zoom(0)))
    QTimer.singleShot(300, window.session.generate)
    app.exec()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
