"""The README's ``resources/screenshots/img2img-window.png``: the window after one Generate from
the shipped sketch (demo, "a red circle on a blue background", seed 5, 28 steps, strength 0.6,
TeaCache at the demo's default threshold) at 1320×860, on the real demo engine: the picture in
the sidebar's panel with its strength, the vanilla and gated results side by side, and the
timeline with the 11 steps strength left out marked "not run (strength)". Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.img2img_screenshot OUT.png
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SIZE = (1320, 860)
PROMPT = "a red circle on a blue background"
SEED, STRENGTH = 5, 0.6


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
    form, inputs = window.form, window.studio.inputs
    form.select_variant("demo")
    form.prompt, form.seed = PROMPT, SEED
    assert inputs.use_sample(), inputs.message
    inputs.set_strength(STRENGTH)
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
