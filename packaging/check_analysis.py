"""Check what the PyInstaller bundle would hold, without building it (Picard's check-cli-bundle).

Runs ``teacache-studio.spec`` with only ``Analysis`` active (PYZ, EXE, COLLECT and BUNDLE are
stubbed, so nothing is written but PyInstaller's work files in a temporary folder) and fails when:

- a module the frozen app needs is missing: every module under ``app/``, plus the modules that
  are imported from C, by name or lazily, and every model family's mflux package
  (``bundle_config.required_modules``);
- an excluded module sneaked in (``bundle_config.EXCLUDED_MODULES``), or a library that only
  such modules need (``FORBIDDEN_LIBRARY_FRAGMENTS``);
- the app's own code imports an excluded module (it would fail in the bundle only);
- a module of ours imports, at its top level, a module that PyInstaller could not find;
- the resources, libmlx (and on macOS mlx.metallib), or on Linux the OpenBLAS library are not
  collected where the app looks for them.

Usage (from the repository root): ``uv run --group packaging python packaging/check_analysis.py``
takes as long as PyInstaller's analysis (about 3-4 minutes on 2 cores; it prints the time).
After a build, ``--from-workpath build/pyinstaller`` reads the analysis that build recorded
instead, in under a second (packaging/linux/build_and_smoke.sh does that).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any
from unittest import mock


def _load_bundle_config() -> ModuleType:
    # By path: a packaging/__init__.py would shadow the PyPI `packaging` library.
    location = Path(__file__).resolve().parent / "bundle_config.py"
    spec = importlib.util.spec_from_file_location("teacache_bundle_config", location)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


config = _load_bundle_config()


@dataclass
class AnalysisResult:
    """The parts of a PyInstaller Analysis this check reads, as plain data."""

    modules: set[str]  # pure-Python modules and extension modules, dotted names
    binaries: list[str]  # destination paths inside the bundle
    datas: list[str]
    warnings_file: Path | None = None
    seconds: float = 0.0


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.failures.append(message)


def module_name_of_extension(dest: str) -> str:
    """``mlx/core.cpython-311-x86_64-linux-gnu.so`` -> ``mlx.core`` (for EXTENSION entries)."""
    path = PurePosixPath(dest.replace("\\", "/"))
    return ".".join((*path.parent.parts, path.name.split(".", 1)[0]))


def is_excluded(name: str, excluded: Iterable[str] = config.EXCLUDED_MODULES) -> bool:
    return any(name == item or name.startswith(item + ".") for item in excluded)


def excluded_imports_in_source(package_dir: Path) -> list[str]:
    """``file:line imports X`` for every import of an excluded module in our own code."""
    found: list[str] = []
    for file in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                if is_excluded(name):
                    where = file.relative_to(package_dir.parent)
                    found.append(f"{where}:{node.lineno} imports {name}")
                    break
    return found


_MISSING = re.compile(r"^missing module named '?([\w.]+)'? - imported by (.*)$")


def top_level_missing_imports(warnings_file: Path, package: str = "app") -> list[str]:
    """Modules our code imports at module level that PyInstaller could not find."""
    found: list[str] = []
    if not warnings_file.is_file():
        return found
    for line in warnings_file.read_text(encoding="utf-8").splitlines():
        match = _MISSING.match(line.strip())
        if match is None:
            continue
        missing, importers = match.groups()
        for importer in importers.split(", "):
            name, _, how = importer.partition(" ")
            ours = name == package or name.startswith(package + ".")
            if ours and "top-level" in how and "conditional" not in how:
                found.append(f"{name} imports {missing}")
    return found


def evaluate(result: AnalysisResult, platform: str = sys.platform) -> Report:
    report = Report()
    modules = result.modules

    for name in sorted(set(config.app_modules()) - modules):
        report.fail(f"our module {name} is not in the bundle (a package without __init__.py?)")
    for name in config.required_modules():
        if name not in modules:
            report.fail(f"required module {name} is missing (see bundle_config.required_modules)")

    sneaked = sorted(name for name in modules if is_excluded(name))
    if sneaked:
        shown = ", ".join(sneaked[:8]) + (" ..." if len(sneaked) > 8 else "")
        report.fail(f"excluded modules reached the bundle: {shown}")
    for dest in result.binaries:
        for fragment in config.FORBIDDEN_LIBRARY_FRAGMENTS:
            if fragment in PurePosixPath(dest).name:
                report.fail(f"library {dest} belongs to something the app never uses ({fragment})")

    for line in excluded_imports_in_source(config.PROJECT_ROOT / "app"):
        report.fail(f"{line}, which the spec excludes: drop the import or the exclusion")
    if result.warnings_file is not None:
        for line in top_level_missing_imports(result.warnings_file):
            report.fail(f"{line} at import time, and PyInstaller could not find it")

    datas = set(result.datas)
    binaries = set(result.binaries)
    demo = [dest for dest in datas if dest.startswith("resources/demo/")]
    if not demo:
        report.fail("resources/demo is not collected (the embedded demo model)")
    for source, folder in config.resource_datas():
        if f"{folder}/{Path(source).name}" not in datas:
            report.fail(f"{folder}/{Path(source).name} is not collected")
    if platform == "darwin":
        if "mlx/lib/libmlx.dylib" not in binaries:
            report.fail("mlx/lib/libmlx.dylib is not collected")
        if "mlx/lib/mlx.metallib" not in datas:
            report.fail("mlx/lib/mlx.metallib is not collected beside libmlx.dylib")
    else:
        if "mlx/lib/libmlx.so" not in binaries:
            report.fail("mlx/lib/libmlx.so is not collected")
        if not any(re.match(r"opencv_python[^/]*\.libs/libopenblas", dest) for dest in binaries):
            report.fail("OpenCV's OpenBLAS is not collected: app/blas.py could not preload it")

    took = f"; analysis took {result.seconds:.0f} s" if result.seconds else ""
    report.notes.append(
        f"{len(modules)} modules, {len(binaries)} binaries, {len(datas)} data files, "
        f"{len(demo)} demo resources{took}"
    )
    return report


class _Skipped:
    """Stand-in for the build steps that write artifacts (PYZ, EXE, COLLECT, BUNDLE)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.name = kwargs.get("name", "")


