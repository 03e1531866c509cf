"""Packaging: Info.plist and entitlements, the spec's inputs, the scripts, and the checkers.

Fast and platform-independent. The macOS scripts run here against stand-ins for codesign,
notarytool and friends (recording what they were asked to do); what Apple's tools answer for
real is verified only on a Mac (see the release guide). The full Linux bundle build lives in
test_packaging_bundle.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import plistlib
import runpy
import shutil
import stat
import struct
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
MACOS_SCRIPTS = sorted((PACKAGING / "macos").glob("*.sh"))
ALL_SCRIPTS = [*MACOS_SCRIPTS, *sorted((PACKAGING / "linux").glob("*.sh"))]


def _load(name: str) -> types.ModuleType:
    """Load packaging/<name>.py by path (packaging/ must never become a package)."""
    spec = importlib.util.spec_from_file_location(f"tcs_test_{name}", PACKAGING / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


config = _load("bundle_config")
check_analysis = _load("check_analysis")
verify_bundle = _load("verify_bundle")

PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


# --- Info.plist, entitlements, versions -------------------------------------------------------


def test_packaging_folder_is_not_a_python_package() -> None:
    # packaging/__init__.py would shadow the PyPI `packaging` library that PyInstaller and uv use.
    assert not (PACKAGING / "__init__.py").exists()


def test_entitlements_load_and_grant_exactly_the_three_pyinstaller_exceptions() -> None:
    with (PACKAGING / "entitlements.plist").open("rb") as handle:
        entitlements = plistlib.load(handle)
    assert entitlements == {
        "com.apple.security.cs.allow-jit": True,
        "com.apple.security.cs.allow-unsigned-executable-memory": True,
        "com.apple.security.cs.disable-library-validation": True,
    }


def test_info_plist_has_the_required_keys_and_survives_plistlib() -> None:
    plist = plistlib.loads(plistlib.dumps(config.info_plist(PYPROJECT_VERSION)))
    for key in config.REQUIRED_PLIST_KEYS:
        assert key in plist, key
    assert plist["CFBundleShortVersionString"] == PYPROJECT_VERSION
    assert plist["CFBundleVersion"] == PYPROJECT_VERSION
    assert plist["CFBundleIdentifier"] == config.BUNDLE_IDENTIFIER
    assert plist["LSMinimumSystemVersion"] == "14.0"  # MLX's Metal backend
    assert plist["NSHighResolutionCapable"] is True
    assert plist["NSRequiresAquaSystemAppearance"] is False  # follow dark mode
    assert plist["CFBundleDisplayName"] == "TeaCache Studio"


def test_build_number_overrides_only_cfbundleversion() -> None:
    plist = config.info_plist("1.4.0", build="1.4.0.7")
    assert (plist["CFBundleShortVersionString"], plist["CFBundleVersion"]) == ("1.4.0", "1.4.0.7")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.1.0", "0.1.0"),
        ("1.2", "1.2.0"),
        ("3", "3.0.0"),
        ("2.0.0rc1", "2.0.0"),
        ("0.1.0+local.5", "0.1.0"),
        ("1.2.3.4", "1.2.3"),
        ("v1.0.1", "1.0.1"),
    ],
)
def test_numeric_version_keeps_the_three_release_numbers(version: str, expected: str) -> None:
    assert config.numeric_version(version) == expected


def test_numeric_version_rejects_what_is_no_version() -> None:
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        config.numeric_version("latest")


def test_bundle_config_answers_the_shell_scripts() -> None:
    def value(key: str) -> str:
        done = subprocess.run(
            [sys.executable, str(PACKAGING / "bundle_config.py"), key],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    assert value("version") == PYPROJECT_VERSION
    assert value("app-name") == "TeaCache Studio"
    assert value("min-macos") == "14.0"
    bad = subprocess.run(
        [sys.executable, str(PACKAGING / "bundle_config.py"), "nope"], capture_output=True
    )
    assert bad.returncode == 2


def test_app_modules_come_from_the_tree_even_without_init_files(tmp_path: Path) -> None:
    package = tmp_path / "app"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "loose.py").write_text("")  # sub/ has no __init__.py
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "stale.py").write_text("")
    assert config.app_modules(package) == ["app", "app.sub.loose"]


def test_only_runtime_resources_are_collected(tmp_path: Path) -> None:
    (tmp_path / "demo" / "training").mkdir(parents=True)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "screenshots").mkdir()
    (tmp_path / "demo" / "demo.safetensors").write_bytes(b"w")
    (tmp_path / "demo" / "demo.calibration.json").write_text("{}")
    (tmp_path / "demo" / "demo.json").write_text("{}")
    (tmp_path / "demo" / "eval-demo.json").write_text("{}")  # a research result: never shipped
    (tmp_path / "demo" / "training" / "run1-train.log").write_text("loss")
    (tmp_path / "benchmarks" / "cpu.json").write_text("{}")
    (tmp_path / "screenshots" / "main-window.png").write_bytes(b"s")
    (tmp_path / "icons").mkdir()
    (tmp_path / "icons" / "app.icns").write_bytes(b"i")  # BUNDLE(icon=...) carries it
    (tmp_path / "icons" / "app.png").write_bytes(b"p")  # the window icon, read at run time
    assert config.resource_datas(tmp_path) == [
        (str(tmp_path / "demo" / "demo.calibration.json"), "resources/demo"),
        (str(tmp_path / "demo" / "demo.json"), "resources/demo"),
        (str(tmp_path / "demo" / "demo.safetensors"), "resources/demo"),
        (str(tmp_path / "icons" / "app.png"), "resources/icons"),
    ]


def test_the_shipped_resources_are_exactly_what_the_app_reads() -> None:
    shipped = {Path(source).name for source, _ in config.resource_datas()}
    assert shipped == {
        "codec.safetensors",
        "decoder.safetensors",
        "demo.safetensors",
        "demo-turbo.safetensors",
        "demo.calibration.json",
        "demo-turbo.calibration.json",
        "demo.json",
        "sketch.png",  # the picture the window offers to start from
        "teacache-studio.png",
    }


def test_lab_and_tests_are_excluded_from_the_bundle() -> None:
    assert {"lab", "tests"} <= set(config.EXCLUDED_MODULES)
    assert not [name for name in config.app_modules() if name.split(".")[0] != "app"]


def test_every_real_app_module_is_listed() -> None:
    modules = set(config.app_modules())
    assert {"app", "app.__main__", "app.cli.main", "app.paths"} <= modules


# --- the spec ---------------------------------------------------------------------------------


class _Recorder:
    """Stand-ins for PyInstaller's spec classes that remember how the spec called them."""

    def __init__(self, metallib: bool) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.metallib = metallib

    def namespace(self, spec_path: Path) -> dict[str, Any]:
        recorder = self

        class Analysis:
            def __init__(self, scripts: list[str], **kwargs: Any) -> None:
                recorder.calls.append(("Analysis", (scripts,), kwargs))
                self.pure: list[Any] = []
                self.scripts: list[Any] = []
                self.binaries: list[Any] = []
                self.datas: list[Any] = []
                if recorder.metallib and "launcher.py" in scripts[0]:
                    self.datas.append(("mlx/lib/mlx.metallib", "/site/mlx.metallib", "DATA"))

        def record(kind: str) -> Any:
            def build(*args: Any, **kwargs: Any) -> Any:
                recorder.calls.append((kind, args, kwargs))
                return types.SimpleNamespace(kind=kind, name=kwargs.get("name"))

            return build

        return {
            "SPECPATH": str(spec_path.parent),
            "SPEC": str(spec_path),
            "Analysis": Analysis,
            "PYZ": record("PYZ"),
            "EXE": record("EXE"),
            "COLLECT": record("COLLECT"),
            "BUNDLE": record("BUNDLE"),
            "os": os,
        }

    def of(self, kind: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(args, kwargs) for name, args, kwargs in self.calls if name == kind]


