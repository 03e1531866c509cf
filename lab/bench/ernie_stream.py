"""ERNIE-Image's residual stream in bf16 against mflux's float32 stream, on the CPU.

mflux's ``ErnieTransformer`` takes its six AdaLN modulations from a float32 time embedding, so
block 0's ``x·(1 + scale) + shift`` promotes the stream to float32 and every later block runs
float32 activations against bf16 weights (families-probe: 2.7× FIBO's forward at the same size).
The adapter's opt-in (``app.adapters.ernie_image.STREAM_DTYPE_ATTR``) casts the modulations to
the weights' dtype instead. This measures how far that moves the output, beside the scale of
what bf16 weights already cost (the same random weights in float32)::

    python -m lab.bench.ernie_stream --out lab/bench/results/ernie-stream-cpu.json

On shells of mflux's classes with random weights (``app.adapters.ernie_image.shell``) at a
reduced size (``DIMS``: 12 blocks 512 wide, the real head size 128 and rotary axes), 128²
(an 8 × 8 latent grid), through mflux's real ``generate_image``:

- ``forward``: one transformer call on the same inputs at several sigmas: the bf16-stream
  anatomy against mflux's own forward (both bf16 weights), and mflux's bf16 forward against the
  float32 weights' (the scale);
- ``generation``: Turbo's 8 steps and the base's CFG (g 4, 8 steps here), final latents: the
  observing pass with the bf16 stream against mflux's vanilla, and mflux's bf16 vanilla against
  the float32 one.

Random weights say nothing of the real model's sensitivity: these figures are no tolerance for
real weights, only the measured distance on random ones. Timing is the GPU's to measure.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import mlx.core as mx
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate
from app.adapters.ernie_image import STREAM_DTYPE_ATTR, ErnieAnatomy, shell
from app.adapters.shells import DEFAULT_PROMPT
from app.blas import preload_openblas
from app.families.ernie_image import ErnieDims
from app.fileio.jsonio import dumps_json
from app.gate.kinds import vanilla_recorder
from app.hardware import host_info, runtime_info
from app.variants import get_variant

DIMS = ErnieDims(512, 4, 12, 1536, (32, 48, 48))
SIZE = 128
SIGMAS = (1.0, 0.75, 0.5, 0.25, 0.05)
RUNS = {"turbo": ("ernie-image-turbo", None), "cfg": ("ernie-image", 4.0)}


def _distance(a: mx.array, b: mx.array) -> dict[str, float]:
    """``a`` against the reference ``b``: relative L1 and the largest absolute difference."""
    a32, b32 = a.astype(mx.float32), b.astype(mx.float32)
    rel: float = (mx.mean(mx.abs(a32 - b32)) / mx.mean(mx.abs(b32))).tolist()  # type: ignore[assignment]
    largest: float = mx.max(mx.abs(a32 - b32)).tolist()  # type: ignore[assignment]
    return {"rel_l1": rel, "max_abs": largest}


def _forward(pipeline: Any, latents: mx.array, sigma: float, guidance: float | None) -> mx.array:
    """mflux's own predict for one step (the closure its ``generate_image`` builds)."""
    text_bth, text_lens = pipeline._encode_prompts(
        prompt=DEFAULT_PROMPT, negative_prompt=None, guidance=guidance or 1.0
    )
    predict = pipeline._predict(pipeline.transformer, text_bth, text_lens, latents)
    return predict(
        latents=latents,
        sigma=mx.array([sigma]),
        text_bth=text_bth,
        text_lens=text_lens,
        guidance=guidance or 1.0,
    )


def _stream_forward(
    pipeline: Any, latents: mx.array, sigma: float, guidance: float | None
) -> mx.array:
    """The bf16-stream anatomy's whole forward on the same inputs."""
    text_bth, text_lens = pipeline._encode_prompts(
        prompt=DEFAULT_PROMPT, negative_prompt=None, guidance=guidance or 1.0
    )
    setattr(pipeline.transformer, STREAM_DTYPE_ATTR, mx.bfloat16)
    try:
        anatomy = ErnieAnatomy(pipeline.transformer, text_bth, text_lens, latents)
        anatomy.step_call(latents, mx.array([sigma]), text_bth, text_lens, guidance or 1.0)
        return anatomy.forward(latents, mx.array([sigma]), (text_bth, text_lens))
    finally:
        setattr(pipeline.transformer, STREAM_DTYPE_ATTR, None)


