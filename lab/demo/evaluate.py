"""Quality of the demo models on random in-vocabulary prompts, scored by the checker.

Two samplers give the same pictures up to float rounding:
- :func:`sample_batch` — mflux's FLUX.2 arithmetic (its noise, its sigmas, Euler steps
  ``x + (σ_next − σ)·v``) batched over prompts, for the GPU right after training;
- the real pipeline (:func:`evaluate_pipeline`), one ``generate_image`` per prompt — the figure the
  README reports, runnable on the 2-core CPU in a few minutes.

Run: ``python -m lab.demo.evaluate --variant demo --prompts 100 --out eval-demo.json``
(``--decode pca`` for the per-patch decode shipped before the seamless decoder)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.blas import preload_openblas
from app.fileio.jsonio import dumps_json

preload_openblas()  # before MLX loads (``python -m`` imports this module before main runs)

import mlx.core as mx  # noqa: E402

from app.variants import get_variant  # noqa: E402
from lab.demo import checker  # noqa: E402
from lab.demo.reports import write_json  # noqa: E402
from lab.demo.scenes import PromptSpec, caption, parse_prompt, scene_from_seed, tokenize  # noqa: E402

EVAL_SEED_BASE = 900_000  # scene seeds for evaluation prompts; training uses other streams
# How the final latents become the picture: the shipped seamless decoder (app.demo.decoder), or the
# PCA codec's per-patch decode shipped before it, plain or deblocked (app.demo.codec).
DECODES = ("seamless", "pca", "pca-deblocked")


def eval_prompts(n: int = 100, first: int = 0) -> list[str]:
    """Prompts ``first`` … ``first + n - 1`` of the evaluation stream (the reported set is 0–99;
    a later slice is a held-out set for choosing between candidate weights)."""
    return [caption(scene_from_seed(EVAL_SEED_BASE + first + i)) for i in range(n)]


def schedule(steps: int, height: int = 128, width: int = 128) -> mx.array:
    """The sigmas mflux's flow_match_euler_discrete scheduler uses for the demo (steps + 1)."""
    from mflux.models.common.config.config import Config

    from app.demo.pipeline import demo_model_config

    config = Config(
        model_config=demo_model_config("demo"),
        num_inference_steps=steps,
        height=height,
        width=width,
        scheduler="flow_match_euler_discrete",
    )
    return config.scheduler.sigmas


def initial_noise(seeds: list[int], height: int = 128, width: int = 128) -> mx.array:
    from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator

    from app.demo.pipeline import float32_precision

    with float32_precision():
        noises = [
            Flux2LatentCreator.prepare_packed_latents(
                seed=s, height=height, width=width, batch_size=1
            )[0]
            for s in seeds
        ]
    return mx.concatenate(noises, axis=0)


def sample_batch(
    model: Any,
    prompts: list[str],
    seeds: list[int],
    steps: int,
    guidance: float = 1.0,
    chunk: int = 256,
) -> mx.array:
    """Final latents (B, 64, 128) for each (prompt, seed), mflux's arithmetic batched."""
    from app.demo.model import image_ids, text_ids
    from app.demo.pipeline import float32_precision

    with float32_precision():
        return _sample_batch(model, prompts, seeds, steps, guidance, chunk, image_ids, text_ids)


def _sample_batch(
    model: Any,
    prompts: list[str],
    seeds: list[int],
    steps: int,
    guidance: float,
    chunk: int,
    image_ids: Any,
    text_ids: Any,
) -> mx.array:
    sigmas = schedule(steps)
    out = []
    for start in range(0, len(prompts), chunk):
        tokens = mx.array([tokenize(p) for p in prompts[start : start + chunk]], dtype=mx.int32)
        latents = initial_noise(seeds[start : start + chunk])
        context = model.text_encoder(tokens)
        uncond = model.text_encoder(mx.zeros_like(tokens)) if guidance > 1.0 else None
        img, txt = image_ids(latents.shape[1]), text_ids(context)
        for i in range(steps):
            timestep = mx.full((latents.shape[0],), sigmas[i] * 1000.0)
            v = model.transformer(
                hidden_states=latents,
                encoder_hidden_states=context,
                timestep=timestep,
                img_ids=img,
                txt_ids=txt,
                guidance=None,
            )
            if uncond is not None:
                vu = model.transformer(
                    hidden_states=latents,
                    encoder_hidden_states=uncond,
                    timestep=timestep,
                    img_ids=img,
                    txt_ids=txt,
                    guidance=None,
                )
                v = vu + guidance * (v - vu)
            latents = latents + (sigmas[i + 1] - sigmas[i]) * v
            mx.eval(latents)
        out.append(latents)
    return mx.concatenate(out, axis=0)