def _run_spec(
    spec_path: Path, platform: str, monkeypatch: pytest.MonkeyPatch, metallib: bool = True
) -> _Recorder:
    # The spec imports PyInstaller's hook helpers; stand-ins keep this test free of PyInstaller.
    hooks = types.ModuleType("PyInstaller.utils.hooks")
    hooks.copy_metadata = lambda name: [(f"/site/{name}.dist-info", f"{name}.dist-info")]  # type: ignore[attr-defined]
    for name, module in (
        ("PyInstaller", types.ModuleType("PyInstaller")),
        ("PyInstaller.utils", types.ModuleType("PyInstaller.utils")),
        ("PyInstaller.utils.hooks", hooks),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sys, "platform", platform)
    # The spec registers the bundle_config it loads; put the original back afterwards.
    monkeypatch.delitem(sys.modules, "teacache_bundle_config", raising=False)
    recorder = _Recorder(metallib)
    code = compile(spec_path.read_text(encoding="utf-8"), str(spec_path), "exec")
    exec(code, recorder.namespace(spec_path))
    return recorder


def test_spec_builds_a_mac_bundle_named_and_versioned_from_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of packaging/ beside a pyproject.toml with another version: the spec must follow it.
    shutil.copytree(PACKAGING, tmp_path / "packaging")
    (tmp_path / "resources").mkdir()
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    pyproject = (
        (ROOT / "pyproject.toml")
        .read_text()
        .replace(f'version = "{PYPROJECT_VERSION}"', 'version = "9.8.7rc2"', 1)
    )
    (tmp_path / "pyproject.toml").write_text(pyproject)

    recorder = _run_spec(tmp_path / "packaging" / "teacache-studio.spec", "darwin", monkeypatch)

    ((_, bundle),) = recorder.of("BUNDLE")
    assert bundle["name"] == "TeaCache Studio.app"
    assert bundle["version"] == "9.8.7"
    assert bundle["bundle_identifier"] == config.BUNDLE_IDENTIFIER
    assert bundle["info_plist"]["CFBundleShortVersionString"] == "9.8.7"
    assert bundle["info_plist"]["LSMinimumSystemVersion"] == "14.0"
    executables = recorder.of("EXE")
    assert [kwargs["name"] for _, kwargs in executables] == [
        "teacache-studio",
        "teacache-studio-selfcheck",
    ]
    assert all(kwargs["target_arch"] == "arm64" for _, kwargs in executables)
    assert executables[0][1]["console"] is False  # a windowed .app
    assert all(kwargs["codesign_identity"] is None for _, kwargs in executables)  # sign.sh signs
    # The app's EXE comes first in COLLECT: BUNDLE makes it CFBundleExecutable.
    ((collect_args, _),) = recorder.of("COLLECT")
    assert collect_args[0].name == "teacache-studio"


