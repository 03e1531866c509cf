"""Start the window: normally, or headless for ``--screenshot FILE`` and ``--smoke-test``.

Both headless modes run one demo generation with the real engine (``app.engine.engine.Engine``,
imported lazily on the engine thread) in a throw-away user folder, so they never touch the user's
history or settings and always start from first-run defaults.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from app.blas import preload_openblas

log = logging.getLogger(__name__)
HEADLESS_TIMEOUT_MS = 600_000
SCREENSHOT_SIZE = (1320, 860)


def default_engine_factory():  # -> EngineFactory (typed lazily: importing it loads Qt)
    """The real engine, built on the engine thread (MLX streams are thread-local)."""

    def factory():
        from app.engine.engine import Engine

        return Engine()

    return factory


def launch(
    screenshot: str | None = None,
    smoke_test: bool = False,
    *,
    engine_factory=None,
    argv: Sequence[str] | None = None,
) -> int:
    headless = bool(screenshot) or smoke_test
    if not headless and (problem := linux_display_problem()):
        print(f"teacache-studio: {problem}", file=sys.stderr)
        return 1
    if smoke_test or (headless and sys.platform.startswith("linux") and not _has_display()):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if headless and not os.environ.get("TEACACHE_STUDIO_HOME"):
        os.environ["TEACACHE_STUDIO_HOME"] = tempfile.mkdtemp(prefix="teacache-studio-")
    os.environ.setdefault("QT_API", "pyside6")
    reserve_a_core_for_the_gui()
    preload_openblas()  # before anything imports MLX
    configure_logging()

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    configure_application(app)

    from app.ui.window import open_window

    window = open_window(engine_factory or default_engine_factory())
    restore_hooks = install_excepthooks(window)
    try:
        if not headless:
            window.show()
            code = app.exec()
            window.shutdown()
            return _exit_code(code)
        return _run_headless(app, window, screenshot)
    finally:
        restore_hooks()


# The xcb platform plugin's system libraries that a minimal Debian/Ubuntu lacks. Without them Qt
# aborts the process with a misleading message about xcb-cursor0.
_XCB_LIBRARIES = {
    "xcb-icccm": "libxcb-icccm4",
    "xcb-keysyms": "libxcb-keysyms1",
    "xcb-cursor": "libxcb-cursor0",
    "xkbcommon-x11": "libxkbcommon-x11-0",
}


def linux_display_problem() -> str | None:
    """Why a real window cannot open on this Linux machine, in one sentence, or None."""
    if not sys.platform.startswith("linux"):
        return None
    platform_name = os.environ.get("QT_QPA_PLATFORM", "")
    if platform_name and not platform_name.startswith("xcb"):
        return None  # offscreen, wayland, vnc...: the user chose
    if not _has_display():
        return (
            "no display to open a window on (DISPLAY is not set); run it in a desktop "
            "session, or use --screenshot FILE / --smoke-test, which need none"
        )
    if os.environ.get("WAYLAND_DISPLAY") and not os.environ.get("DISPLAY"):
        return None
    import ctypes.util

    missing = [pkg for lib, pkg in _XCB_LIBRARIES.items() if ctypes.util.find_library(lib) is None]
    if missing:
        return (
            "Qt's X11 window support needs system libraries that are missing: "
            f"sudo apt-get install {' '.join(missing)}"
        )
    return None


def reserve_a_core_for_the_gui() -> None:
    """On Linux MLX runs on the CPU through OpenBLAS, whose worker threads spin on every core:
    with all cores taken the GUI thread is starved (stalls of seconds measured on a 2-core
    machine, against ≤ 32 ms with one core left free; see
    ``lab.bench.gui_responsiveness``). Leave one
    core to the GUI unless the user chose a thread count. Must run before OpenBLAS is loaded."""
    if not sys.platform.startswith("linux"):
        return
    cores = os.cpu_count() or 1
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(max(1, cores - 1)))


def configure_logging() -> None:
    """Console at INFO, and a rotating file in the user log folder with every traceback."""
    from logging.handlers import RotatingFileHandler

    from app import paths

    root = logging.getLogger()
    if any(isinstance(h, RotatingFileHandler) for h in root.handlers):
        return
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        folder = paths.log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            folder / "teacache-studio.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
    except OSError as exc:
        log.warning("no log file: %s", exc)
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


def install_excepthooks(window) -> Callable[[], None]:  # MainWindow, imported lazily
    """An exception escaping a Qt slot (GUI thread) or a thread is logged and shown inline as a
    copyable error banner instead of vanishing into the console."""
    import threading
    import traceback

    def show(exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        log.error("unhandled exception\n%s", details)
        with contextlib.suppress(RuntimeError):  # the window may be gone already
            window.run.fail_locally(f"{exc_type.__name__}: {exc}", details)

    def on_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        trace = "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        )
        log.error("unhandled exception in thread %s\n%s", getattr(args.thread, "name", "?"), trace)

    previous = (sys.excepthook, threading.excepthook)
    sys.excepthook = show
    threading.excepthook = on_thread

    def restore() -> None:
        sys.excepthook, threading.excepthook = previous

    return restore


def configure_application(app) -> None:
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app import __version__
    from app.paths import resources_dir
    from app.ui.theme import app_stylesheet

    QApplication.setApplicationName("TeaCache Studio")
    QApplication.setOrganizationName("TeaCache Studio")
    QApplication.setApplicationVersion(__version__)
    icon = resources_dir() / "icons" / "teacache-studio.png"  # drawn by packaging/make_icon.py
    if icon.is_file():  # every window's icon; also the Dock's when run from source on macOS
        app.setWindowIcon(QIcon(str(icon)))
    if sys.platform != "darwin":
        app.setStyle("Fusion")  # the native look on macOS; a clean, palette-driven one elsewhere
    app.setStyleSheet(app_stylesheet(native_buttons=sys.platform == "darwin"))


def _run_headless(app, window, screenshot: str | None) -> int:
    from PySide6.QtCore import QTimer

    from app.ui.defaults import DEFAULT_PROMPT
    from app.ui.job_slot import JobStatus
    from app.variants import DEFAULT_VARIANT

    outcome: dict[str, object] = {"code": 1}

    def finish(status: object) -> None:
        if status is JobStatus.finished:
            outcome["code"] = 0
            if screenshot:
                app.processEvents()
                path = Path(screenshot)
                path.parent.mkdir(parents=True, exist_ok=True)
                if not window.grab().save(str(path)):
                    print(f"teacache-studio: could not write {path}", file=sys.stderr)
                    outcome["code"] = 1
                else:
                    print(f"saved {path} ({window.width()}×{window.height()})")
            else:
                run = window.run
                print(
                    f"smoke test: ok · {run.skips} of {len(run.gated_steps)} steps skipped · "
                    f"SSIM {run.ssim if run.ssim is not None else float('nan'):.4f}"
                )
        else:
            error = window.run.error
            detail = f": {error.message}" if error is not None else ""
            print(f"teacache-studio: the demo generation {status}{detail}", file=sys.stderr)
        QTimer.singleShot(0, window.close)

    def timeout() -> None:
        print("teacache-studio: the demo generation did not finish in time", file=sys.stderr)
        window.session.cancel()
        QTimer.singleShot(0, window.close)

    window.run_ended.connect(finish)
    window.resize(*SCREENSHOT_SIZE)
    window.form.select_variant(DEFAULT_VARIANT)  # the demo: built in, draws DEFAULT_PROMPT
    window.form.prompt = DEFAULT_PROMPT
    window.show()
    QTimer.singleShot(HEADLESS_TIMEOUT_MS, timeout)

    def start() -> None:
        if window.session.generate() is None:
            print("teacache-studio: could not start the demo generation", file=sys.stderr)
            QTimer.singleShot(0, window.close)

    QTimer.singleShot(0, start)
    app.exec()
    window.shutdown()
    from app.ui.worker import STRAGGLERS

    code = int(outcome["code"])  # type: ignore[arg-type]
    if STRAGGLERS:  # a thread that would not stop: Qt would abort on exit, so leave hard
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 1)
    return code


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _exit_code(code: int) -> int:
    from app.ui.worker import STRAGGLERS

    if STRAGGLERS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