def patch_seam_ratio(images: np.ndarray, patch: int = 16) -> float:
    """How visible the codec's patch grid is: the mean absolute difference of neighbouring pixels
    across patch boundaries over the same inside patches (rows and columns, all channels) for
    (B, H, W, 3) images. A seamless picture gives about 1; every boundary step raises it."""
    images = np.asarray(images, dtype=np.float32)  # uint8 or [0, 1]: the ratio has no unit
    across, inside = [], []
    for axis, length in ((1, images.shape[1]), (2, images.shape[2])):
        gaps = np.abs(np.diff(images, axis=axis))
        per_gap = gaps.mean(axis=tuple(a for a in range(gaps.ndim) if a != axis))
        boundary = np.arange(patch - 1, length - 1, patch)
        across.append(per_gap[boundary].mean())
        inside.append(np.delete(per_gap, boundary).mean())
    return float(np.mean(across) / max(float(np.mean(inside)), 1e-12))


def to_uint8(images01: mx.array | np.ndarray) -> np.ndarray:
    return np.round(np.asarray(images01, dtype=np.float32) * 255.0).astype(np.uint8)


def score_images(images: np.ndarray, prompts: list[str]) -> dict[str, Any]:
    specs: list[PromptSpec] = [parse_prompt(p) for p in prompts]
    verdicts = [checker.check(img, spec) for img, spec in zip(images, specs, strict=True)]
    return {
        "scores": checker.score(verdicts),
        "shape_by_clause": shape_breakdown(specs, verdicts),
        "shape_seen_as": shape_confusion(specs, verdicts),
        "per_prompt": [
            {"prompt": p, **v.summary()} for p, v in zip(prompts, verdicts, strict=True)
        ],
    }


def shape_breakdown(
    specs: list[PromptSpec], verdicts: list[checker.Verdict]
) -> dict[str, dict[str, dict[str, float | int]]]:
    """Share of clauses drawn in the right shape, by the clause's shape, size and texture and by
    how many clauses its prompt has: where a model's shape errors come from."""
    groups: dict[str, dict[str, list[bool]]] = {
        "shape": {},
        "size": {},
        "texture": {},
        "clauses_in_prompt": {},
    }
    for spec, verdict in zip(specs, verdicts, strict=True):
        for clause, reading in zip(spec.clauses, verdict.clauses, strict=True):
            keys = {
                "shape": clause.shape,
                "size": clause.size,
                "texture": clause.texture or "plain",
                "clauses_in_prompt": str(len(spec.clauses)),
            }
            for group, key in keys.items():
                if key is not None:
                    groups[group].setdefault(key, []).append(reading.shape)
    return {
        group: {
            key: {"right": sum(values), "clauses": len(values), "share": sum(values) / len(values)}
            for key, values in sorted(table.items())
        }
        for group, table in groups.items()
    }


def shape_confusion(
    specs: list[PromptSpec], verdicts: list[checker.Verdict]
) -> dict[str, dict[str, int]]:
    """For each asked shape, what the checker read (the shape covering most of the clause's
    object area, or "nothing"): tells a model that draws stars as squares from one that draws
    nothing."""
    confusion: dict[str, dict[str, int]] = {}
    for spec, verdict in zip(specs, verdicts, strict=True):
        for clause, reading in zip(spec.clauses, verdict.clauses, strict=True):
            if clause.shape is None:
                continue
            areas: dict[str, int] = {}
            for obj in reading.objects:
                areas[obj.shape] = areas.get(obj.shape, 0) + obj.area
            seen = max(areas, key=lambda k: areas[k]) if areas else "nothing"
            row = confusion.setdefault(clause.shape, {})
            row[seen] = row.get(seen, 0) + 1
    return {asked: dict(sorted(row.items())) for asked, row in sorted(confusion.items())}


