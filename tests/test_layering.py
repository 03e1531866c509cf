"""The package layers (docs/architecture.md): ``app`` is the shipped product and never imports the
research code in ``lab`` or the test doubles in ``tests``, and ``lab`` never imports ``tests``; no
import cycle runs between app modules or between app's layers; and every import in ``app`` is one
that the "May import" table of docs/architecture.md allows. Imports count at any depth of a file
(function bodies included), and so does a module named in a string in a file that imports by name
(``importlib.import_module("app.x")``, a warm-up list it walks), so none can hide. A name only held
as data, such as a family's adapter path (``app/families``), is loaded by the layer it names."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# A string that is exactly a dotted name in one of the project's packages is a module reference.
_MODULE_STRING = re.compile(r"(app|lab|tests)(\.[A-Za-z_]\w*)+")
_IMPORTS_BY_NAME = {"import_module", "__import__"}


def _module_name(file: Path) -> str:
    parts = file.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(file: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (function bodies included)."""
    name = _module_name(file)
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    return _imports_in(file.read_text(encoding="utf-8"), package, str(file))


def _imports_in(source: str, package: str, filename: str = "<source>") -> set[str]:
    found: set[str] = set()
    named: set[str] = set()  # module names in strings: imports where the file imports by name
    imports_by_name = False
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            # ``from app.x import y`` may name the submodule app.x.y
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            imports_by_name = imports_by_name or name in _IMPORTS_BY_NAME
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MODULE_STRING.fullmatch(node.value)
        ):
            named.add(node.value)
    return found | named if imports_by_name else found


def _project_files(top: str) -> list[Path]:
    return [f for f in (ROOT / top).rglob("*.py") if "__pycache__" not in f.parts]


def _app_graph() -> dict[str, set[str]]:
    modules = {_module_name(f): f for f in _project_files("app")}
    graph: dict[str, set[str]] = {}
    for name, file in modules.items():
        graph[name] = {m for m in _imports(file) if m in modules and m != name}
    return graph


def _importers_of(top: str, forbidden: set[str]) -> list[str]:
    return sorted(
        f"{file.relative_to(ROOT)} imports {module}"
        for file in _project_files(top)
        for module in _imports(file)
        if module.split(".")[0] in forbidden
    )


def test_app_never_imports_lab_or_tests() -> None:
    offenders = _importers_of("app", {"lab", "tests"})
    assert not offenders, offenders


