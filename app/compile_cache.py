"""MLX's CPU compile cache, private to each process and shared only through atomic renames.

MLX 0.32.2 JIT-builds every fused kernel of an ``mx.compile``d function on its CPU backend (mlx.nn's
activations are such functions, so the demo compiles too): ``compile`` in
``mlx/backend/cpu/compiled.cpp`` looks for ``lib<kernel>.so`` in
``std::filesystem::temp_directory_path() / "mlx" / <version> / "cpu"`` (``$TMPDIR``, read at each
compile, else /tmp) and dlopens it if the file exists; if not, it writes ``<kernel>.cpp`` there and
runs ``g++ … -o lib<kernel>.so`` straight onto that path. Only a mutex inside the process guards
it, and kernel names are the same in every process, so two processes compiling one kernel at once
share the files: one dlopens the library the other's linker is still writing ("Could not load C++
shared library …: file too short"), or truncates the source the other's g++ is reading.

``use_private_compile_cache`` points this process's ``$TMPDIR`` (MLX's, and the g++ it starts) at a
folder of its own, seeded with hard links to the complete libraries of a per-user store. At exit
each library MLX has loaded (present in ``/proc/self/maps``, so its g++ finished and dlopen read it
whole) is copied into the store under a temporary name and renamed into place: another process
sees it whole or not at all, and never a file being written. Python's own temporary files keep the
original folder. Linux only (``/proc``): macOS compiles for Metal, where this cache is not used.

MLX's CUDA backend keeps its own cache of NVRTC-compiled kernels in the same temporary folder
(``mlx/<version>/ptx``, or ``$MLX_PTX_CACHE_DIR``). A private ``$TMPDIR`` alone would hand every
process an empty one: each cold process then re-ran NVRTC over every kernel (measured on an H100:
a 4-step first generation of FLUX.2 Klein 4B took 73-115 s against 0.9-8.8 s before). So the PTX
cache stays where MLX would have put it under the shared folder, unless the user named one.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

# The temporary folder this process started with, inherited by the processes it starts (their
# $TMPDIR is this process's private folder) so they share the same store.
SHARED_TMPDIR_ENV = "TEACACHE_STUDIO_SHARED_TMPDIR"
PTX_CACHE_ENV = "MLX_PTX_CACHE_DIR"  # MLX's CUDA backend reads it (mlx/backend/cuda/jit_module.cpp)
_MAPS = Path("/proc/self/maps")
_private: Path | None = None


def use_private_compile_cache() -> Path | None:
    """Give this process its own MLX compile folder (returned), before MLX compiles anything.
    Idempotent; None where it does not apply (no ``/proc``) or the folders cannot be made, and
    MLX keeps its own folder."""
    global _private
    if _private is not None or not _MAPS.exists():
        return _private
    root = os.environ.get(SHARED_TMPDIR_ENV) or tempfile.gettempdir()
    base = Path(root) / f"teacache-studio-mlx-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        if base.stat().st_uid != os.getuid():  # never load libraries another user could plant
            return None
        _remove_folders_of_ended_processes(base)
        private = Path(tempfile.mkdtemp(prefix=f"process-{os.getpid()}-", dir=base))
        _seed(base / "store", private)
    except OSError:
        return None
    tempfile.tempdir = root
    os.environ[SHARED_TMPDIR_ENV] = root
    os.environ.setdefault(PTX_CACHE_ENV, str(shared_ptx_cache(Path(root))))
    os.environ["TMPDIR"] = str(private)
    _private = private
    atexit.register(_finish, private, base / "store")
    return private


def shared_ptx_cache(root: Path) -> Path:
    """Where MLX's CUDA backend would keep its compiled kernels with ``root`` as ``$TMPDIR``."""
    try:
        version = importlib.metadata.version("mlx")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return root / "mlx" / version / "ptx"


def publish_compiled(private: Path, store: Path) -> list[Path]:
    """Copy each library under ``private`` that this process has loaded, and the store lacks, into
    the store (a temporary name, then an atomic rename). Returns the store paths written."""
    written = []
    for library in _loaded_libraries(private):
        target = store / library.relative_to(private)
        if target.exists():
            continue
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(library, partial)
            os.replace(partial, target)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink()
            continue
        written.append(target)
    return written


def _loaded_libraries(folder: Path) -> set[Path]:
    prefix = f"{folder}{os.sep}"
    loaded = set()
    for line in _MAPS.read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix) and fields[5].endswith(".so"):
            loaded.add(Path(fields[5]))
    return loaded


def _seed(store: Path, private: Path) -> None:
    for library in store.rglob("lib*.so"):
        copy = private / library.relative_to(store)
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(library, copy)
        except OSError:
            shutil.copyfile(library, copy)


def _remove_folders_of_ended_processes(base: Path) -> None:
    for folder in base.glob("process-*-*"):
        pid = folder.name.split("-")[1]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _finish(private: Path, store: Path) -> None:
    publish_compiled(private, store)
    shutil.rmtree(private, ignore_errors=True)