def test_spec_links_the_metallib_at_the_top_level_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _run_spec(PACKAGING / "teacache-studio.spec", "darwin", monkeypatch)
    collect_args, _ = recorder.of("COLLECT")[0]
    entries = [entry for group in collect_args if isinstance(group, list) for entry in group]
    assert ("mlx.metallib", "mlx/lib/mlx.metallib", "SYMLINK") in entries


def test_spec_on_linux_collects_resources_openblas_and_excludes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = _run_spec(PACKAGING / "teacache-studio.spec", "linux", monkeypatch)
    assert not recorder.of("BUNDLE")
    app_scripts, app = recorder.of("Analysis")[0]
    assert app_scripts[0][0].endswith("launcher.py")
    assert set(app["datas"]) >= set(config.resource_datas())
    assert any(dest == "teacache-studio.dist-info" for _src, dest in app["datas"])
    assert app["hookspath"] == [str(PACKAGING / "hooks")]
    for module in ("torch", "cv2", "tkinter", "PySide6.QtQml", "PySide6.QtWebEngineCore"):
        assert module in app["excludes"], module
    assert "matplotlib" not in app["excludes"]  # app/bench/plots.py writes plots with Agg
    assert app["hooksconfig"] == {"matplotlib": {"backends": ["Agg"]}}
    assert set(config.app_modules()) <= set(app["hiddenimports"])
    openblas = [dest for src, dest in app["binaries"] if "libopenblas" in src]
    assert openblas and openblas[0].startswith("opencv_python")  # where app/blas.py globs
    _, selfcheck = recorder.of("Analysis")[1]
    assert selfcheck["excludes"] == app["excludes"]
    executables = recorder.of("EXE")
    assert executables[0][1]["console"] is True  # the same binary is the command line
    assert all(kwargs["target_arch"] is None for _, kwargs in executables)


