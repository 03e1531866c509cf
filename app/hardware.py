"""Where a measurement ran: the hardware-and-versions block of every benchmark report.

Two halves. ``host_info()`` runs in the orchestrating process (CPU, cores, RAM, OS, GPU, git
commit) and never imports MLX. ``runtime_info()`` runs inside a worker after MLX is loaded (MLX
device, BLAS in use, library versions), because only that process knows what MLX bound to.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent  # app/hardware.py → the repository


def _run(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def cpu_name() -> str:
    if sys.platform == "darwin":
        name = _run(["sysctl", "-n", "machdep.cpu.brand_string"])
        if name:
            return name
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def physical_memory_bytes() -> int | None:
    """Total physical memory (Linux and macOS through sysconf); None where unknown."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return int(pages) * int(page_size)


def on_mac() -> bool:
    return sys.platform == "darwin"


def os_name() -> str:
    """The operating system as a sentence names it: "macOS", "Linux"."""
    return "macOS" if on_mac() else (platform.system() or "the system")


def this_machine() -> str:
    """What the window calls the computer it runs on: "this Mac" on a Mac, else "this machine"."""
    return "this Mac" if on_mac() else "this machine"


def memory_gb_text(memory_gb: float) -> str:
    """A machine's memory as people say it, the one figure every message shows: 16, or 23.5
    where it is not whole."""
    return f"{round(memory_gb, 1):g}"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_names() -> list[str]:
    if shutil.which("nvidia-smi"):
        out = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
        if out:
            return [line.strip() for line in out.splitlines() if line.strip()]
    if sys.platform == "darwin":
        return ["Apple GPU (unified memory; see mlx device_info)"]
    return []


def git_commit() -> dict[str, object]:
    """The commit measured. ``TEACACHE_GIT_COMMIT`` overrides it where the tree is a copy
    without its ``.git`` (the lent GPU machine)."""
    override = os.environ.get("TEACACHE_GIT_COMMIT")
    if override:
        return {"commit": override, "dirty": None, "source": "TEACACHE_GIT_COMMIT"}
    commit = _run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT)
    if commit is None:
        return {"commit": None, "dirty": None, "source": "no git checkout"}
    status = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", "app"], REPO_ROOT)
    return {"commit": commit, "dirty": bool(status), "source": "git"}


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _app_version() -> str:
    from app import __version__

    return __version__  # "0.0.0+source" where the tree runs without an install (the GPU box)


def host_info() -> dict[str, Any]:
    ram = physical_memory_bytes()
    return {
        "cpu": cpu_name(),
        "machine": platform.machine(),
        "cores": usable_cores(),
        "ram_gb": None if ram is None else round(ram / 2**30, 1),
        "os": platform.platform(),
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "git": git_commit(),
    }


def blas_in_use() -> str:
    """What MLX's matmuls run on. Call after ``app.blas.preload_openblas()`` and ``import mlx``."""
    import mlx.core as mx

    device = str(mx.default_device())
    if "gpu" in device:
        cuda = getattr(mx, "cuda", None)
        if cuda is not None and getattr(cuda, "is_available", lambda: False)():
            return "cuBLAS (MLX CUDA backend)"
        return "Metal (MLX GPU backend)"
    if sys.platform == "darwin":
        return "Accelerate (MLX CPU backend)"
    from app import blas

    loaded = blas.preload_openblas()
    if loaded:
        return f"OpenBLAS preloaded ({Path(loaded).name})"
    return "MLX-bundled reference BLAS (slow; no OpenBLAS found)"


def runtime_info() -> dict[str, Any]:
    """Inside a worker, after MLX is loaded."""
    import mlx.core as mx

    info: dict[str, Any] = {
        "mlx": _version("mlx"),
        "mflux": _version("mflux"),
        "teacache_studio": _app_version(),
        "mlx_device": str(mx.default_device()),
        "blas": blas_in_use(),
    }
    try:
        details = mx.device_info()
        info["mlx_device_info"] = {
            k: v for k, v in details.items() if isinstance(v, str | int | float | bool)
        }
    except Exception:  # device_info is informative only; never fail a benchmark over it
        info["mlx_device_info"] = {}
    for variable in ("MLX_DISABLE_COMPILE", "OMP_NUM_THREADS"):
        if os.environ.get(variable):
            info.setdefault("environment", {})[variable] = os.environ[variable]
    return info


@functools.cache
def _host_label() -> str:
    return f"{cpu_name()}, {usable_cores()} cores"


def hardware_label(versions: dict[str, str]) -> str:
    """Where a run's times were measured, for a label beside them: "AMD EPYC 7B13, 2 cores,
    MLX cpu" (``versions`` is a report's, which names the MLX device)."""
    device = versions.get("mlx_device", "")
    kind = device.removeprefix("Device(").split(",")[0].strip() if device else ""
    return _host_label() + (f", MLX {kind}" if kind else "")
