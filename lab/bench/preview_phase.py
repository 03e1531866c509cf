"""In-process cost of the live-preview phase (issue #20), robust to a shared CPU: one process,
many short loops, the modes interleaved, medians. A stand-in FLUX.2 loop (packed latents
(1, (S/16)², 128), one matrix product per step as the "transformer") drives the real
``StepPreviewer`` three ways:

- ``off``: no previews;
- ``blocking``: the previous design — mflux's unpacking, the projection, and the host transfer
  inside the step's own callback (the decode returns a NumPy image, so nothing is queued);
- ``queued``: the product — the packed projection queued with ``mx.async_eval``, picked up at
  the next step's end (the last after the loop).

Reported per step: the previewer's host time (what ``gate.untimed()`` takes out of the loop), the
loop's wall time, whose excess over ``off`` is the preview's whole cost wherever it lands, and
(counted, not timed) the host transfers that had to wait for device work (the thumbnail still had
graph nodes to run: ``lab.bench.step_work.graph_nodes``)::

    uv run python -m lab.bench.preview_phase --size 1024 --reps 60
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import types
from pathlib import Path
from typing import Any

from lab.readme_figures import Passage, fixed

STEPS = 8
# The H200 run the README quotes: this command's printout, with the command as its first line.
H200 = Path(__file__).parent / "results" / "preview-phase-h200.txt"
MODE_LINE = re.compile(
    r"^\s+(?P<mode>\w+)\s+previewer host\s+(?P<host_ms>[\d.]+) ms/step, loop wall\s+"
    r"(?P<wall_ms>[\d.]+) ms/step \((?P<over_ms>[+-][\d.]+) over off\), waiting transfers "
    r"(?P<waits>[\d.]+)/step$"
)


def mode_line(name: str, host: float, wall: float, over: float, waits: float) -> str:
    """One mode's line of the printout (seconds in, milliseconds shown)."""
    return (
        f"  {name:8s} previewer host {host * 1000:6.3f} ms/step, loop wall "
        f"{wall * 1000:6.2f} ms/step ({over * 1000:+.2f} over off), "
        f"waiting transfers {waits:.2f}/step"
    )


def parse(text: str) -> dict[str, dict[str, float]]:
    """Mode → its figures (``host_ms``, ``wall_ms``, ``over_ms``, ``waits``), read back from the
    printout (``mode_line``); other lines are left alone."""
    modes: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = MODE_LINE.match(line)
        if match:
            modes[match["mode"]] = {
                k: float(v) for k, v in match.groupdict().items() if k != "mode"
            }
    return modes


def readme_figures() -> list[Passage]:
    """The in-process figures the README quotes from the H200 run, the queued preview's added
    wall time also as a share of the cold benchmark's Klein 4B computed step."""
    from lab.bench import previews

    modes = parse(H200.read_text(encoding="utf-8"))
    step_ms = (
        previews.load(previews.H200)["summary"]["median_computed_step_seconds_previews_off"] * 1000
    )
    queued, blocking = modes["queued"], modes["blocking"]
    return [
        Passage(
            "lab/bench/results/preview-phase-h200.txt",
            "a queued preview adds {over} ms of wall time per step, {share}% of a Klein 4B "
            "computed step.",
            {
                "over": fixed(queued["over_ms"], 2),
                "share": fixed(queued["over_ms"] / step_ms * 100, 1),
            },
        ),
        Passage(
            "lab/bench/results/preview-phase-h200.txt",
            "(counted: {queued} waiting transfers per step, was {blocking};",
            {"queued": f"{queued['waits']:g}", "blocking": f"{blocking['waits']:g}"},
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="In-process cost of the live-preview phase.")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--reps", type=int, default=60)
    args = p.parse_args(argv)
    from app.blas import preload_openblas

    preload_openblas()
    import mlx.core as mx
    import numpy as np

    from app.adapters import previews
    from app.families import get_family
    from lab.bench.step_work import graph_nodes

    waits = [0]
    to_host = previews.to_host

    def counting_to_host(image: Any) -> np.ndarray:
        if isinstance(image, mx.array) and graph_nodes(image):
            waits[0] += 1  # this transfer has device work to wait for: a sync
        return to_host(image)

    previews.to_host = counting_to_host  # the previewer's pick-up reads it at call time

    tokens = (args.size // 16) ** 2
    transformer = mx.random.normal((128, 128)) * 0.05
    flux2 = get_family("flux2").require_preview()
    queued = previews.family_projection(get_family("flux2"))

    def blocking(latents: mx.array, height: int, width: int) -> np.ndarray:
        unpacked = flux2.unpack(latents, height, width)
        thumbnail = previews.project_to_rgb(unpacked, flux2.factors, flux2.bias)
        return counting_to_host(thumbnail)

    class Scheduler:
        sigmas = mx.linspace(1, 0, STEPS + 1)

        def step(self, noise: mx.array, timestep: int, latents: mx.array, **_: Any) -> mx.array:
            return latents + (self.sigmas[timestep + 1] - self.sigmas[timestep]) * noise

    def loop(decode: Any) -> tuple[float, float, float]:
        scheduler = Scheduler()
        config = types.SimpleNamespace(scheduler=scheduler, height=args.size, width=args.size)
        shown: list[int] = []
        previewer = previews.StepPreviewer(decode, lambda i, _: shown.append(i))
        x = mx.random.normal((1, tokens, 128))
        mx.eval(x)
        if decode is not None:
            previewer.call_before_loop(0, "", x, config)
        host = 0.0
        waits[0] = 0
        started = time.perf_counter()
        for t in range(STEPS):
            x = scheduler.step(noise=x @ transformer, timestep=t, latents=x)
            mx.eval(x)
            if decode is not None:
                before = time.perf_counter()
                previewer.call_in_loop(t, 0, "", x, config)
                host += time.perf_counter() - before
        if decode is not None:
            before = time.perf_counter()
            previewer.call_after_loop(0, "", x, config)
            host += time.perf_counter() - before
            assert shown == list(range(STEPS)), shown
        wall = (time.perf_counter() - started) / STEPS
        return host / STEPS, wall, waits[0] / STEPS

    modes = {"off": None, "blocking": blocking, "queued": queued}
    for decode in modes.values():
        loop(decode)  # warm-up: kernels and tables built
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in modes}
    names = list(modes)
    for rep in range(args.reps):
        for name in names[rep % 3 :] + names[: rep % 3]:  # rotate the order
            seen[name].append(loop(modes[name]))
    wall_off = statistics.median(w for _, w, _ in seen["off"])
    print(f"{args.size}², {args.reps} reps × {STEPS} steps, device {mx.default_device()}:")
    for name, runs in seen.items():
        host = statistics.median(h for h, _, _ in runs)
        wall = statistics.median(w for _, w, _ in runs)
        syncs = max(s for _, _, s in runs)
        print(mode_line(name, host, wall, wall - wall_off, syncs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
