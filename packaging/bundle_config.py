"""One place for what the bundle is: names, version, Info.plist, and which modules it must hold.

Shared by the PyInstaller spec, ``check_analysis.py``, ``verify_bundle.py``, the shell scripts
(``python packaging/bundle_config.py KEY``) and the tests. Standard library only (Python 3.11+).

Never add ``packaging/__init__.py``: the directory would then shadow the PyPI ``packaging``
library that PyInstaller and uv rely on. Load this file by path or run it as a script.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

PACKAGING_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGING_DIR.parent
PYPROJECT = PROJECT_ROOT / "pyproject.toml"
SPEC_FILE = PACKAGING_DIR / "teacache-studio.spec"
HOOKS_DIR = PACKAGING_DIR / "hooks"
ENTITLEMENTS = PACKAGING_DIR / "entitlements.plist"

APP_DISPLAY_NAME = "TeaCache Studio"
EXECUTABLE_NAME = "teacache-studio"
# A second, tiny executable in the same bundle: one real MLX operation plus the resource lookup,
# printed as JSON. verify_bundle.py runs it; it shares every library with the app.
SELFCHECK_NAME = "teacache-studio-selfcheck"
# Reverse-DNS id; it must stay stable across releases (macOS keys permissions and settings to it).
BUNDLE_IDENTIFIER = "org.teacachestudio.TeaCacheStudio"
COPYRIGHT = "Copyright © 2026 the TeaCache Studio authors. Apache License 2.0."
# MLX's Metal backend needs macOS 14 (the oldest mlx 0.32.2 wheel is macosx_14_0_arm64). The
# build installs wheels for exactly this target (MACOSX_DEPLOYMENT_TARGET), because a Tahoe
# host would otherwise pick the macosx_26_0 wheel, whose mlx.metallib macOS 14/15 cannot load
# ("language version 4.0 which is not supported on this OS", jjang-ai/vmlx#120).
MINIMUM_MACOS = "14.0"
MACOS_TARGET_ARCH = "arm64"  # MLX ships no x86_64 macOS wheels

# What the app never imports: kept out of the bundle even when a dependency mentions it.
EXCLUDED_MODULES: tuple[str, ...] = (
    # mflux imports torch only to read PyTorch-format checkpoints; our paths use safetensors.
    "torch",
    "torchvision",
    "torchaudio",
    # OpenCV: mflux imports cv2 only in ControlNet/OpenPose helpers the app does not offer. On
    # Linux the bundle keeps just OpenCV's OpenBLAS library (see the spec), for app/blas.py.
    "cv2",
    # (matplotlib stays: app/bench/plots.py renders with its Agg backend; the spec's hooksconfig
    # keeps only that backend.)
    "tkinter",
    "_tkinter",
    "turtle",
    "IPython",
    "jupyter_client",
    "ipykernel",
    "notebook",
    # Our own research code and test doubles: the app never imports them (tests/test_layering.py).
    "lab",
    "tests",
    # Test and dev tooling that sits in the same environment.
    "pytest",
    "_pytest",
    "pytestqt",
    "hypothesis",
    "pyright",
    # Other Qt bindings that qtpy/pyqtgraph probe for.
    "PyQt5",
    "PyQt6",
    "PySide2",
    # Qt modules outside a widgets app: QML/Quick, 3D, web engine, multimedia, and the rest.
    "PySide6.QtQml",
    "PySide6.QtQuick",
    "PySide6.QtQuick3D",
    "PySide6.QtQuickControls2",
    "PySide6.QtQuickTest",
    "PySide6.QtQuickWidgets",
    "PySide6.Qt3DAnimation",
    "PySide6.Qt3DCore",
    "PySide6.Qt3DExtras",
    "PySide6.Qt3DInput",
    "PySide6.Qt3DLogic",
    "PySide6.Qt3DRender",
    "PySide6.QtWebChannel",
    "PySide6.QtWebEngineCore",
    "PySide6.QtWebEngineQuick",
    "PySide6.QtWebEngineWidgets",
    "PySide6.QtWebSockets",
    "PySide6.QtWebView",
    "PySide6.QtMultimedia",
    "PySide6.QtMultimediaWidgets",
    "PySide6.QtSpatialAudio",
    "PySide6.QtTextToSpeech",
    "PySide6.QtCharts",
    "PySide6.QtDataVisualization",
    "PySide6.QtGraphs",
    "PySide6.QtGraphsWidgets",
    "PySide6.QtPdf",
    "PySide6.QtPdfWidgets",
    "PySide6.QtBluetooth",
    "PySide6.QtNfc",
    "PySide6.QtPositioning",
    "PySide6.QtLocation",
    "PySide6.QtSensors",
    "PySide6.QtSerialPort",
    "PySide6.QtSerialBus",
    "PySide6.QtRemoteObjects",
    "PySide6.QtScxml",
    "PySide6.QtStateMachine",
    "PySide6.QtHttpServer",
    "PySide6.QtNetworkAuth",
    "PySide6.QtDesigner",
    "PySide6.QtHelp",
    "PySide6.QtUiTools",
    "PySide6.QtSql",
    "PySide6.QtTest",
    "PySide6.QtAxContainer",
)

# Shared-library name fragments that must not reach the bundle (a guard against excluded
# modules sneaking in through another package's binary dependencies or Qt plugins).
FORBIDDEN_LIBRARY_FRAGMENTS: tuple[str, ...] = (
    "libtorch",
    "libc10",
    "Qt6Qml",
    "Qt6Quick",
    "Qt6WebEngine",
    "Qt6Multimedia",
    "Qt63D",
    "Qt6Pdf",
    "libavcodec",  # OpenCV's FFmpeg
    "libtk8",
    "libtcl8",
)

# Modules the frozen app needs that static analysis cannot be trusted to find: imported from C
# (nanobind), by name (transformers' lazy module, mflux's tokenizer loader), or lazily.
# (Every module under app/ is required as well, and every model family's mflux package:
# ``required_modules`` adds them, from the tree and from the family registry.)
REQUIRED_MODULES: tuple[str, ...] = (
    "mlx.core",
    "mlx._reprlib_fix",
    "mlx.__array_api_info",
    "mlx.nn",
    "mlx.utils",
    "mflux.callbacks.callback_registry",
    "transformers.models.auto.tokenization_auto",
    "transformers.models.clip.tokenization_clip",
    "transformers.models.t5.tokenization_t5",
    "transformers.models.qwen2.tokenization_qwen2",
    "tokenizers",
    "safetensors",
    "skimage.metrics",
    "PIL.PngImagePlugin",
    "PySide6.QtWidgets",
    "superqt",
    "pyqtgraph",
    "platformdirs",
    "matplotlib.backends.backend_agg",
)
# What the running app reads from resources/: the demo model (weights, codec, decoder,
# calibrations, its config) and the window icon. Benchmark reports and screenshots stay in the
# repository for the README; research results live under lab/ and never reach the bundle.
RUNTIME_RESOURCE_DIRS: tuple[str, ...] = ("demo", "icons")
RUNTIME_DEMO_SUFFIXES: tuple[str, ...] = (".safetensors", ".calibration.json")
# demo.json: its config; sketch.png: the picture the window offers to start from
RUNTIME_DEMO_FILES: tuple[str, ...] = ("demo.json", "sketch.png")
# The macOS icon reaches the bundle through BUNDLE(icon=...), as Contents/Resources/*.icns.
RESOURCE_EXCLUDED_SUFFIXES: tuple[str, ...] = (".icns",)


def family_mflux_packages() -> tuple[str, ...]:
    """Every model family's mflux package ("mflux.models.flux2", ...), read from the family
    registry (``app.families.mflux_packages``): data only and standard library, so asking needs
    neither MLX nor mflux. A new family is collected by its module alone."""
    root = str(PROJECT_ROOT)
    if root not in sys.path:
        sys.path.insert(0, root)
    from app.families import mflux_packages

    return mflux_packages()


def required_modules() -> tuple[str, ...]:
    """``REQUIRED_MODULES`` and every model family's mflux package."""
    return (*REQUIRED_MODULES, *family_mflux_packages())


