"""Screenshots of the window after a target-quality search (the panel under the threshold, the
list of thresholds tried, the slider set), at the sizes issue #16 names. Real demo engine, 12
steps, the issue's lost-circle prompt and seed, starting at threshold 0.1. Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.quality_screenshots OUT_DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

SIZES = ((1024, 700), (1600, 1000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.resize(*SIZES[0])
    window.form.select_variant("demo")
    window.form.steps = 12  # short: a search runs several passes on a shared CPU
    window.form.prompt = "two red circles and a blue star on a yellow background"
    window.form.seed = 701103987
    window.form.threshold = 0.1
    window.quality_panel.toggle.setChecked(True)
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = list(SIZES)

    def shoot() -> None:
        if not sizes:
            window.close()
            app.quit()
            return
        w, h = sizes.pop(0)
        window.resize(w, h)
        window.controls.form_scroll.ensureWidgetVisible(window.quality_panel)

        def grab() -> None:
            path = args.out / f"target-quality-{w}x{h}.png"
            window.grab().save(str(path))
            print(f"saved {path}: {window.quality.note}", flush=True)
            shoot()

        QTimer.singleShot(500, grab)

    def ended(status: object) -> None:
        print(f"run {status}", flush=True)
        QTimer.singleShot(0, shoot)

    window.run_ended.connect(ended)
    window.quality.note_changed.connect(lambda note: print(note, flush=True))
    window.run.phase_changed.connect(
        lambda phase: print(phase, flush=True) if "step 1 of" in str(phase) else None
    )
    QTimer.singleShot(0, lambda: print(f"started {window.session.generate()}", flush=True))
    QTimer.singleShot(1_200_000, app.quit)  # never hang
    app.exec()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
