"""MLX's CPU compile cache between processes (issue #39): the race, and what the fix costs.

``race``: rounds of PROCESSES fresh processes started together on one empty ``$TMPDIR``, each
compiling the same KERNELS small ``mx.compile``d functions (one g++ each), in MLX's own shared
folder and with ``app.compile_cache.use_private_compile_cache``; counts the processes that failed.

``cost``: in a fresh process, the demo's compiled activations (mlx.nn's SiLU and ReLU, the three
kernels ``generate --variant demo`` compiles) timed in parts after ``app`` is imported: the
private folder's set-up (seeding from the store), the first evaluation (g++ on a cold cache, a
dlopen on a warm one), publishing; cold and warm, MLX's own folder and private, interleaved,
medians::

    uv run python -m lab.bench.compile_cache --rounds 5 --reps 3 --out lab/bench/results/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.compile_cache import SHARED_TMPDIR_ENV
from app.fileio.jsonio import dumps_json
from app.hardware import git_commit, host_info

PROCESSES = 3
KERNELS = 10
# Waits until the start time given, then compiles KERNELS functions; exit 1 on MLX's error.
RACER = """
import sys, time
if sys.argv[1] == "private":
    from app.compile_cache import use_private_compile_cache
    use_private_compile_cache()
import mlx.core as mx
ops = [mx.sigmoid, mx.tanh, mx.exp, mx.abs, mx.sin, mx.cos, mx.log1p, mx.sqrt, mx.square,
       mx.negative][: int(sys.argv[3])]
x = mx.arange(64, dtype=mx.float32)
while time.time() < float(sys.argv[2]):
    time.sleep(0.001)
try:
    for op in ops:
        mx.eval(mx.compile(lambda x, op=op: op(x) * x + 1)(x))
except RuntimeError as error:
    sys.exit(f"{type(error).__name__}: {error}")
"""
# The cost: the demo's compiled activations (SiLU on a contiguous and a strided array, ReLU:
# three kernels) in a fresh process, timed in parts; prints one JSON line.
TIMER = """
import sys, time
from pathlib import Path
from app.compile_cache import publish_compiled, use_private_compile_cache
started = time.perf_counter()
private = None
if sys.argv[1] == "private":
    private = use_private_compile_cache()
setup = time.perf_counter() - started
import mlx.core as mx
import mlx.nn as nn
x = mx.random.normal((4, 64, 256))
mx.eval(x)
started = time.perf_counter()
mx.eval(nn.silu(x), nn.silu(x[:, ::2, :]), nn.relu(x))
first_eval = time.perf_counter() - started
publish = None
if private is not None:
    started = time.perf_counter()
    publish_compiled(private, private.parent / "store")
    publish = time.perf_counter() - started
from app.fileio.jsonio import dumps_json
print(dumps_json({"setup_s": setup, "first_eval_s": first_eval, "publish_s": publish}))
"""


def _env(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SHARED_TMPDIR_ENV}
    env["TMPDIR"] = str(tmpdir)
    return env


def race(mode: str, rounds: int) -> dict[str, object]:
    failed, errors = 0, []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cold:
            start = str(time.time() + 3)  # every process imported MLX by then
            racers = [
                subprocess.Popen(
                    [sys.executable, "-c", RACER, mode, start, str(KERNELS)],
                    env=_env(Path(cold)),
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(PROCESSES)
            ]
            for racer in racers:
                _, stderr = racer.communicate()
                if racer.returncode:
                    failed += 1
                    errors.append(stderr.strip().splitlines()[-1][:160])
    return {"rounds": rounds, "processes": rounds * PROCESSES, "failed": failed, "errors": errors}


def _timed(mode: str, tmpdir: Path) -> dict[str, float | None]:
    done = subprocess.run(
        [sys.executable, "-c", TIMER, mode],
        env=_env(tmpdir),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def cost(reps: int) -> dict[str, dict[str, object]]:
    """Per condition (MLX's own folder or private, cold or warm), the median of each part."""
    runs: dict[str, list[dict[str, float | None]]] = {}
    for _ in range(reps):
        for mode in ("own", "private"):
            with tempfile.TemporaryDirectory() as folder:
                runs.setdefault(f"{mode} cold", []).append(_timed(mode, Path(folder)))
                runs.setdefault(f"{mode} warm", []).append(_timed(mode, Path(folder)))
    summary: dict[str, dict[str, object]] = {}
    for name, rows in runs.items():
        summary[name] = {
            part: round(statistics.median(float(r[part] or 0.0) for r in rows), 4)
            for part in ("setup_s", "first_eval_s", "publish_s")
            if rows[0][part] is not None
        }
        summary[name]["runs"] = rows
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = {
        "command": "uv run python -m lab.bench.compile_cache " + " ".join(argv or sys.argv[1:]),
        "machine": host_info(),
        "commit": git_commit(),
        "load_average_at_start": os.getloadavg(),
        "race": {mode: race(mode, args.rounds) for mode in ("own", "private")},
        "cost": cost(args.reps),
    }
    result["load_average_at_end"] = os.getloadavg()
    args.out.write_text(dumps_json(result, indent=2) + "\n")
    print(dumps_json({k: result[k] for k in ("race", "cost")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
