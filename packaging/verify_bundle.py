"""Verify a built bundle: its layout, then the frozen programs themselves.

    python packaging/verify_bundle.py "dist/TeaCache Studio.app"     # macOS
    python packaging/verify_bundle.py dist/teacache-studio            # Linux onedir

Layout: exactly one real ``libmlx`` in ``mlx/lib``; on macOS an ``mlx.metallib`` beside every
path a ``libmlx.dylib`` can be loaded from (MLX finds its kernels with ``dladdr()``, stenoai#515),
the metallib and every Mach-O built for no newer macOS than ``LSMinimumSystemVersion``, arm64
executables and the Info.plist keys; ``resources/demo`` present; nothing the spec excludes.
Runtime, in a clean environment (no PYTHONPATH, a temporary home, offscreen Qt, offline hub):
``--version``, ``variants --json``, the bundled self-check (a real MLX operation, on the GPU on
macOS, and every model family importable) and ``--smoke-test`` (the main window offscreen and
one demo generation).

Each failed check prints ``FAIL <check>: <why>``; the exit code is 1 when any failed.
Standard library only, so any Python 3.11+ can run it against any bundle.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import plistlib
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


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

# ---------------------------------------------------------------------------------------------
# Mach-O and metallib headers (enough to check load paths and deployment targets off a Mac too)

MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC = 0xCAFEBABE
FAT_MAGIC_64 = 0xCAFEBABF
CPU_TYPE_ARM64 = 0x0100000C
CPU_TYPE_X86_64 = 0x01000007
LC_REQ_DYLD = 0x80000000
LC_ID_DYLIB = 0xD
LC_LOAD_DYLIB = 0xC
LC_LOAD_WEAK_DYLIB = 0x18 | LC_REQ_DYLD
LC_REEXPORT_DYLIB = 0x1F | LC_REQ_DYLD
LC_LOAD_UPWARD_DYLIB = 0x23 | LC_REQ_DYLD
LC_RPATH = 0x1C | LC_REQ_DYLD
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32
PLATFORM_MACOS = 1
_LOAD_COMMANDS = {LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LOAD_UPWARD_DYLIB}


@dataclass
class MachO:
    cpu_type: int
    dylibs: list[str] = field(default_factory=list)
    rpaths: list[str] = field(default_factory=list)
    install_name: str | None = None
    min_macos: tuple[int, int, int] | None = None


def _decode_version(packed: int) -> tuple[int, int, int]:
    return packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF


def _lc_string(data: bytes, command_start: int, command_size: int) -> str:
    (offset,) = struct.unpack_from("<I", data, command_start + 8)
    raw = data[command_start + offset : command_start + command_size]
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_macho(data: bytes, prefer_cpu: int = CPU_TYPE_ARM64) -> MachO | None:
    """Parse a thin 64-bit little-endian Mach-O, or the preferred slice of a fat one."""
    if len(data) < 32:
        return None
    (magic_be,) = struct.unpack_from(">I", data, 0)
    if magic_be in (FAT_MAGIC, FAT_MAGIC_64):
        (count,) = struct.unpack_from(">I", data, 4)
        slices: list[tuple[int, int, int]] = []
        for index in range(count):
            if magic_be == FAT_MAGIC:
                cpu, _sub, offset, size, _align = struct.unpack_from(">iiIII", data, 8 + 20 * index)
            else:
                cpu, _sub, offset, size, _align, _res = struct.unpack_from(
                    ">iiQQII", data, 8 + 32 * index
                )
            slices.append((cpu, offset, size))
        if not slices:
            return None
        cpu, offset, size = next((s for s in slices if s[0] == prefer_cpu), slices[0])
        return parse_macho(data[offset : offset + size], prefer_cpu)
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic != MH_MAGIC_64:
        return None
    cpu_type, _sub, _filetype, ncmds, _sizeofcmds, _flags, _reserved = struct.unpack_from(
        "<iiIIIII", data, 4
    )
    result = MachO(cpu_type=cpu_type)
    position = 32
    for _ in range(ncmds):
        command, size = struct.unpack_from("<II", data, position)
        if command in _LOAD_COMMANDS:
            result.dylibs.append(_lc_string(data, position, size))
        elif command == LC_ID_DYLIB:
            result.install_name = _lc_string(data, position, size)
        elif command == LC_RPATH:
            result.rpaths.append(_lc_string(data, position, size))
        elif command == LC_BUILD_VERSION:
            platform, minos = struct.unpack_from("<II", data, position + 8)
            if platform == PLATFORM_MACOS:
                result.min_macos = _decode_version(minos)
        elif command == LC_VERSION_MIN_MACOSX:
            (version,) = struct.unpack_from("<I", data, position + 8)
            result.min_macos = _decode_version(version)
        position += size
    return result


def read_macho(path: Path) -> MachO | None:
    with path.open("rb") as handle:
        head = handle.read(4)
        if len(head) < 4 or struct.unpack(">I", head)[0] not in (
            FAT_MAGIC,
            FAT_MAGIC_64,
            0xCFFAEDFE,  # MH_MAGIC_64 read big-endian
        ):
            return None
        return parse_macho(head + handle.read())


def metallib_target(path: Path) -> tuple[int, int] | None:
    """The macOS version a metallib was built for, from its header.

    Layout (seen in the mlx-metal 0.32.2 wheels for macOS 14, 15 and 26): ``MTLB``, u16 target
    platform, u16+u16 file version, u8 type, u8 OS (0x81 = macOS), u16+u16 OS version.
    """
    with path.open("rb") as handle:
        header = handle.read(16)
    if len(header) < 16 or header[:4] != b"MTLB":
        return None
    if header[11] & 0x7F != 0x01:  # not a macOS library
        return None
    major, minor = struct.unpack_from("<HH", header, 12)
    return major, minor


def parse_version(text: str) -> tuple[int, int, int]:
    parts = [int(part) for part in text.split(".")][:3]
    major, minor, patch = [*parts, 0, 0, 0][:3]
    return major, minor, patch


def resolve_install_name(
    name: str, binary: Path, rpaths: list[str], executable_dir: Path
) -> list[Path]:
    """Candidate paths dyld tries for a dependency, in order (no DYLD_* variables)."""

    def expand(text: str) -> str:
        return text.replace("@loader_path", str(binary.parent)).replace(
            "@executable_path", str(executable_dir)
        )

    if name.startswith("@rpath/"):
        rest = name.removeprefix("@rpath/")
        return [Path(os.path.normpath(Path(expand(rpath)) / rest)) for rpath in rpaths]
    if name.startswith(("@loader_path", "@executable_path")):
        return [Path(os.path.normpath(expand(name)))]
    return [Path(name)]


# ---------------------------------------------------------------------------------------------
# The bundle


@dataclass
class Bundle:
    root: Path
    macos: bool
    executable: Path
    selfcheck: Path
    internal: Path  # sys._MEIPASS: _internal/ or Contents/Frameworks
    info_plist: Path | None

    @classmethod
    def locate(cls, path: Path) -> Bundle:
        path = path.resolve()
        if path.suffix == ".app":
            contents = path / "Contents"
            return cls(
                root=path,
                macos=True,
                executable=contents / "MacOS" / config.EXECUTABLE_NAME,
                selfcheck=contents / "MacOS" / config.SELFCHECK_NAME,
                internal=contents / "Frameworks",
                info_plist=contents / "Info.plist",
            )
        return cls(
            root=path,
            macos=False,
            executable=path / config.EXECUTABLE_NAME,
            selfcheck=path / config.SELFCHECK_NAME,
            internal=path / "_internal",
            info_plist=None,
        )

    def files(self) -> Iterator[Path]:
        """Every regular file (no symlinks), so each real copy counts once."""
        for directory, _dirs, names in os.walk(self.root):
            for name in names:
                path = Path(directory, name)
                if not path.is_symlink() and path.is_file():
                    yield path


class CheckFailed(Exception):
    pass


@dataclass
class Verifier:
    bundle: Bundle
    allow_cpu: bool = False
    timeout: float = 900.0
    results: list[tuple[str, bool, str]] = field(default_factory=list)
    selfcheck_report: dict[str, Any] | None = None  # the frozen self-check's JSON, once it ran

    def check(self, name: str, function: Callable[[], str | None]) -> None:
        started = time.monotonic()
        try:
            detail = function() or ""
            self.results.append((name, True, detail))
            took = time.monotonic() - started
            print(f"ok   {name}" + (f": {detail}" if detail else "") + f" ({took:.1f} s)")
        except CheckFailed as failure:
            self.results.append((name, False, str(failure)))
            print(f"FAIL {name}: {failure}")
        except Exception as error:  # a bug or an unreadable file: still one clear line
            self.results.append((name, False, f"{type(error).__name__}: {error}"))
            print(f"FAIL {name}: {type(error).__name__}: {error}")

    @property
    def failed(self) -> list[str]:
        return [name for name, ok, _ in self.results if not ok]

    # -- layout ----------------------------------------------------------------------------

    def executables(self) -> str:
        missing = [p for p in (self.bundle.executable, self.bundle.selfcheck) if not p.is_file()]
        if missing:
            raise CheckFailed(f"missing {', '.join(str(p) for p in missing)}")
        if not os.access(self.bundle.executable, os.X_OK):
            raise CheckFailed(f"{self.bundle.executable} is not executable")
        if self.bundle.macos:
            for program in (self.bundle.executable, self.bundle.selfcheck):
                macho = read_macho(program)
                if macho is None or macho.cpu_type != CPU_TYPE_ARM64:
                    raise CheckFailed(f"{program.name} is not an arm64 Mach-O executable")
            return "arm64"
        return ""

    def info_plist(self) -> str:
        assert self.bundle.info_plist is not None
        if not self.bundle.info_plist.is_file():
            raise CheckFailed(f"no {self.bundle.info_plist}")
        with self.bundle.info_plist.open("rb") as handle:
            plist = plistlib.load(handle)
        missing = [key for key in config.REQUIRED_PLIST_KEYS if key not in plist]
        if missing:
            raise CheckFailed(f"Info.plist lacks {', '.join(missing)}")
        expected = config.numeric_version(config.project_version())
        if plist["CFBundleShortVersionString"] != expected:
            raise CheckFailed(
                f"CFBundleShortVersionString is {plist['CFBundleShortVersionString']!r}, "
                f"pyproject.toml says {expected!r}"
            )
        if plist.get("CFBundleExecutable") != config.EXECUTABLE_NAME:
            raise CheckFailed(f"CFBundleExecutable is {plist.get('CFBundleExecutable')!r}")
        if plist["NSRequiresAquaSystemAppearance"] is not False:
            raise CheckFailed("NSRequiresAquaSystemAppearance must be False (dark mode)")
        return f"{plist['CFBundleIdentifier']} {expected}, macOS {plist['LSMinimumSystemVersion']}+"

    def libmlx_layout(self) -> str:
        name = "libmlx.dylib" if self.bundle.macos else "libmlx.so"
        copies = [path for path in self.bundle.files() if path.name == name]
        expected = self.bundle.internal / "mlx" / "lib" / name
        if len(copies) != 1:
            listed = ", ".join(str(p.relative_to(self.bundle.root)) for p in copies) or "none"
            raise CheckFailed(f"expected one real {name}, found {len(copies)}: {listed}")
        if copies[0].resolve() != expected.resolve():
            raise CheckFailed(f"{name} is at {copies[0]}, not in mlx/lib")
        return str(copies[0].relative_to(self.bundle.root))

    def metallib_beside_libmlx(self) -> str:
        """Every path a libmlx.dylib can be opened from has an mlx.metallib beside it."""
        loadable = [
            path
            for path in self.bundle.root.rglob("libmlx.dylib")
            if path.exists()  # a file, or a link that resolves
        ]
        if not loadable:
            raise CheckFailed("no libmlx.dylib in the bundle")
        lonely = [p for p in loadable if not (p.parent / "mlx.metallib").is_file()]
        if lonely:
            where = ", ".join(str(p.relative_to(self.bundle.root)) for p in lonely)
            raise CheckFailed(
                f"no mlx.metallib beside {where}: MLX would fail with 'Failed to load the "
                "default metallib' when dyld reports that path"
            )
        # And what the extension module will actually load, following its rpaths.
        executable_dir = self.bundle.executable.parent
        core = sorted(self.bundle.internal.glob("mlx/core.*.so"))
        if not core:
            raise CheckFailed("no mlx/core.*.so extension")
        macho = read_macho(core[0])
        if macho is None:
            raise CheckFailed(f"{core[0]} is not a Mach-O file")
        for dylib in macho.dylibs:
            if Path(dylib).name != "libmlx.dylib":
                continue
            candidates = resolve_install_name(dylib, core[0], macho.rpaths, executable_dir)
            found = next((c for c in candidates if c.exists()), None)
            if found is None:
                raise CheckFailed(f"mlx.core links {dylib}; none of {candidates} exists")
            if not (found.parent / "mlx.metallib").is_file():
                raise CheckFailed(f"mlx.core loads {found}, which has no mlx.metallib beside it")
            return f"mlx.core loads {found.relative_to(self.bundle.root)}, kernels beside it"
        raise CheckFailed("mlx.core does not link libmlx.dylib")

    def deployment_targets(self) -> str:
        assert self.bundle.info_plist is not None
        with self.bundle.info_plist.open("rb") as handle:
            minimum = parse_version(plistlib.load(handle)["LSMinimumSystemVersion"])
        metallibs = [p for p in self.bundle.files() if p.suffix == ".metallib"]
        if not metallibs:
            raise CheckFailed("no .metallib in the bundle")
        too_new: list[str] = []
        for path in metallibs:
            target = metallib_target(path)
            if target is None:
                raise CheckFailed(f"{path.name}: not a macOS metallib")
            if (*target, 0) > minimum:
                too_new.append(f"{path.name} (macOS {target[0]}.{target[1]})")
        count = 0
        for path in self.bundle.files():
            macho = read_macho(path)
            if macho is None:
                continue
            count += 1
            if macho.min_macos and macho.min_macos > minimum:
                version = ".".join(str(part) for part in macho.min_macos)
                too_new.append(f"{path.relative_to(self.bundle.root)} (macOS {version})")
        if too_new:
            shown = ", ".join(too_new[:6]) + (" ..." if len(too_new) > 6 else "")
            raise CheckFailed(
                f"built for a newer macOS than LSMinimumSystemVersion "
                f"{'.'.join(map(str, minimum))}: {shown}. Build with packaging/macos/build.sh, "
                "which installs wheels for MACOSX_DEPLOYMENT_TARGET"
            )
        return f"{count} Mach-O files and {len(metallibs)} metallib, none newer than the minimum"

    def resources(self) -> str:
        demo = self.bundle.internal / "resources" / "demo"
        if not demo.is_dir():
            raise CheckFailed(f"no {demo} (the embedded demo model)")
        files = sorted(path.name for path in demo.iterdir())
        if not files:
            raise CheckFailed(f"{demo} is empty")
        # Everything resources/ holds in this checkout (the demo weights among it) is shipped.
        missing = [
            f"{folder}/{Path(source).name}"
            for source, folder in config.resource_datas()
            if not (self.bundle.internal / folder / Path(source).name).is_file()
        ]
        if missing:
            raise CheckFailed(f"not in the bundle: {', '.join(missing)}")
        # Only what the app reads: no research results, benchmark reports or training records.
        root = self.bundle.internal / "resources"
        extra = sorted(
            str(path.relative_to(root))
            for path in root.rglob("*")
            if path.is_file() and not config.is_runtime_resource(path.relative_to(root))
        )
        if extra:
            raise CheckFailed(f"not runtime resources, yet bundled: {', '.join(extra[:8])}")
        return ", ".join(files)

    def openblas(self) -> str:
        found = sorted(self.bundle.internal.glob("opencv_python*.libs/libopenblas*.so*"))
        if not found:
            raise CheckFailed("no OpenCV OpenBLAS under _internal: app/blas.py has none to preload")
        return str(found[0].relative_to(self.bundle.root))

    def nothing_excluded(self) -> str:
        offenders: list[str] = []
        top_dirs = (
            {p.name for p in self.bundle.internal.iterdir()}
            if self.bundle.internal.is_dir()
            else set()
        )
        for module in config.EXCLUDED_MODULES:
            if "." not in module and module in top_dirs:
                offenders.append(module + "/")
        for path in self.bundle.files():
            if any(fragment in path.name for fragment in config.FORBIDDEN_LIBRARY_FRAGMENTS):
                offenders.append(str(path.relative_to(self.bundle.root)))
        if offenders:
            raise CheckFailed("excluded parts are in the bundle: " + ", ".join(offenders[:8]))
        return ""

    # -- runtime ---------------------------------------------------------------------------

    def _environment(self, home: Path) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PYTHON", "VIRTUAL_ENV", "QT_", "DYLD_", "TEACACHE_"))
            and key not in ("LD_LIBRARY_PATH", "LD_PRELOAD")
        }
        env.update(
            {
                "TEACACHE_STUDIO_HOME": str(home),
                "QT_QPA_PLATFORM": "offscreen",
                "HF_HUB_OFFLINE": "1",
                "TQDM_DISABLE": "1",
            }
        )
        return env

    def _run(
        self, program: Path, *args: str, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="tcs-verify-") as scratch:
            home = Path(scratch)
            try:
                return subprocess.run(
                    [str(program), *args],
                    cwd=home,  # away from the source tree, so nothing leaks in from it
                    env=self._environment(home),
                    capture_output=True,
                    text=True,
                    timeout=timeout or self.timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as expired:
                raise CheckFailed(
                    f"{program.name} {' '.join(args)} ran past {expired.timeout:.0f} s"
                ) from None

    @staticmethod
    def _last_lines(text: str, count: int = 6) -> str:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return " | ".join(lines[-count:]) or "(no output)"

    def version(self) -> str:
        done = self._run(self.bundle.executable, "--version", timeout=120)
        expected = config.project_version()
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or expected not in output:
            raise CheckFailed(
                f"exit {done.returncode}, wanted version {expected}: {self._last_lines(output)}"
            )
        return output

    def variants(self) -> str:
        done = self._run(self.bundle.executable, "variants", "--json", timeout=120)
        if done.returncode != 0:
            raise CheckFailed(f"exit {done.returncode}: {self._last_lines(done.stderr)}")
        try:
            rows = json.loads(done.stdout)
        except json.JSONDecodeError as error:
            raise CheckFailed(f"not JSON ({error}): {self._last_lines(done.stdout)}") from None
        ids = {row.get("id") for row in rows}
        if not {"demo", "demo-turbo"} <= ids:
            raise CheckFailed(f"the demo variants are missing from {sorted(ids)}")
        return f"{len(rows)} variants"

    def selfcheck(self) -> str:
        args = ["--allow-cpu"] if self.allow_cpu else []
        done = self._run(self.bundle.selfcheck, *args, timeout=300)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise CheckFailed(
                f"exit {done.returncode}, no JSON: {self._last_lines(done.stdout + done.stderr)}"
            ) from None
        self.selfcheck_report = report
        if done.returncode != 0 or not report.get("ok"):
            raise CheckFailed("; ".join(report.get("failures", [])) or f"exit {done.returncode}")
        mlx = report["mlx"]
        root = str(self.bundle.root)
        loaded = [path.removeprefix(root + os.sep) for path in mlx["libmlx_loaded"]]
        return f"MLX {mlx['mlx_version']} on {mlx['device']}, loaded {', '.join(loaded)}"

    def families(self) -> str:
        """Every model family importable in the bundle, from the self-check's report."""
        report = self.selfcheck_report
        if report is None:
            raise CheckFailed("the self-check gave no report")
        families = report.get("families", {})
        if families.get("failures") or not families.get("imported"):
            problems = "; ".join(f"{k}: {v}" for k, v in families.get("failures", {}).items())
            raise CheckFailed(problems or "no family was imported")
        return f"{len(families['imported'])} importable: {', '.join(families['imported'])}"

    def smoke_test(self) -> str:
        done = self._run(self.bundle.executable, "--smoke-test")
        if done.returncode != 0:
            raise CheckFailed(
                f"exit {done.returncode}: {self._last_lines(done.stdout + done.stderr, 10)}"
            )
        return self._last_lines(done.stdout + done.stderr, 2)

    # -- all -------------------------------------------------------------------------------

    def run_all(self, smoke_test: bool, layout_only: bool = False) -> int:
        bundle = self.bundle
        print(f"verifying {bundle.root} ({'macOS .app' if bundle.macos else 'onedir'})")
        self.check("executables", self.executables)
        if bundle.macos:
            self.check("Info.plist", self.info_plist)
        self.check("libmlx layout", self.libmlx_layout)
        if bundle.macos:
            self.check("mlx.metallib beside libmlx", self.metallib_beside_libmlx)
            self.check("deployment targets", self.deployment_targets)
        else:
            self.check("OpenBLAS collected", self.openblas)
        self.check("resources/demo", self.resources)
        self.check("no excluded modules", self.nothing_excluded)
        if layout_only:
            print("skip the runtime checks (--layout-only)")
        else:
            self.check("--version", self.version)
            self.check("variants --json", self.variants)
            self.check("self-check (real MLX op)", self.selfcheck)
            self.check("model families", self.families)
            if smoke_test:
                self.check("--smoke-test", self.smoke_test)
            else:
                print("skip --smoke-test (--skip-smoke-test)")
        size = sum(path.stat().st_size for path in bundle.files())
        print(f"bundle size: {size / 2**20:.0f} MiB in {bundle.root}")
        if self.failed:
            print(f"{len(self.failed)} check(s) failed: {', '.join(self.failed)}")
            return 1
        print("all checks passed")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a built TeaCache Studio bundle.")
    parser.add_argument("bundle", type=Path, help="the .app (macOS) or the onedir folder (Linux)")
    parser.add_argument(
        "--skip-smoke-test", action="store_true", help="leave out the app's --smoke-test"
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="accept MLX without Metal (macOS VMs such as CI runners have no GPU)",
    )
    parser.add_argument(
        "--layout-only",
        action="store_true",
        help="check files and headers only, run nothing (works on any OS, e.g. a .app on Linux)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per program run")
    args = parser.parse_args(argv)

    if not args.bundle.exists():
        print(f"verify_bundle: no bundle at {args.bundle}; build it first", file=sys.stderr)
        return 2
    bundle = Bundle.locate(args.bundle)
    if bundle.macos and sys.platform != "darwin" and not args.layout_only:
        print(
            "verify_bundle: a macOS .app runs only on macOS; use --layout-only elsewhere",
            file=sys.stderr,
        )
        return 2
    verifier = Verifier(bundle, allow_cpu=args.allow_cpu, timeout=args.timeout)
    return verifier.run_all(smoke_test=not args.skip_smoke_test, layout_only=args.layout_only)


if __name__ == "__main__":
    sys.exit(main())
