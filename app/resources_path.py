"""Where the read-only files shipped with the app (``resources/``) live.

From a source tree they sit beside the ``app`` package. In a PyInstaller bundle the spec collects
them as ``resources/`` under ``sys._MEIPASS`` (``_internal/`` on Linux; ``Contents/Frameworks``
on macOS, where PyInstaller links the folder to ``Contents/Resources/resources``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def resources_dir() -> Path:
    bundle_root = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle_root:
        return Path(bundle_root) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


RESOURCES_DIR = resources_dir()
DEMO_DIR = RESOURCES_DIR / "demo"
