"""Screenshots of the window's layout at the sizes issue #16 names, with the longest banner.

Runs the real demo engine: demo-turbo at 2 steps (the schedule banner with the most text), one
Generate, then the window at each size. ``--hold`` keeps the window open for an outside capture
(``import -window root``). Usage::

    uv run python -m lab.ui.layout_screenshots OUT_DIR [--hold SECONDS] [--gate magcache]
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
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--size", default="", help="only this size, e.g. 1024x700")
    parser.add_argument(
        "--gate",
        default="",
        help="magcache: the demo at 28 steps under MagCache instead of the turbo banner",
    )
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
    sizes = SIZES
    if args.size:
        w, h = (int(v) for v in args.size.split("x"))
        sizes = ((w, h),)
    window.resize(*sizes[0])
    prefix = "layout"
    if args.gate:
        window.form.select_gate(args.gate)
        prefix = f"layout-{args.gate}"
    else:
        window.form.select_variant("demo-turbo")
        window.form.steps = 2
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)

    def shoot(index: int) -> None:
        if index >= len(sizes):
            QTimer.singleShot(int(args.hold * 1000), window.close)
            return
        w, h = sizes[index]
        window.resize(w, h)

        def grab() -> None:
            path = args.out / f"{prefix}-{w}x{h}.png"
            window.grab().save(str(path))
            print(f"saved {path} ({window.width()}×{window.height()})", flush=True)
            QTimer.singleShot(
                int(args.hold * 1000) if index + 1 < len(sizes) else 0, lambda: shoot(index + 1)
            )

        QTimer.singleShot(600, grab)

    window.run_ended.connect(lambda _status: QTimer.singleShot(300, lambda: shoot(0)))
    QTimer.singleShot(300, window.session.generate)
    app.exec()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
