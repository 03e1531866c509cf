"""The README's ``resources/screenshots/main-window.png``: the window after one Generate with the
default inputs (demo, the first prompt, seed 42, 28 steps, threshold 0.1) at 1320×860, on the real
demo engine. The speedup card shows what this host measured: take it on a quiet host (a loaded
shared one measured 0.67× with 10 of 28 skipped). Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.main_window_screenshot OUT.png
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SIZE = (1320, 860)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does

    from PySide6.QtWidgets import QApplication

    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.resize(*SIZE)
    window.show()
    ended: list[object] = []
    window.run_ended.connect(ended.append)
    assert window.session.generate() is not None, window.run.error
    while not ended:
        app.processEvents()
        time.sleep(0.01)
    settle = time.monotonic() + 1.0
    while time.monotonic() < settle:
        app.processEvents()
        time.sleep(0.01)
    run = window.run
    print(f"{run.skips} skipped, SSIM {run.ssim}, {run.speedup}× ({run.speedup_label})")
    window.grab().save(str(args.out))
    window.close()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