def test_lab_never_imports_tests() -> None:
    """``tests`` imports ``lab`` (it checks the committed figures), so the reverse would be a loop;
    a research script that needs a stand-in engine has its own (``lab/bench/paced_engine.py``)."""
    offenders = _importers_of("lab", {"tests"})
    assert not offenders, offenders


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` re-exporting its own submodules is no cycle between layers: drop
    the edges from a submodule up to a package that contains it."""
    return {
        name: {m for m in targets if not name.startswith(m + ".")}
        for name, targets in graph.items()
    }


def test_no_import_cycle_between_app_modules() -> None:
    cycles = _cycles(_without_packages(_app_graph()))
    assert not cycles, cycles


def _layer_of(module: str) -> str:
    """The layer a module belongs to for the loop check: its package under ``app`` (``app.engine``)
    or, for a top-level module, itself (``app.paths``)."""
    return ".".join(module.split(".")[:2])


def _layer_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    layers: dict[str, set[str]] = {}
    for name, targets in graph.items():
        layers.setdefault(_layer_of(name), set())
        for target in targets:
            layers.setdefault(_layer_of(target), set())
            if _layer_of(target) != _layer_of(name):
                layers[_layer_of(name)].add(_layer_of(target))
    return layers


def test_no_import_loop_between_app_layers() -> None:
    """No package reaches back to a package that reaches it, however indirectly: a loop between
    layers (``variants → storage → engine → variants``) is one even when no module-level cycle
    exists."""
    graph = _app_graph()
    loops = _cycles(_layer_graph(graph))
    detail = {
        " ⇄ ".join(loop): sorted(
            f"{a} → {b}"
            for a, targets in graph.items()
            for b in targets
            if _layer_of(a) in loop and _layer_of(b) in loop and _layer_of(a) != _layer_of(b)
        )
        for loop in loops
    }
    assert not loops, detail


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_imports_inside_functions() -> None:
    assert "app.variants" in _imports(ROOT / "app" / "engine" / "request.py")


def test_the_import_reader_sees_modules_named_in_strings() -> None:
    source = (
        "import importlib\n"
        "def later():\n"
        "    return importlib.import_module('app.variants.weights')\n"
        "WARM = ('skimage.metrics', 'app.engine.engine')\n"
        "LOG = 'app engine'\n"
    )
    found = _imports_in(source, "app.ui")
    assert {"app.variants.weights", "app.engine.engine"} <= found
    assert "skimage.metrics" not in found  # outside the project: not a layer question
    assert "app engine" not in found
    assert "app.x" in _imports_in("__import__('app.x')\n", "app")
    # A name held as data where nothing is imported by name is loaded by another layer.
    assert _imports_in("ADAPTER = 'app.adapters.flux1'\n", "app.families") == set()
    # the engine thread's warm-up list, in the real code
    assert "app.demo.pipeline" in _imports(ROOT / "app" / "ui" / "worker.py")


def test_the_layer_graph_finds_a_loop_that_no_module_cycle_shows() -> None:
    graph = {
        "app.variants.user": {"app.storage.atomic"},
        "app.storage.atomic": set(),
        "app.storage.history": {"app.engine.report"},
        "app.engine.report": set(),
        "app.engine.request": {"app.variants.user"},
    }
    assert _cycles(_without_packages(graph)) == []
    assert _cycles(_layer_graph(graph)) == [["app.engine", "app.storage", "app.variants"]]


# -- the "May import" table of docs/architecture.md --------------------------------------------

FOUNDATION = "the foundation"


def _dotted(name: str) -> str:
    """`app/fileio/`, `app/hardware.py`, `hardware.py`, `engine.report`, `app/__init__.py` →
    the module name (``app.fileio``, ``app.hardware``, …, ``app``)."""
    name = name.strip().removesuffix("/").removesuffix(".py").removesuffix("/__init__")
    name = name.replace("/", ".")
    return name if name == "app" or name.startswith("app.") else f"app.{name}"


def _backticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _may_import_table(text: str) -> list[tuple[list[str], list[str]]]:
    """The rows of the table under "Layers and what may import what" that are layers of ``app``:
    (the layer's modules and packages, what it may import), the foundation spelt out."""
    section = text.split("## Layers and what may import what", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    column = next(i for i, cell in enumerate(header) if cell.startswith("May import"))
    rows: list[tuple[list[str], list[str], str]] = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        layer = [name for name in _backticked(cells[0]) if name.startswith("app")]
        if layer:
            rows.append(([_dotted(n) for n in layer], _backticked(cells[column]), cells[column]))
    foundation = next(
        layer
        for (layer, _, _), line in zip(rows, lines[2:], strict=False)
        if FOUNDATION in line.split("|")[1]
    )
    return [
        (layer, [_dotted(n) for n in allowed] + (foundation if FOUNDATION in cell else []))
        for layer, allowed, cell in rows
    ]


def _within(module: str, names: Iterable[str]) -> bool:
    """``module`` is one of ``names`` or inside one; ``app`` itself stands for its ``__init__``."""
    return any(module == n or (n != "app" and module.startswith(n + ".")) for n in names)


def _row_of(module: str, table: list[tuple[list[str], list[str]]]) -> list[int]:
    return [i for i, (layer, _) in enumerate(table) if _within(module, layer)]


def _disallowed(graph: dict[str, set[str]], table: list[tuple[list[str], list[str]]]) -> list[str]:
    """Every import the table does not allow. Importing a package's ``__init__`` comes with any
    of its modules, so an allowed ``engine.report`` allows ``app.engine`` too."""
    offenders = []
    for module, targets in graph.items():
        layer, allowed = table[_row_of(module, table)[0]]
        for target in targets:
            if _within(target, layer) or _within(target, allowed):
                continue
            if any(name.startswith(target + ".") for name in allowed):
                continue
            offenders.append(f"{module} imports {target}")
    return sorted(offenders)


def test_every_app_module_is_in_exactly_one_layer_of_the_table() -> None:
    table = _may_import_table(ARCHITECTURE.read_text(encoding="utf-8"))
    misplaced = {
        module: rows for module in _app_graph() if len(rows := _row_of(module, table)) != 1
    }
    assert not misplaced, f"add these modules to one row of docs/architecture.md: {misplaced}"


def test_every_app_import_is_allowed_by_the_architecture_table() -> None:
    table = _may_import_table(ARCHITECTURE.read_text(encoding="utf-8"))
    offenders = _disallowed(_app_graph(), table)
    assert not offenders, (
        "imports that docs/architecture.md's May import table does not allow (move the code, "
        f"or change the table if the layering itself changed): {offenders}"
    )


def test_the_table_reader_reads_the_rows_and_catches_an_import_upwards() -> None:
    doc = (
        "## Layers and what may import what\n\n"
        "| Layer | Holds | May import from `app` | Outside |\n"
        "|---|---|---|---|\n"
        "| the foundation: `app/errors.py`, `app/fileio/` | io | nothing | numpy |\n"
        "| `app/variants/` | data | the foundation | `tests/x.py` |\n"
        "| `app/storage/` | runs | the foundation, `variants`, `engine.report` | Pillow |\n"
        "| `app/engine/`, `app/__main__.py` | runs | the foundation, `variants` | mflux |\n"
        "| `lab/` | research | `app` | |\n"
        "\n## Module map\n"
    )
    table = _may_import_table(doc)
    assert table == [
        (["app.errors", "app.fileio"], []),
        (["app.variants"], ["app.errors", "app.fileio"]),
        (["app.storage"], ["app.variants", "app.engine.report", "app.errors", "app.fileio"]),
        (["app.engine", "app.__main__"], ["app.variants", "app.errors", "app.fileio"]),
    ]
    graph = {
        "app.variants.user": {"app.fileio.atomic", "app.engine.loader"},
        "app.storage.history": {"app.engine", "app.engine.report", "app.engine.engine"},
        "app.engine.request": {"app.variants", "app.engine.report"},
        "app.fileio.atomic": {"app.errors", "app.variants.catalog"},
    }
    assert _disallowed(graph, table) == [
        "app.fileio.atomic imports app.variants.catalog",
        "app.storage.history imports app.engine.engine",
        "app.variants.user imports app.engine.loader",
    ]


QT = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "superqt", "pyqtgraph")


def test_only_the_ui_layer_imports_qt() -> None:
    offenders = sorted(
        f"{file.relative_to(ROOT)} imports {module}"
        for file in (ROOT / "app").rglob("*.py")
        if "ui" not in file.relative_to(ROOT / "app").parts[:1]
        for module in _imports(file)
        if module.split(".")[0] in QT
    )
    assert not offenders, offenders