class _SkippedAnalysis:
    """The self-check's analysis: a subset of the app's, so not worth a second pass here."""

    def __init__(self) -> None:
        self.pure: list[Any] = []
        self.scripts: list[Any] = []
        self.binaries: list[Any] = []
        self.datas: list[Any] = []


def _toc_names(entries: Iterable[Any]) -> Iterator[tuple[str, str]]:
    for entry in entries:
        yield str(entry[0]).replace("\\", "/"), str(entry[-1])


def run_analysis(workdir: Path) -> AnalysisResult:
    # PyInstaller is the optional `packaging` extra (the bundle step installs it): pyright sees its
    # stubs but not its source here.
    import PyInstaller.__main__  # pyright: ignore[reportMissingModuleSource]
    from PyInstaller.building import build_main  # pyright: ignore[reportMissingModuleSource]

    original = build_main.Analysis
    recorded: list[Any] = []

    def recording_analysis(scripts: list[str], *args: Any, **kwargs: Any) -> Any:
        if any(Path(script).name == "bundle_selfcheck.py" for script in scripts):
            return _SkippedAnalysis()
        analysis = original(scripts, *args, **kwargs)
        recorded.append(analysis)
        return analysis

    started = time.monotonic()
    with (
        mock.patch.object(build_main, "Analysis", recording_analysis),
        mock.patch.object(build_main, "PYZ", _Skipped),
        mock.patch.object(build_main, "EXE", _Skipped),
        mock.patch.object(build_main, "COLLECT", _Skipped),
        mock.patch.object(build_main, "BUNDLE", _Skipped),
    ):
        PyInstaller.__main__.run(
            [
                "--noconfirm",
                "--log-level=WARN",
                f"--workpath={workdir / 'work'}",
                f"--distpath={workdir / 'dist'}",
                str(config.SPEC_FILE),
            ]
        )
    seconds = time.monotonic() - started
    if len(recorded) != 1:
        raise SystemExit(f"expected one app Analysis in the spec, found {len(recorded)}")
    analysis = recorded[0]
    result = _result_from_entries(analysis.pure, analysis.binaries, analysis.datas)
    warnings = sorted((workdir / "work").rglob("warn-*.txt"))
    result.warnings_file = warnings[0] if warnings else None
    result.seconds = seconds
    return result


def _result_from_entries(pure: Any, binaries: Any, datas: Any) -> AnalysisResult:
    modules = {name for name, _typecode in _toc_names(pure)}
    binary_names: list[str] = []
    for dest, typecode in _toc_names(binaries):
        binary_names.append(dest)
        if typecode == "EXTENSION":
            modules.add(module_name_of_extension(dest))
    return AnalysisResult(
        modules=modules,
        binaries=binary_names,
        datas=[dest for dest, _ in _toc_names(datas)],
    )


def load_recorded_analysis(workpath: Path) -> AnalysisResult:
    """Read the app's Analysis from a finished build's work folder (no second analysis).

    PyInstaller records each Analysis as a Python literal (``Analysis-NN.toc``) whose fields
    follow ``Analysis._GUTS``; the app's is the one whose input is ``launcher.py``.
    """
    from PyInstaller.building.build_main import Analysis  # pyright: ignore[reportMissingModuleSource]

    guts = Analysis._GUTS  # pyright: ignore[reportAttributeAccessIssue]  (private: the .toc fields)
    fields = [name for name, _check in guts]
    for toc in sorted(workpath.rglob("Analysis-*.toc")):
        values = dict(zip(fields, ast.literal_eval(toc.read_text(encoding="utf-8")), strict=False))
        if not any(Path(script).name == "launcher.py" for script in values.get("inputs", [])):
            continue
        result = _result_from_entries(values["pure"], values["binaries"], values["datas"])
        warnings = sorted(toc.parent.glob("warn-*.txt"))
        result.warnings_file = warnings[0] if warnings else None
        return result
    raise SystemExit(f"check_analysis: no app Analysis-*.toc under {workpath}; build first")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="keep PyInstaller's work files here")
    parser.add_argument(
        "--from-workpath",
        type=Path,
        metavar="DIR",
        help="check the analysis a finished build recorded in DIR (its --workpath) instead of "
        "running a new one",
    )
    args = parser.parse_args(argv)

    if args.from_workpath is not None:
        report = evaluate(load_recorded_analysis(args.from_workpath))
    else:
        with tempfile.TemporaryDirectory(prefix="tcs-analysis-") as scratch:
            workdir = args.workdir or Path(scratch)
            report = evaluate(run_analysis(workdir))

    for note in report.notes:
        print(f"check_analysis: {note}")
    for failure in report.failures:
        print(f"check_analysis: FAIL {failure}", file=sys.stderr)
    if report.failures:
        print(f"check_analysis: {len(report.failures)} problem(s)", file=sys.stderr)
        return 1
    print("check_analysis: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
