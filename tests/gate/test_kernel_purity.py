"""Layering: the gate kernel loads no Qt and no mflux; the registries of variants and families
(and so the command line's ``variants``) load not even MLX. Checked in fresh interpreters, where
nothing is imported yet."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE_DIR = ROOT / "app" / "gate"

QT = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "superqt", "pyqtgraph")
MFLUX = ("mflux",)
MLX = ("mlx",)


def imported_after(statement: str) -> set[str]:
    """Top-level package names a fresh interpreter has loaded after running ``statement``."""
    code = (
        "import json, sys\n"
        f"{statement}\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_probe_sees_what_it_imports() -> None:
    """The probe itself works: a module that loads MLX is reported as loading MLX."""
    assert "mlx" in imported_after("import mlx.core")


@pytest.mark.parametrize(
    "statement",
    [
        "import app.gate",
        "from app.gate import TeaCacheGate, StepEvent, simulate, engagement",
        "import app.gate.live",
    ],
)
def test_gate_kernel_imports_neither_qt_nor_mflux(statement: str) -> None:
    loaded = imported_after(statement)
    assert not loaded & {*QT, *MFLUX}, sorted(loaded & {*QT, *MFLUX})


@pytest.mark.parametrize(
    "statement",
    [
        "import app.variants",
        "from app.families import FAMILIES, family_names; family_names(bool, 'and')",
        "from app.variants import VARIANTS, check_schedule; "
        "check_schedule(VARIANTS['flux1-dev'], 25)",
        "import app.gate",
        "from app.gate import TeaCacheParams, decide, simulate, engagement, skip_curve, StepEvent",
        "from app.gate.kinds import GATE_KINDS, gate_kind; gate_kind('magcache').label",
        "from app.gate.fill import FILLS, get_fill; get_fill('forecast').describe()",
        "from app.cli.main import build_parser; build_parser().parse_args(['variants'])",
    ],
)
def test_registry_and_pure_kernel_import_no_mlx(statement: str) -> None:
    loaded = imported_after(statement)
    assert not loaded & {*MLX, *MFLUX, *QT}, sorted(loaded & {*MLX, *MFLUX, *QT})


def test_live_names_load_lazily_and_are_the_live_objects() -> None:
    import app.gate
    import app.gate.live

    assert app.gate.TeaCacheGate is app.gate.live.TeaCacheGate
    assert app.gate.rel_l1 is app.gate.live.rel_l1
    assert app.gate.StepEvent is app.gate.live.StepEvent
    assert set(app.gate.__all__) <= set(dir(app.gate))
    with pytest.raises(AttributeError):
        _ = app.gate.no_such_name  # type: ignore[attr-defined]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize(
    "path", sorted(GATE_DIR.rglob("*.py")), ids=lambda p: str(p.relative_to(GATE_DIR))
)
def test_no_gate_module_mentions_qt_or_mflux(path: Path) -> None:
    """Static check, including imports inside functions that a fresh import would not run."""
    assert not _imported_modules(path) & {*QT, *MFLUX}


@pytest.mark.parametrize(
    "name",
    [
        "decision.py",
        "events.py",
        "simulator.py",
        "magcache.py",
        "provenance.py",
        # the registry of kinds: a kind names its live class, imported on first use only
        "kinds/__init__.py",
        "kinds/base.py",
        "kinds/teacache.py",
        "kinds/magcache.py",
    ],
)
def test_pure_gate_modules_never_import_mlx(name: str) -> None:
    assert "mlx" not in _imported_modules(GATE_DIR / name)


# weights.py reads mflux's file patterns and pinned revisions, on first use only: not the registry.
REGISTRY_FILES = sorted(
    p for p in (ROOT / "app" / "variants").glob("*.py") if p.name != "weights.py"
)


@pytest.mark.parametrize("path", REGISTRY_FILES, ids=lambda p: p.name)
def test_registry_modules_never_import_mlx_or_mflux(path: Path) -> None:
    assert not _imported_modules(path) & {*MLX, *MFLUX, *QT}