# --- shell scripts ----------------------------------------------------------------------------


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda path: path.name)
def test_scripts_parse_and_are_executable(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    executable = bool(script.stat().st_mode & stat.S_IXUSR)
    # common.sh is sourced by the others, never run.
    assert executable is (script.name != "common.sh"), script
    if script.name != "common.sh":
        assert "\nset -euo pipefail\n" in script.read_text()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_scripts_pass_shellcheck() -> None:
    done = subprocess.run(
        ["shellcheck", "-x", *map(str, ALL_SCRIPTS)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def _clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TEACACHE_")}
    env.update(extra)
    return env


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the refusal off a Mac")
@pytest.mark.parametrize(
    ("script", "named"),
    [
        ("build.sh", []),
        ("sign.sh", ["TEACACHE_SIGN_IDENTITY"]),
        ("make_dmg.sh", []),
        ("notarize.sh", ["TEACACHE_NOTARY_PROFILE"]),
        ("release.sh", ["TEACACHE_SIGN_IDENTITY", "TEACACHE_TEAM_ID", "TEACACHE_NOTARY_PROFILE"]),
    ],
)
def test_mac_scripts_refuse_early_off_a_mac_and_name_what_is_missing(
    script: str, named: list[str]
) -> None:
    done = subprocess.run(
        ["bash", str(PACKAGING / "macos" / script)],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # nothing was attempted
    assert f"{script}: cannot run:" in done.stderr
    assert "needs macOS" in done.stderr
    for variable in named:
        assert f"set {variable}:" in done.stderr


# Stand-ins for the macOS tools: each logs its arguments, one line per call, to $TOOL_LOG.
_STUBS = {
    "uname": 'case "$1" in -s) echo Darwin ;; -m) echo arm64 ;; *) echo Darwin ;; esac',
    "xattr": "true",
    "security": "echo '  1) ABC \"Developer ID Application: Jane Doe (ABCDE12345)\"'",
    "codesign": """
if [[ " $* " == *" --display "* ]]; then
  echo "Executable=${@: -1}"
  echo "CodeDirectory v=20500 size=1 flags=0x10000(runtime) hashes=1"
  echo "TeamIdentifier=ABCDE12345"
  echo "Timestamp=1 Jan 2026"
  echo "com.apple.security.cs.disable-library-validation"
fi
exit 0""",
    "xcrun": """
if [[ "$1 $2" == "notarytool submit" ]]; then
  printf '{"id": "abc-123", "status": "%s", "message": "x"}\\n' "${NOTARY_STATUS:-Accepted}"
elif [[ "$1 $2" == "notarytool log" ]]; then
  echo '{"issues": []}' > "${@: -1}"
fi
exit 0""",
    "plutil": """
key="$2"
python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$key" """,
    "ditto": 'if [[ "$1" == -c ]]; then touch "${@: -1}"; else cp -a "$1" "$2"; fi',
    "spctl": "true",
}


def _stub_tools(bin_dir: Path, log: Path) -> dict[str, str]:
    bin_dir.mkdir()
    for name, body in _STUBS.items():
        path = bin_dir / name
        path.write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "$TOOL_LOG"\n{body}\n')
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TOOL_LOG": str(log)}


def _macho_bytes(
    *commands: bytes, cpu: int = verify_bundle.CPU_TYPE_ARM64, filetype: int = 6
) -> bytes:
    body = b"".join(commands)
    header = struct.pack(
        "<IiiIIIII", verify_bundle.MH_MAGIC_64, cpu, 0, filetype, len(commands), len(body), 0, 0
    )
    return header + body


def _string_command(command: int, text: str, offset: int) -> bytes:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-(offset + len(raw)) % 8)
    head = struct.pack("<III", command, offset + len(raw), offset)
    return head + b"\0" * (offset - 12) + raw


def _dylib_command(command: int, name: str) -> bytes:
    # dylib_command: cmd, cmdsize, name offset (24), timestamp, current and compat versions.
    raw = name.encode() + b"\0"
    raw += b"\0" * (-(24 + len(raw)) % 8)
    return struct.pack("<IIIIII", command, 24 + len(raw), 24, 2, 0x10000, 0x10000) + raw


def _build_version(minos: tuple[int, int, int]) -> bytes:
    packed = (minos[0] << 16) | (minos[1] << 8) | minos[2]
    return struct.pack(
        "<IIIIII", verify_bundle.LC_BUILD_VERSION, 24, verify_bundle.PLATFORM_MACOS, packed, 0, 0
    )


def _fake_app(root: Path) -> Path:
    """A .app with the layout PyInstaller's BUNDLE produces for our spec."""
    app = root / "TeaCache Studio.app"
    contents = app / "Contents"
    frameworks = contents / "Frameworks"
    resources = contents / "Resources"
    for folder in (contents / "MacOS", frameworks / "mlx" / "lib", resources / "mlx" / "lib"):
        folder.mkdir(parents=True)
    executable = _macho_bytes(_build_version((14, 0, 0)), filetype=2)
    for name in ("teacache-studio", "teacache-studio-selfcheck"):
        (contents / "MacOS" / name).write_bytes(executable)
        (contents / "MacOS" / name).chmod(0o755)
    (frameworks / "mlx" / "lib" / "libmlx.dylib").write_bytes(
        _macho_bytes(
            _dylib_command(verify_bundle.LC_ID_DYLIB, "@rpath/libmlx.dylib"),
            _build_version((14, 0, 0)),
        )
    )
    (frameworks / "mlx" / "core.cpython-311-darwin.so").write_bytes(
        _macho_bytes(
            _dylib_command(verify_bundle.LC_LOAD_DYLIB, "@rpath/libmlx.dylib"),
            _string_command(verify_bundle.LC_RPATH, "@loader_path/..", 12),
            _build_version((14, 0, 0)),
            filetype=8,
        )
    )
    # Header bytes of mlx-metal 0.32.2's macosx_14_0 metallib ("MTLB", ..., OS 0x81, 14.0).
    metallib = bytes.fromhex("4d544c4201800200070000810e000000")
    (resources / "mlx" / "lib" / "mlx.metallib").write_bytes(metallib + b"\0" * 64)
    (frameworks / "mlx" / "lib" / "mlx.metallib").symlink_to(
        "../../../Resources/mlx/lib/mlx.metallib"
    )
    (frameworks / "libmlx.dylib").symlink_to("mlx/lib/libmlx.dylib")  # PyInstaller's top-level link
    (frameworks / "mlx.metallib").symlink_to("mlx/lib/mlx.metallib")  # the spec's SYMLINK entry
    for source, folder in config.resource_datas():  # names only: the check reads no content
        (resources / folder).mkdir(parents=True, exist_ok=True)
        (resources / folder / Path(source).name).write_bytes(b"")
    (frameworks / "resources").symlink_to("../Resources/resources")
    (frameworks / "Python").write_bytes(_macho_bytes(_build_version((11, 0, 0))))
    # A Qt framework as PySide6 ships it: Versions/A holds the code, the rest are links.
    qtcore = frameworks / "PySide6" / "Qt" / "lib" / "QtCore.framework"
    (qtcore / "Versions" / "A" / "Resources").mkdir(parents=True)
    (qtcore / "Versions" / "A" / "QtCore").write_bytes(_macho_bytes(_build_version((13, 0, 0))))
    (qtcore / "Versions" / "A" / "Resources" / "Info.plist").write_bytes(plistlib.dumps({}))
    (qtcore / "Versions" / "Current").symlink_to("A")
    (qtcore / "QtCore").symlink_to("Versions/Current/QtCore")
    (qtcore / "Resources").symlink_to("Versions/Current/Resources")
    with (contents / "Info.plist").open("wb") as handle:
        plistlib.dump(
            {**config.info_plist(PYPROJECT_VERSION), "CFBundleExecutable": "teacache-studio"},
            handle,
        )
    return app


@pytest.mark.skipif(sys.platform == "darwin", reason="uses stand-ins for the real macOS tools")
def test_sign_signs_inside_out_with_runtime_timestamp_and_entitlements_on_executables_only(
    tmp_path: Path,
) -> None:
    app = _fake_app(tmp_path)
    log = tmp_path / "tools.log"
    env = _clean_env(
        **_stub_tools(tmp_path / "bin", log),
        TEACACHE_SIGN_IDENTITY="Developer ID Application: Jane Doe (ABCDE12345)",
        TEACACHE_TEAM_ID="ABCDE12345",
    )
    done = subprocess.run(
        ["bash", str(PACKAGING / "macos" / "sign.sh"), str(app)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    signs = [
        line.split(" ")
        for line in log.read_text().splitlines()
        if line.startswith("codesign --force")
    ]
    signed = [" ".join(args).split(str(app))[-1] or "<app>" for args in signs]
    assert signed[-1] == "<app>"
    assert signed[-3:-1] == [
        "/Contents/MacOS/teacache-studio",
        "/Contents/MacOS/teacache-studio-selfcheck",
    ]
    framework = "/Contents/Frameworks/PySide6/Qt/lib/QtCore.framework"
    assert signed[-4] == framework  # after all it contains, before what uses it
    libraries = signed[:-4]
    assert "/Contents/Frameworks/mlx/lib/libmlx.dylib" in libraries
    assert "/Contents/Frameworks/mlx/core.cpython-311-darwin.so" in libraries
    assert f"{framework}/Versions/A/QtCore" in libraries
    assert not any(path.endswith(("Current/QtCore", "Info.plist")) for path in signed)
    assert not any("metallib" in path or "demo" in path for path in signed)  # data, not code
    for args, path in zip(signs, signed, strict=True):
        text = " ".join(args)
        assert "--options runtime" in text and "--timestamp" in text
        assert ("--entitlements" in text) is (path == "<app>" or "/Contents/MacOS/" in path)
    verify = [line for line in log.read_text().splitlines() if "--verify --deep --strict" in line]
    assert verify


@pytest.mark.skipif(sys.platform == "darwin", reason="uses stand-ins for the real macOS tools")
def test_sign_refuses_an_identity_that_is_not_developer_id(tmp_path: Path) -> None:
    app = _fake_app(tmp_path)
    env = _clean_env(
        **_stub_tools(tmp_path / "bin", tmp_path / "tools.log"),
        TEACACHE_SIGN_IDENTITY="Apple Development: Jane Doe (XYZ)",
    )
    done = subprocess.run(
        ["bash", str(PACKAGING / "macos" / "sign.sh"), str(app)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert "Developer ID Application" in done.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="uses stand-ins for the real macOS tools")
@pytest.mark.parametrize("status", ["Accepted", "Invalid"])
def test_notarize_staples_only_what_was_accepted_and_keeps_the_log(
    tmp_path: Path, status: str
) -> None:
    app = _fake_app(tmp_path)
    log = tmp_path / "tools.log"
    env = _clean_env(
        **_stub_tools(tmp_path / "bin", log),
        TEACACHE_NOTARY_PROFILE="teacache-notary",
        TEACACHE_NOTARY_LOGS=str(tmp_path / "notary"),
        NOTARY_STATUS=status,
    )
    done = subprocess.run(
        ["bash", str(PACKAGING / "macos" / "notarize.sh"), str(app)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = log.read_text()
    assert "--keychain-profile teacache-notary --wait --output-format json" in calls
    assert "TeaCache Studio.zip" in calls  # the .app travels as a ditto zip
    notary_log = tmp_path / "notary" / "TeaCache Studio.app-abc-123.json"
    assert json.loads(notary_log.read_text()) == {"issues": []}
    if status == "Accepted":
        assert done.returncode == 0, done.stderr
        assert f"xcrun stapler staple {app}" in calls
        assert f"xcrun stapler validate {app}" in calls
        assert "spctl --assess --type execute" in calls
    else:
        assert done.returncode == 1
        assert "notarisation Invalid" in done.stderr
        assert "stapler" not in calls


# --- check_analysis ---------------------------------------------------------------------------


def _good_analysis(platform: str = "linux") -> Any:
    modules = set(config.app_modules()) | set(config.required_modules())
    resources = [f"{folder}/{Path(src).name}" for src, folder in config.resource_datas()]
    if platform == "darwin":
        binaries = ["mlx/lib/libmlx.dylib", "mlx/core.cpython-311-darwin.so"]
        datas = ["mlx/lib/mlx.metallib", *resources]
    else:
        binaries = [
            "mlx/lib/libmlx.so",
            "opencv_python_headless.libs/libopenblasp-r0-59ffcd50.3.15.so",
        ]
        datas = resources
    return check_analysis.AnalysisResult(modules=modules, binaries=binaries, datas=datas)


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_check_analysis_accepts_a_complete_analysis(platform: str) -> None:
    report = check_analysis.evaluate(_good_analysis(platform), platform=platform)
    assert report.failures == []


def test_check_analysis_names_each_problem() -> None:
    result = _good_analysis()
    result.modules -= {"mlx._reprlib_fix", "app.cli.main"}
    result.modules |= {"torch", "torch.nn", "PySide6.QtQml"}
    result.binaries = [*result.binaries[1:], "PySide6/Qt/lib/libQt6Quick.so.6"]
    result.datas = []
    failures = "\n".join(check_analysis.evaluate(result, platform="linux").failures)
    assert "required module mlx._reprlib_fix is missing" in failures
    assert "our module app.cli.main is not in the bundle" in failures
    assert "excluded modules reached the bundle: PySide6.QtQml, torch, torch.nn" in failures
    assert "libQt6Quick.so.6" in failures
    assert "resources/demo is not collected" in failures
    assert "mlx/lib/libmlx.so is not collected" in failures


def test_check_analysis_on_macos_wants_the_metallib_beside_libmlx() -> None:
    result = _good_analysis("darwin")
    result.datas = [dest for dest in result.datas if "metallib" not in dest]
    failures = check_analysis.evaluate(result, platform="darwin").failures
    assert failures == ["mlx/lib/mlx.metallib is not collected beside libmlx.dylib"]


def test_our_code_imports_nothing_the_spec_excludes() -> None:
    assert check_analysis.excluded_imports_in_source(ROOT / "app") == []


def test_excluded_imports_in_our_code_are_found(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    (package / "ok.py").write_text("import numpy\nfrom PySide6 import QtWidgets\n")
    (package / "bad.py").write_text("import os\n\ndef f():\n    from PySide6 import QtQml\n")
    (package / "worse.py").write_text("import torch.nn as nn\n")
    assert check_analysis.excluded_imports_in_source(package) == [
        "app/bad.py:4 imports PySide6.QtQml",
        "app/worse.py:1 imports torch.nn",
    ]


def test_missing_top_level_imports_of_ours_are_read_from_the_warnings(tmp_path: Path) -> None:
    warn = tmp_path / "warn-teacache-studio.txt"
    warn.write_text(
        "missing module named winreg - imported by platform (delayed), app.x (top-level)\n"
        "missing module named 'gone.mod' - imported by app.ui.window (top-level)\n"
        "missing module named maybe - imported by app.y (conditional)\n"
        "missing module named other - imported by numpy (top-level)\n"
    )
    assert check_analysis.top_level_missing_imports(warn) == [
        "app.x imports winreg",
        "app.ui.window imports gone.mod",
    ]


@pytest.mark.parametrize(
    ("dest", "module"),
    [
        ("mlx/core.cpython-311-x86_64-linux-gnu.so", "mlx.core"),
        ("mlx/core.cpython-311-darwin.so", "mlx.core"),
        ("PySide6/QtWidgets.abi3.so", "PySide6.QtWidgets"),
        (
            "python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
            "python3.11.lib-dynload._ssl",
        ),
    ],
)
def test_extension_destinations_map_to_module_names(dest: str, module: str) -> None:
    assert check_analysis.module_name_of_extension(dest) == module


# --- verify_bundle: headers and the .app layout ----------------------------------------------


def test_macho_parser_reads_load_paths_rpaths_and_deployment_target() -> None:
    data = _macho_bytes(
        _dylib_command(verify_bundle.LC_ID_DYLIB, "@rpath/libmlx.dylib"),
        _dylib_command(verify_bundle.LC_LOAD_DYLIB, "@rpath/libjaccl.dylib"),
        _dylib_command(verify_bundle.LC_LOAD_WEAK_DYLIB, "/usr/lib/libc++.1.dylib"),
        _string_command(verify_bundle.LC_RPATH, "@loader_path/..", 12),
        _build_version((14, 0, 0)),
    )
    macho = verify_bundle.parse_macho(data)
    assert macho is not None
    assert macho.cpu_type == verify_bundle.CPU_TYPE_ARM64
    assert macho.install_name == "@rpath/libmlx.dylib"
    assert macho.dylibs == ["@rpath/libjaccl.dylib", "/usr/lib/libc++.1.dylib"]
    assert macho.rpaths == ["@loader_path/.."]
    assert macho.min_macos == (14, 0, 0)


def test_macho_parser_picks_the_arm64_slice_of_a_universal_binary() -> None:
    intel = _macho_bytes(_build_version((10, 13, 0)), cpu=verify_bundle.CPU_TYPE_X86_64)
    arm = _macho_bytes(_build_version((11, 0, 0)))
    header_size = 8 + 2 * 20
    offsets = (header_size, header_size + len(intel))
    fat = struct.pack(">II", verify_bundle.FAT_MAGIC, 2)
    fat += struct.pack(">iiIII", verify_bundle.CPU_TYPE_X86_64, 3, offsets[0], len(intel), 0)
    fat += struct.pack(">iiIII", verify_bundle.CPU_TYPE_ARM64, 0, offsets[1], len(arm), 0)
    macho = verify_bundle.parse_macho(fat + intel + arm)
    assert macho is not None
    assert (macho.cpu_type, macho.min_macos) == (verify_bundle.CPU_TYPE_ARM64, (11, 0, 0))


def test_non_macho_files_are_not_parsed(tmp_path: Path) -> None:
    elf = tmp_path / "lib.so"
    elf.write_bytes(b"\x7fELF" + b"\0" * 60)
    assert verify_bundle.read_macho(elf) is None
    assert verify_bundle.parse_macho(b"short") is None


@pytest.mark.parametrize(
    ("header_hex", "target"),
    [
        # First 16 bytes of mlx.metallib in the mlx-metal 0.32.2 wheels, by wheel tag.
        ("4d544c420180020007000081" + "0e000000", (14, 0)),  # macosx_14_0
        ("4d544c420180020008000081" + "0f000000", (15, 0)),  # macosx_15_0
        ("4d544c420180020009000081" + "1a000200", (26, 2)),  # macosx_26_0
    ],
)
def test_metallib_header_gives_the_macos_it_was_built_for(
    tmp_path: Path, header_hex: str, target: tuple[int, int]
) -> None:
    path = tmp_path / "mlx.metallib"
    path.write_bytes(bytes.fromhex(header_hex) + b"\0" * 32)
    assert verify_bundle.metallib_target(path) == target


def test_rpath_resolution_follows_loader_and_executable_paths(tmp_path: Path) -> None:
    binary = tmp_path / "Frameworks" / "mlx" / "core.so"
    found = verify_bundle.resolve_install_name(
        "@rpath/libmlx.dylib",
        binary,
        ["@loader_path/..", "@executable_path/../lib"],
        tmp_path / "MacOS",
    )
    assert found == [tmp_path / "Frameworks" / "libmlx.dylib", tmp_path / "lib" / "libmlx.dylib"]


def _layout(app: Path) -> dict[str, tuple[bool, str]]:
    verifier = verify_bundle.Verifier(verify_bundle.Bundle.locate(app))
    verifier.run_all(smoke_test=False, layout_only=True)
    return {name: (ok, detail) for name, ok, detail in verifier.results}


def test_verify_bundle_accepts_the_layout_pyinstaller_and_the_spec_produce(tmp_path: Path) -> None:
    results = _layout(_fake_app(tmp_path))
    assert all(ok for ok, _ in results.values()), results
    assert (
        "mlx.core loads Contents/Frameworks/libmlx.dylib"
        in results["mlx.metallib beside libmlx"][1]
    )


def test_verify_bundle_catches_the_stenoai_metallib_layout(tmp_path: Path) -> None:
    # Without the top-level link, MLX would look for Frameworks/mlx.metallib and fail.
    app = _fake_app(tmp_path)
    (app / "Contents" / "Frameworks" / "mlx.metallib").unlink()
    ok, detail = _layout(app)["mlx.metallib beside libmlx"]
    assert not ok
    assert "no mlx.metallib beside Contents/Frameworks/libmlx.dylib" in detail


def test_verify_bundle_catches_a_second_libmlx_and_a_too_new_metallib(tmp_path: Path) -> None:
    app = _fake_app(tmp_path)
    frameworks = app / "Contents" / "Frameworks"
    (frameworks / "libmlx.dylib").unlink()
    shutil.copy(frameworks / "mlx" / "lib" / "libmlx.dylib", frameworks / "libmlx.dylib")
    metallib = app / "Contents" / "Resources" / "mlx" / "lib" / "mlx.metallib"
    metallib.write_bytes(bytes.fromhex("4d544c4201800200090000811a000200") + b"\0" * 32)
    results = _layout(app)
    assert not results["libmlx layout"][0]
    assert "expected one real libmlx.dylib, found 2" in results["libmlx layout"][1]
    assert not results["deployment targets"][0]
    assert "mlx.metallib (macOS 26.2)" in results["deployment targets"][1]


def test_verify_bundle_checks_the_info_plist_version_against_pyproject(tmp_path: Path) -> None:
    app = _fake_app(tmp_path)
    plist_path = app / "Contents" / "Info.plist"
    plist = plistlib.loads(plist_path.read_bytes())
    plist["CFBundleShortVersionString"] = "0.0.1"
    plist_path.write_bytes(plistlib.dumps(plist))
    ok, detail = _layout(app)["Info.plist"]
    assert not ok and "pyproject.toml says" in detail


def test_verify_bundle_refuses_to_run_a_mac_app_elsewhere(tmp_path: Path) -> None:
    if sys.platform == "darwin":
        pytest.skip("runs the .app on a Mac")
    app = _fake_app(tmp_path)
    assert verify_bundle.main([str(app)]) == 2
    assert verify_bundle.main([str(tmp_path / "missing")]) == 2


# --- every model family's mflux package is collected -------------------------------------------


def _hook_collection(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Run packaging/hooks/hook-mflux.py with stand-ins for PyInstaller's helpers: the packages
    it collects whole, and its hidden imports."""
    collected: list[str] = []

    def collect_submodules(package: str, filter: Any = None) -> list[str]:
        collected.append(package)
        return [package]

    hooks = types.ModuleType("PyInstaller.utils.hooks")
    hooks.collect_submodules = collect_submodules  # type: ignore[attr-defined]
    hooks.copy_metadata = lambda name: []  # type: ignore[attr-defined]
    for name, module in (
        ("PyInstaller", types.ModuleType("PyInstaller")),
        ("PyInstaller.utils", types.ModuleType("PyInstaller.utils")),
        ("PyInstaller.utils.hooks", hooks),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "teacache_bundle_config", config)  # as the spec registers it
    namespace = runpy.run_path(str(PACKAGING / "hooks" / "hook-mflux.py"))
    return collected, namespace["hiddenimports"]


def _uncollected(packages: list[str]) -> list[str]:
    """Each mflux class of a family (imported for real) that lies in none of ``packages``."""
    from app.families import FAMILIES

    missing = []
    for family in FAMILIES.values():
        if family.mflux is None:
            continue
        lora = family.mflux.lora_mapping
        classes = [family.mflux.pipeline(), family.mflux.weight_definition()]
        classes += [lora()] if lora is not None else []
        for cls in classes:
            # a family's own subclass of mflux's class (Lens's weights) needs mflux's module
            module = next(c.__module__ for c in cls.__mro__ if c.__module__.startswith("mflux."))
            if not any(module.startswith(f"{package}.") for package in packages):
                missing.append(f"{family.id}: {module}")
    return missing


def test_the_mflux_hook_collects_every_familys_package(monkeypatch: pytest.MonkeyPatch) -> None:
    collected, hidden = _hook_collection(monkeypatch)
    assert _uncollected(collected) == []
    assert set(hidden) >= set(collected)
    # this year's families too (the hook once listed four packages by hand)
    assert {"mflux.models.flux3", "mflux.models.qwen21", "mflux.models.krea2"} <= set(collected)


def test_a_family_left_out_of_the_collection_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    collected, _ = _hook_collection(monkeypatch)
    without_krea = [package for package in collected if package != "mflux.models.krea2"]
    assert _uncollected(without_krea) == [
        "krea-2: mflux.models.krea2.variants.txt2img.krea2",
        "krea-2: mflux.models.krea2.weights.krea2_weight_definition",
        "krea-2: mflux.models.krea2.weights.krea2_lora_mapping",
    ]


def test_check_analysis_wants_every_familys_mflux_package() -> None:
    from app.families import mflux_packages

    assert set(mflux_packages()) <= set(config.required_modules())
    result = _good_analysis()
    result.modules -= {"mflux.models.qwen21"}
    failures = check_analysis.evaluate(result, platform="linux").failures
    assert failures == [
        "required module mflux.models.qwen21 is missing (see bundle_config.required_modules)"
    ]


# --- the self-check and the resources lookup, from source -------------------------------------


def test_selfcheck_runs_a_real_mlx_operation_from_source() -> None:
    done = subprocess.run(
        [sys.executable, str(PACKAGING / "bundle_selfcheck.py"), "--allow-cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["failures"]
    assert report["mlx"]["matmul_ok"] is True
    assert report["frozen"] is False
    assert "demo.calibration.json" in report["resources"]["demo_files"]
    # the family registry found every family a built-in variant names
    assert set(report["resources"]["variant_families"]) <= set(report["resources"]["families"])
    assert report["resources"]["families"][0] == "demo"
    # every family mflux loads imports (its mflux classes and tokenizer classes)
    from app.families import FAMILIES

    mflux_families = [f.id for f in FAMILIES.values() if f.mflux is not None]
    assert report["families"] == {"imported": mflux_families, "failures": {}}


def test_resources_dir_from_source_is_the_one_locator_everyone_uses() -> None:
    from app import paths, variants
    from app.demo import model

    assert paths.RESOURCES_DIR == ROOT / "resources"
    assert paths.DEMO_DIR == ROOT / "resources" / "demo"
    assert variants.DEMO_DIR is paths.DEMO_DIR and model.DEMO_DIR is paths.DEMO_DIR


def test_resources_dir_in_a_frozen_bundle_is_under_meipass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app import paths

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert paths.resources_dir() == tmp_path / "resources"
