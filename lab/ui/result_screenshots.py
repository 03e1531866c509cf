"""Screenshots of the result side as issue #27 items 18-28 describe it, on the real demo engine.

In one window (demo, 28 steps, seed 42): the gate plot after runs at threshold 0.35 and 0.99 (its
labels at a large y range), the window at 1024×700 (the plots' height, the legend), the banner of
demo-turbo at 0.1 (its fix buttons), the comparison view with its default thresholds, and the
main window with Details open after two comparison picks. Each PNG is named for what it shows.
Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.result_screenshots OUT_DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TIMEOUT_S = 600.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--gate", default="", help="the gate to run (default: the variant's)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does

    from PySide6.QtWidgets import QApplication, QWidget

    from app.ui.job_slot import JobStatus
    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    def wait(condition: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                raise TimeoutError("the window did not get there in time")
            app.processEvents()
            time.sleep(0.01)

    def settle(seconds: float = 0.6) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)

    def shoot(widget: QWidget, name: str) -> None:
        settle()
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        print(f"saved {path} ({widget.width()}×{widget.height()})", flush=True)

    def generate() -> None:
        ended: list[object] = []
        window.run_ended.connect(ended.append)
        assert window.session.generate() is not None, window.run.error
        wait(lambda: bool(ended))
        window.run_ended.disconnect(ended.append)
        run = window.run
        print(
            f"  {run.request.variant_id if run.request else '?'} t={window.form.threshold:g}: "
            f"{run.skips} skipped, SSIM {run.ssim}",
            flush=True,
        )

    window.resize(1600, 1000)
    window.show()
    window.form.select_variant("demo")
    if args.gate:
        window.form.select_gate(args.gate)
    window.form.steps = 28
    window.form.seed = 42
    for threshold in (0.35, 0.99):
        window.form.threshold = threshold
        generate()
        shoot(window, f"plot-t{threshold:g}-1600x1000")
        shoot(window.results.gate_plot, f"plot-t{threshold:g}-gate-plot")
    window.resize(1024, 700)
    shoot(window, "window-1024x700")
    window.resize(1600, 1000)

    window.form.select_variant("demo-turbo")
    window.form.threshold = 0.1
    shoot(window, "turbo-banner-before-a-run")
    generate()
    shoot(window, "turbo-banner-after-a-run")
    window.form.select_variant("demo")

    dialog = window.show_comparison()
    dialog.resize(1600, 1000)
    dialog.fill_defaults()
    print(f"  defaults: {dialog.thresholds.text()}", flush=True)
    dialog.start()
    wait(lambda: window.comparer.status is JobStatus.finished)
    shoot(dialog, "compare-1600x1000")
    window.results.run_details.set_expanded(True)
    for index in (len(window.comparer.rows) - 1, 1):
        window.comparer.pick(index)
        shoot(window, f"details-after-pick-{index}")
    window.resize(1024, 700)
    for index in (len(window.comparer.rows) - 1, 2):
        window.comparer.pick(index)
        shoot(window, f"details-after-pick-{index}-1024x700")
    window.resize(1600, 1000)
    dialog.close()
    window.close()
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
