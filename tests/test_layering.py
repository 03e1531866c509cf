"""The package layers (docs/architecture.md): ``app`` is the shipped product and never imports the
research code in ``lab`` or the test doubles in ``tests``; and no import cycle runs between app
modules, counting imports inside functions too (so none can hide a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module_name(file: Path) -> str:
    parts = file.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(file: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (function bodies included)."""
    name = _module_name(file)
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
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
    return found


def _app_graph() -> dict[str, set[str]]:
    files = [f for f in (ROOT / "app").rglob("*.py") if "__pycache__" not in f.parts]
    modules = {_module_name(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, file in modules.items():
        graph[name] = {m for m in _imports(file) if m in modules and m != name}
    return graph


def test_app_never_imports_lab_or_tests() -> None:
    offenders = sorted(
        f"{file.relative_to(ROOT)} imports {module}"
        for file in (ROOT / "app").rglob("*.py")
        for module in _imports(file)
        if module.split(".")[0] in {"lab", "tests"}
    )
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


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_imports_inside_functions() -> None:
    assert "app.variants" in _imports(ROOT / "app" / "engine" / "request.py")
