"""Screenshots of the plain summary line and the Details disclosure after one demo generation (the
window's first prompt, demo at 28 steps), at 1600×1000 and 1024×700, Details closed and open.
Usage::

    uv run python -m lab.ui.summary_screenshots OUT_DIR
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
    args = parser.parse_args(argv)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.defaults import DEFAULT_PROMPT
    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.resize(*SIZES[0])
    window.form.select_variant("demo")
    window.form.prompt = DEFAULT_PROMPT
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    shots = [(size, open_) for open_ in (False, True) for size in SIZES]

    def shoot(index: int) -> None:
        if index >= len(shots):
            QTimer.singleShot(0, window.close)
            return
        (w, h), open_ = shots[index]
        window.resize(w, h)
        window.run_details.set_expanded(open_)

        def grab() -> None:
            name = f"summary-{w}x{h}-{'details' if open_ else 'plain'}.png"
            window.grab().save(str(args.out / name))
            print(f"saved {args.out / name}", flush=True)
            shoot(index + 1)

        QTimer.singleShot(600, grab)

    window.run.phase_changed.connect(lambda phase: print(phase, flush=True))
    window.run_ended.connect(lambda _status: QTimer.singleShot(300, lambda: shoot(0)))
    QTimer.singleShot(300, window.session.generate)
    app.exec()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
