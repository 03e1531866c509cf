"""Where the app keeps user data, and where its shipped read-only resources are.

``TEACACHE_STUDIO_HOME`` overrides every location (tests, portable use).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "TeaCache Studio"
APP_AUTHOR = "TeaCache Studio"


def _override() -> Path | None:
    home = os.environ.get("TEACACHE_STUDIO_HOME")
    return Path(home) if home else None


def data_dir() -> Path:
    root = _override()
    return root / "data" if root else Path(platformdirs.user_data_dir(APP_NAME, APP_AUTHOR))


def config_dir() -> Path:
    root = _override()
    return root / "config" if root else Path(platformdirs.user_config_dir(APP_NAME, APP_AUTHOR))


def cache_dir() -> Path:
    root = _override()
    return root / "cache" if root else Path(platformdirs.user_cache_dir(APP_NAME, APP_AUTHOR))


def log_dir() -> Path:
    root = _override()
    return root / "logs" if root else Path(platformdirs.user_log_dir(APP_NAME, APP_AUTHOR))


def history_dir() -> Path:
    return data_dir() / "history"


def settings_file() -> Path:
    return config_dir() / "settings.json"


def resources_dir() -> Path:
    """The read-only files shipped with the app (``resources/``).

    From a source tree they sit beside the ``app`` package. A PyInstaller bundle collects them
    as ``resources/`` under ``sys._MEIPASS`` (``_internal/`` on Linux; ``Contents/Frameworks``
    on macOS, where PyInstaller links the folder to ``Contents/Resources/resources``).
    """
    bundle_root = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and bundle_root:
        return Path(bundle_root) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


RESOURCES_DIR = resources_dir()
DEMO_DIR = RESOURCES_DIR / "demo"  # the embedded demo model: weights, codec, calibrations
# A picture in the demo's own world to start from (image-to-image): lab/img2img/sketch.py drew it.
DEMO_SKETCH = DEMO_DIR / "sketch.png"