def _generate(pipeline: Any, seed: int, guidance: float | None, stream: bool) -> mx.array:
    kwargs: dict[str, Any] = {
        "seed": seed,
        "prompt": DEFAULT_PROMPT,
        "num_inference_steps": 8,
        "height": SIZE,
        "width": SIZE,
    }
    if guidance is not None:
        kwargs["guidance"] = guidance
    if not stream:
        pipeline.generate_image(**kwargs)
        return pipeline.vae.last
    setattr(pipeline.transformer, STREAM_DTYPE_ATTR, mx.bfloat16)
    try:
        # the vanilla pass's recorder: every step computed through the gated step's anatomy
        with install_gate(pipeline, vanilla_recorder(get_variant("ernie-image"))):
            pipeline.generate_image(**kwargs)
    finally:
        setattr(pipeline.transformer, STREAM_DTYPE_ATTR, None)
    return pipeline.vae.last


def measure(seeds: range) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for run, (model_name, guidance) in RUNS.items():
            with common.use_precision(mx.bfloat16):
                bf16 = shell(model_name, dims=DIMS, dtype=mx.bfloat16, seed=seed)
            with common.use_precision(mx.float32):
                f32 = shell(model_name, dims=DIMS, dtype=mx.float32, seed=seed)
            grid = SIZE // 16
            noise = mx.random.normal((1, 128, grid, grid), key=mx.random.key(seed))
            for sigma in SIGMAS:
                with common.use_precision(mx.bfloat16):
                    latents = noise.astype(mx.bfloat16)
                    mflux = _forward(bf16, latents, sigma, guidance)
                    stream = _stream_forward(bf16, latents, sigma, guidance)
                with common.use_precision(mx.float32):
                    full = _forward(f32, noise, sigma, guidance)
                rows.append(
                    {
                        "kind": "forward",
                        "run": run,
                        "seed": seed,
                        "sigma": sigma,
                        "bf16_stream_vs_mflux": _distance(stream, mflux),
                        "mflux_bf16_vs_float32": _distance(mflux, full),
                    }
                )
            with common.use_precision(mx.bfloat16):
                mflux_latents = _generate(bf16, seed, guidance, stream=False)
                stream_latents = _generate(bf16, seed, guidance, stream=True)
            with common.use_precision(mx.float32):
                full_latents = _generate(f32, seed, guidance, stream=False)
            rows.append(
                {
                    "kind": "generation",
                    "run": run,
                    "seed": seed,
                    "steps": 8,
                    "bf16_stream_vs_mflux": _distance(stream_latents, mflux_latents),
                    "mflux_bf16_vs_float32": _distance(mflux_latents, full_latents),
                }
            )
            print(dumps_json(rows[-1]), flush=True)
    summary = {}
    for kind in ("forward", "generation"):
        picked = [r for r in rows if r["kind"] == kind]
        summary[kind] = {
            name: max(r[name]["rel_l1"] for r in picked)
            for name in ("bf16_stream_vs_mflux", "mflux_bf16_vs_float32")
        }
    return {
        "what": __doc__.split("\n\n")[0] if __doc__ else "",
        "dims": DIMS.kwargs(),
        "size": SIZE,
        "host": host_info(),
        "runtime": runtime_info(),
        "summary_max_rel_l1": summary,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    preload_openblas()
    # mflux's eager predict (as on M1/M2): both sides share one numerical path but the stream's
    # dtype, so no compiler fusion is measured beside it
    AppleSiliconUtil.is_m1_or_m2 = staticmethod(lambda: True)  # type: ignore[method-assign]
    report = measure(range(args.seeds))
    args.out.write_text(dumps_json(report, indent=1) + "\n")
    print(dumps_json(report["summary_max_rel_l1"], indent=1))


if __name__ == "__main__":
    main()