def evaluate_pipeline(
    variant: str,
    n: int,
    steps: int | None = None,
    guidance: float = 1.0,
    resources: Path | None = None,
    decode: str = "seamless",
    first: int = 0,
) -> dict[str, Any]:
    """Score ``n`` eval prompts (from prompt ``first``, each with its index as seed) through
    ``load_demo_pipeline(variant).generate_image``. ``decode``: one of :data:`DECODES` — the
    shipped seamless decoder, or the PCA codec's per-patch decode shipped before it, plain or
    with its deblocking filter (to measure what each changes; the latents are the same).

    With the seamless decoder the report also scores the very same final latents through the PCA
    codec's per-patch decode (``pca_decode``): before and after on one sampling run."""
    from dataclasses import replace

    from app.demo.pipeline import load_demo_pipeline

    if decode not in DECODES:
        raise ValueError(f"unknown decode {decode!r}; choose one of {list(DECODES)}")
    pipe = load_demo_pipeline(variant, resources)
    if decode != "seamless":
        pipe.vae.decoder = None  # type: ignore[attr-defined]
    if decode == "pca-deblocked":
        pipe.vae.codec = replace(pipe.vae.codec, deblocked=True)  # type: ignore[attr-defined]
    recorder = FinalLatents(pipe.vae)
    pipe.vae = recorder  # type: ignore[assignment]
    steps = steps or get_variant(variant).default_steps
    prompts = eval_prompts(n, first)
    images, seconds = [], []
    for seed, prompt in enumerate(prompts, start=first):
        t0 = time.perf_counter()
        result = pipe.generate_image(
            seed=seed,
            prompt=prompt,
            num_inference_steps=steps,
            height=128,
            width=128,
            guidance=guidance,
        )
        seconds.append(time.perf_counter() - t0)
        images.append(np.asarray(result.image.convert("RGB")))
    pictures = np.stack(images)
    report = score_images(pictures, prompts)
    report.update(
        variant=variant,
        steps=steps,
        guidance=guidance,
        prompts=n,
        first_prompt=first,
        sampler="mflux Flux2Klein.generate_image",
        decode=decode,
        median_seconds=float(np.median(seconds)),
        patch_seam_ratio=patch_seam_ratio(pictures),
    )
    if decode == "seamless":
        latents = mx.concatenate(recorder.latents, axis=0)
        before = to_uint8(mx.clip(recorder.vae.codec.decode(latents, xp=mx) / 2 + 0.5, 0.0, 1.0))
        scored = score_images(before, prompts)
        report["pca_decode"] = {
            "what": "the same final latents through the PCA codec's per-patch decode, shipped "
            "before the seamless decoder",
            "scores": scored["scores"],
            "shape_seen_as": scored["shape_seen_as"],
            "patch_seam_ratio": patch_seam_ratio(before),
        }
    return report


class FinalLatents:
    """The pipeline's decode side, passed through, keeping each final latent grid it decodes as
    packed tokens (B, h·w, 128)."""

    def __init__(self, vae: Any) -> None:
        self.vae = vae
        self.latents: list[mx.array] = []

    def decode_packed_latents(self, packed: mx.array, tiling_config: Any = None) -> mx.array:
        batch, channels, h, w = packed.shape
        self.latents.append(packed.transpose(0, 2, 3, 1).reshape(batch, h * w, channels))
        return self.vae.decode_packed_latents(packed, tiling_config)


def contact_sheet(images: np.ndarray, columns: int = 8) -> np.ndarray:
    """Images in a grid, the last row padded with black."""
    images = np.asarray(images)
    missing = -len(images) % columns
    if missing:
        images = np.concatenate([images, np.zeros((missing, *images.shape[1:]), images.dtype)])
    rows = [
        np.concatenate(list(images[i : i + columns]), axis=1)
        for i in range(0, len(images), columns)
    ]
    return np.concatenate(rows, axis=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", default="demo", choices=["demo", "demo-turbo"])
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument(
        "--first-prompt",
        type=int,
        default=0,
        help="first prompt of the slice (0: the reported set; 100 on: held out, to choose weights)",
    )
    parser.add_argument(
        "--guidance", type=float, default=None, help="default: the variant's (demo 3, turbo 1)"
    )
    parser.add_argument("--resources", type=Path, default=None, help="folder of other weights")
    parser.add_argument(
        "--decode",
        choices=DECODES,
        default="seamless",
        help="the shipped seamless decoder, or the PCA codec's per-patch decode shipped before "
        "it (pca), or that with its deblocking filter (pca-deblocked)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    from lab.demo.calibrate import demo_guidance

    guidance = args.guidance if args.guidance is not None else demo_guidance(args.variant)
    report = evaluate_pipeline(
        args.variant,
        args.prompts,
        args.steps,
        guidance,
        resources=args.resources,
        decode=args.decode,
        first=args.first_prompt,
    )
    write_json(args.out, report)
    print(dumps_json({k: report[k] for k in ("variant", "steps", "scores", "median_seconds")}))


if __name__ == "__main__":
    main()
