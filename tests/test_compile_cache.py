"""MLX's CPU compile cache, private to each process (app/compile_cache.py, issue #39).

Each test runs MLX in a fresh subprocess with its own empty ``$TMPDIR``: MLX keeps a compiled
kernel for the life of a process, and the point is what a cold cache does. One small kernel is
compiled (g++, about a second here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.compile_cache import (
    PTX_CACHE_ENV,
    SHARED_TMPDIR_ENV,
    publish_compiled,
    shared_ptx_cache,
)

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="the private cache is Linux-only (/proc)"
)

# Compiles one kernel, then prints what its compile folder holds. argv[1]: "private" to call
# use_private_compile_cache first (what app/__main__.py and tests/conftest.py do), else MLX's own.
COMPILE = """
import os, sys
from pathlib import Path
if sys.argv[1] == "private":
    from app.compile_cache import use_private_compile_cache
    use_private_compile_cache()
import mlx.core as mx
mx.eval(mx.compile(lambda x: mx.sigmoid(x) * x + 3)(mx.arange(8, dtype=mx.float32)))
folder = Path(os.environ.get("TMPDIR", "/tmp"))
for path in sorted(folder.rglob("*")):
    print(path.relative_to(folder))
"""


def _compile(tmpdir: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != SHARED_TMPDIR_ENV}
    env["TMPDIR"] = str(tmpdir)
    return subprocess.run(
        [sys.executable, "-c", COMPILE, mode], env=env, capture_output=True, text=True, timeout=300
    )


def _libraries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("lib*.so"))


def test_a_library_another_process_is_still_writing_does_not_break_this_one(tmp_path: Path) -> None:
    # What the xdist workers met on a cold cache: MLX takes any lib<kernel>.so in its folder as
    # built and dlopens it, though another process's linker may still be writing it.
    first = _compile(tmp_path, "mlx")
    assert first.returncode == 0, first.stderr
    libraries = _libraries(tmp_path / "mlx")
    assert libraries, first.stdout
    for library in libraries:
        library.write_bytes(library.read_bytes()[:64])  # a linker part-way through

    # Engagement: MLX's own folder loads the half-written library and fails as the suite did.
    shared = _compile(tmp_path, "mlx")
    assert shared.returncode != 0
    assert "Could not load C++ shared library" in shared.stderr

    private = _compile(tmp_path, "private")
    assert private.returncode == 0, private.stderr


def test_the_store_receives_only_loaded_libraries_and_seeds_the_next_process(
    tmp_path: Path,
) -> None:
    base = tmp_path / f"teacache-studio-mlx-{os.getuid()}"
    ended = base / "process-999999999-x"  # no such process: its folder is removed
    ended.mkdir(parents=True)

    cold = _compile(tmp_path, "private")
    assert cold.returncode == 0, cold.stderr
    assert any(line.endswith(".cpp") for line in cold.stdout.splitlines())  # it compiled
    stored = _libraries(base / "store")
    assert [p.relative_to(base / "store").parts[0] for p in stored] == ["mlx"] * len(stored)
    assert stored
    assert not ended.exists()
    assert [p.name for p in base.iterdir()] == ["store"]  # the private folder went at exit
    assert not (tmp_path / "mlx").exists()  # MLX's own folder was never used

    warm = _compile(tmp_path, "private")
    assert warm.returncode == 0, warm.stderr
    assert not any(line.endswith(".cpp") for line in warm.stdout.splitlines())  # nothing built
    assert sorted(p.name for p in stored) == sorted(
        Path(line).name for line in warm.stdout.splitlines() if line.endswith(".so")
    )


def test_a_library_this_process_has_not_loaded_is_not_published(tmp_path: Path) -> None:
    private, store = tmp_path / "private", tmp_path / "store"
    half_written = private / "mlx" / "0.32.2" / "cpu" / "libkernel.so"
    half_written.parent.mkdir(parents=True)
    half_written.write_bytes(b"\x7fELF")

    assert publish_compiled(private, store) == []
    assert not store.exists()


def test_the_command_line_makes_its_compile_folder_private_before_anything_runs(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != SHARED_TMPDIR_ENV}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "app", "variants"], env=env, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == [f"teacache-studio-mlx-{os.getuid()}"]


# Prints the PTX cache folder MLX's CUDA backend would use in this process.
PTX_FOLDER = """
import os
from app.compile_cache import use_private_compile_cache
use_private_compile_cache()
print(os.environ.get("MLX_PTX_CACHE_DIR", ""))
"""


def _ptx_folder(tmpdir: Path, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {SHARED_TMPDIR_ENV, PTX_CACHE_ENV}}
    env.update(TMPDIR=str(tmpdir), **extra)
    done = subprocess.run(
        [sys.executable, "-c", PTX_FOLDER], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_cuda_kernel_cache_stays_shared_between_processes(tmp_path: Path) -> None:
    """A private $TMPDIR must not give MLX's CUDA backend an empty PTX cache in every process: it
    then re-ran NVRTC over every kernel of each cold process (a 4-step FLUX.2 Klein 4B first
    generation on an H100: 73-115 s against 0.9-8.8 s). Watched fail without the setdefault."""
    first, second = _ptx_folder(tmp_path), _ptx_folder(tmp_path)
    assert first == second == str(shared_ptx_cache(tmp_path))
    assert Path(first).is_relative_to(tmp_path) and "process-" not in first


def test_a_ptx_cache_the_user_named_is_kept(tmp_path: Path) -> None:
    mine = tmp_path / "my-ptx"
    assert _ptx_folder(tmp_path, MLX_PTX_CACHE_DIR=str(mine)) == str(mine)
