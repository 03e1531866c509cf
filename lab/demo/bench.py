"""Latency benchmark of the demo pipeline (a benchmark, never a unit test).

    python -m lab.demo.bench --variant demo --reps 5 --out bench-demo.json

Every repetition runs in a fresh subprocess (cold: load the weights, then generate); it reports
the first generation (what a user's first Generate costs) and the median of three more. Vanilla
runs only, so every step computes: skipped = 0 is recorded next to each time.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.fileio.jsonio import dumps_json
from app.variants import get_variant
from lab.demo.reports import emit_json

PROMPT = (
    "two small red stars at the left and a large striped blue circle at the right "
    "on a white background"
)


def one_process(
    variant: str,
    steps: int,
    guidance: float | None = None,
    resources: Path | None = None,
    serial_cfg: bool = False,
    decode: str = "seamless",
) -> dict[str, Any]:
    from app.blas import preload_openblas

    blas = preload_openblas()
    t0 = time.perf_counter()
    from app.demo.pipeline import load_demo_pipeline
    from lab.demo.calibrate import demo_guidance

    pipe = load_demo_pipeline(variant, resources)
    pipe.concurrent_cfg = not serial_cfg
    if decode == "pca":  # the per-patch decode shipped before the seamless decoder
        pipe.vae.decoder = None  # type: ignore[attr-defined]
    load_seconds = time.perf_counter() - t0
    guidance = demo_guidance(variant) if guidance is None else guidance
    times = []
    for seed in range(4):
        t = time.perf_counter()
        pipe.generate_image(
            seed=seed,
            prompt=PROMPT,
            num_inference_steps=steps,
            height=128,
            width=128,
            guidance=guidance,
        )
        times.append(time.perf_counter() - t)
    return {
        "load_seconds": load_seconds,
        "first_seconds": times[0],
        "warm_median_seconds": float(np.median(times[1:])),
        "guidance": guidance,
        "skipped": 0,
        "computed": steps,
        "openblas": blas,
        "cfg_branches": "serial" if serial_cfg else "concurrent where guidance > 1 on the CPU",
        "decode": decode,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", default="demo", choices=["demo", "demo-turbo"])
    parser.add_argument(
        "--guidance", type=float, default=None, help="default: the variant's (demo 3, turbo 1)"
    )
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument(
        "--resources", type=Path, default=None, help="folder of other weights (default: shipped)"
    )
    parser.add_argument(
        "--serial-cfg",
        action="store_true",
        help="both CFG branches on one stream, OpenBLAS as loaded (the path before concurrency)",
    )
    parser.add_argument(
        "--decode",
        choices=["seamless", "pca", "both"],
        default="seamless",
        help="the shipped seamless decoder, or the PCA codec's per-patch decode shipped before it;"
        " both: a cold process of each in turn per repetition (pca first), so a busy machine "
        "weighs on both alike",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = args.steps or get_variant(args.variant).default_steps
    if args.child:
        result = one_process(
            args.variant, steps, args.guidance, args.resources, args.serial_cfg, args.decode
        )
        print(dumps_json(result))
        return
    decodes = ["pca", "seamless"] if args.decode == "both" else [args.decode]
    reps = []
    for _ in range(args.reps * len(decodes)):
        decode = decodes[len(reps) % len(decodes)]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "lab.demo.bench",
                "--child",
                "--variant",
                args.variant,
                *(["--guidance", str(args.guidance)] if args.guidance is not None else []),
                *(["--resources", str(args.resources)] if args.resources is not None else []),
                *(["--serial-cfg"] if args.serial_cfg else []),
                "--decode",
                decode,
                "--steps",
                str(steps),
            ],
            check=True,
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "TQDM_DISABLE": "1"},
        )
        reps.append(json.loads(result.stdout.strip().splitlines()[-1]))
    report = {
        "variant": args.variant,
        "steps": steps,
        "size": "128x128",
        "guidance": reps[0]["guidance"],
        "prompt": PROMPT,
        "weights": str(args.resources) if args.resources is not None else "shipped",
        "cfg_branches": reps[0]["cfg_branches"],
        "decode": args.decode,
        "reps": reps,
        **_medians([r for r in reps if r["decode"] == decodes[-1]]),
        "skipped": 0,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": __import__("os").cpu_count(),
            "load_average_1_5_15_min_at_end": list(__import__("os").getloadavg()),
        },
    }
    if len(decodes) > 1:
        by_decode = {d: _medians([r for r in reps if r["decode"] == d]) for d in decodes}
        report["by_decode"] = by_decode
        report["seamless_over_pca"] = {
            key: by_decode["seamless"][key] / by_decode["pca"][key] for key in by_decode["pca"]
        }
        report["decode_milliseconds"] = decode_milliseconds(args.variant)
    emit_json(report, args.out)


def decode_milliseconds(variant: str, reps: int = 200) -> dict[str, float]:
    """Median wall time of the final decode alone (one 128×128 picture: the latents handed over
    as ``generate_image`` hands them, to the [−1, 1] pixels evaluated), each decode in turn, in
    this process: what the decoder adds to a generation, measurable on a busy machine where a
    whole generation's time moves by more than that."""
    from app.blas import preload_openblas

    preload_openblas()
    import mlx.core as mx

    from app.demo.pipeline import load_demo_pipeline

    vae = load_demo_pipeline(variant).vae
    decoder = vae.decoder  # type: ignore[attr-defined]
    packed = mx.random.normal((1, 128, 8, 8), key=mx.random.key(0))
    times: dict[str, list[float]] = {"pca": [], "seamless": []}
    for _ in range(reps):
        for name, chosen in (("pca", None), ("seamless", decoder)):
            vae.decoder = chosen  # type: ignore[attr-defined]
            t = time.perf_counter()
            mx.eval(vae.decode_packed_latents(packed))
            times[name].append(1000 * (time.perf_counter() - t))
    return {name: float(np.median(values)) for name, values in times.items()}


def _medians(reps: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "median_first_seconds": float(np.median([r["first_seconds"] for r in reps])),
        "median_warm_seconds": float(np.median([r["warm_median_seconds"] for r in reps])),
    }


if __name__ == "__main__":
    main()