def is_runtime_resource(relative: Path) -> bool:
    """Whether a file under resources/ is one the app reads at run time."""
    if not relative.parts or relative.parts[0] not in RUNTIME_RESOURCE_DIRS:
        return False
    if relative.suffix in RESOURCE_EXCLUDED_SUFFIXES:
        return False
    if relative.parts[0] == "demo":
        return len(relative.parts) == 2 and (
            relative.name in RUNTIME_DEMO_FILES
            or any(relative.name.endswith(suffix) for suffix in RUNTIME_DEMO_SUFFIXES)
        )
    return True


def resource_datas(resources: Path = PROJECT_ROOT / "resources") -> list[tuple[str, str]]:
    """(source file, destination folder) pairs for PyInstaller: the runtime resources only."""
    pairs: list[tuple[str, str]] = []
    for path in sorted(resources.rglob("*")):
        relative = path.relative_to(resources)
        if path.is_file() and is_runtime_resource(relative):
            pairs.append((str(path), str(Path("resources", *relative.parts[:-1]))))
    return pairs


# Distributions whose metadata the frozen app reads through importlib.metadata.
METADATA_DISTRIBUTIONS: tuple[str, ...] = ("teacache-studio", "mflux", "mlx")


def app_modules(package_dir: Path = PROJECT_ROOT / "app") -> list[str]:
    """Dotted names of every module of ours, from the files on disk.

    Listed from the tree rather than with ``collect_submodules``, which walks packages and so
    skips a folder that lacks ``__init__.py``; the CLI and UI import much of it inside functions.
    """
    names: set[str] = set()
    for file in package_dir.rglob("*.py"):
        if "__pycache__" in file.parts:
            continue
        parts = file.relative_to(package_dir.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def read_project(pyproject: Path = PYPROJECT) -> dict[str, Any]:
    with pyproject.open("rb") as handle:
        return tomllib.load(handle)["project"]


def project_version(pyproject: Path = PYPROJECT) -> str:
    return str(read_project(pyproject)["version"])


def numeric_version(version: str) -> str:
    """The ``X.Y.Z`` release part of a PEP 440 version, as Info.plist version keys require.

    CFBundleShortVersionString must be three period-separated integers; pre-release and local
    tags ("0.2.0rc1", "0.1.0+abc") would be rejected by notarisation-time validation.
    """
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    if match is None:
        raise ValueError(f"not a PEP 440 version: {version!r}")
    parts = [int(part) for part in match.group(1).split(".")][:3]
    parts += [0] * (3 - len(parts))
    return ".".join(str(part) for part in parts)


def info_plist(version: str, build: str | None = None) -> dict[str, Any]:
    """The keys PyInstaller's BUNDLE merges into Contents/Info.plist."""
    short = numeric_version(version)
    return {
        "CFBundleName": APP_DISPLAY_NAME,
        "CFBundleDisplayName": APP_DISPLAY_NAME,
        "CFBundleIdentifier": BUNDLE_IDENTIFIER,
        "CFBundleShortVersionString": short,
        # The build number; a CI run may pass a higher one for re-releases of one version.
        "CFBundleVersion": build or short,
        "CFBundlePackageType": "APPL",
        "NSHumanReadableCopyright": COPYRIGHT,
        "NSHighResolutionCapable": True,
        "LSMinimumSystemVersion": MINIMUM_MACOS,
        "LSArchitecturePriority": [MACOS_TARGET_ARCH],
        "LSApplicationCategoryType": "public.app-category.graphics-design",
        # False: follow the system's dark mode instead of forcing the light (Aqua) look.
        "NSRequiresAquaSystemAppearance": False,
        "NSPrincipalClass": "NSApplication",
    }


REQUIRED_PLIST_KEYS: tuple[str, ...] = (
    "CFBundleShortVersionString",
    "CFBundleVersion",
    "CFBundleIdentifier",
    "CFBundleDisplayName",
    "NSHighResolutionCapable",
    "LSMinimumSystemVersion",
    "NSRequiresAquaSystemAppearance",
    "NSHumanReadableCopyright",
)


def _main(argv: list[str]) -> int:
    """``python packaging/bundle_config.py KEY`` prints one value for the shell scripts."""
    values = {
        "version": lambda: project_version(),
        "short-version": lambda: numeric_version(project_version()),
        "name": lambda: str(read_project()["name"]),
        "app-name": lambda: APP_DISPLAY_NAME,
        "executable": lambda: EXECUTABLE_NAME,
        "selfcheck": lambda: SELFCHECK_NAME,
        "bundle-id": lambda: BUNDLE_IDENTIFIER,
        "min-macos": lambda: MINIMUM_MACOS,
        "arch": lambda: MACOS_TARGET_ARCH,
    }
    if len(argv) != 1 or argv[0] not in values:
        print(f"usage: bundle_config.py {{{','.join(values)}}}", file=sys.stderr)
        return 2
    print(values[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
