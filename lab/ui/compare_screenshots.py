"""Screenshots of the threshold comparison view, after a real comparison on the demo model.

Runs the real demo engine offscreen-capable: demo, 28 steps, seed 42, the view's default
thresholds (or ``--thresholds``), then grabs the comparison view at each size. Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.compare_screenshots OUT_DIR
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
    parser.add_argument("--thresholds", default="", help="e.g. 0.05,0.1,0.2,0.3 (else defaults)")
    parser.add_argument("--steps", type=int, default=28)
    args = parser.parse_args(argv)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.ui.job_slot import JobStatus
    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.form.select_variant("demo")
    window.form.steps = args.steps
    window.form.seed = 42
    window.show()
    dialog = window.show_comparison()
    if args.thresholds:
        dialog.thresholds.setText(args.thresholds)
    args.out.mkdir(parents=True, exist_ok=True)
    comparer = window.comparer

    def shoot(index: int) -> None:
        if index >= len(SIZES):
            window.close()
            return
        w, h = SIZES[index]
        dialog.resize(w, h)

        def grab() -> None:
            path = args.out / f"compare-{w}x{h}.png"
            dialog.grab().save(str(path))
            print(f"saved {path} ({dialog.width()}×{dialog.height()})", flush=True)
            QTimer.singleShot(300, lambda: shoot(index + 1))

        QTimer.singleShot(600, grab)

    def on_change() -> None:
        if os.environ.get("COMPARE_DEBUG"):
            print(comparer.status, comparer.progress, comparer.message, flush=True)
        if comparer.status in (JobStatus.finished, JobStatus.failed):
            comparer.listeners.remove(on_change)
            if comparer.status is JobStatus.failed:
                print(f"comparison failed: {comparer.message}", file=sys.stderr)
            for row in comparer.rows:
                if row is not None:
                    print(
                        f"t={row.threshold:g}: {row.skips} of {row.steps} skipped, "
                        f"SSIM {row.ssim}, {row.gated_seconds:.3f} s, "
                        f"{row.speedup:.2f}× ({row.speedup_label})"
                    )
            print(f"hardware: {comparer.hardware}")
            QTimer.singleShot(1000, lambda: shoot(0))  # after the saved-entry event

    comparer.listeners.append(on_change)
    QTimer.singleShot(500, lambda: dialog.start() or print(comparer.message, file=sys.stderr))
    app.exec()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
