"""Where does the turbo lose shape? Hand the teacher's trajectory to the student at each stride.

    python -m app.demo.handoff --out resources/demo/turbo-handoff.json

For the evaluation prompts and mflux's noise of their seeds, the teacher (the shipped ``demo``,
guided as the turbo was distilled) integrates the distillation's own ladder, keeping its states at
the 4 turbo sigmas. Then, for each k = 0…3, the student (``demo-turbo``) starts from the
teacher's state at σ_k and takes the remaining 4 − k strides. k = 0 is the plain turbo; k = 3 is
only its last stride (σ 0.70 → 0) from a perfect input. Each ending is decoded and scored by the
checker, beside the teacher's own ending:

- if shape recovers as k grows, the student's early strides drift off the teacher's path
  (exposure bias: it is trained on teacher states only);
- if even k = 3 stays low, the last stride alone cannot draw the detail.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from app.blas import preload_openblas

preload_openblas()

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402


def handoff_latents(
    prompts: list[str], resources: Path | None = None, guidance: float = 3.0
) -> dict[str, mx.array]:
    """Final latents per ending: ``teacher`` and ``student_from_sigma_<σ_k>`` for k = 0…3, from
    mflux's noise of seeds 0…n−1 (the evaluation's seeds)."""
    from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder

    from app.demo.evaluate import initial_noise
    from app.demo.model import RESOURCES, VARIANT_FILES, DemoModel, image_ids, load_weights
    from app.demo.pipeline import float32_precision
    from app.demo.scenes import tokenize
    from app.demo.train import teacher_ladder, teacher_velocity

    folder = resources or RESOURCES
    n_prompts = len(prompts)
    with float32_precision():
        teacher = load_weights(DemoModel(), folder / VARIANT_FILES["demo"])
        student = load_weights(DemoModel(), folder / VARIANT_FILES["demo-turbo"])
        tokens = mx.array([tokenize(p) for p in prompts], dtype=mx.int32)
        img = image_ids(64)
        ladder, turbo_sigmas = teacher_ladder()

        context = teacher.text_encoder(tokens)
        uncond = teacher.text_encoder(mx.zeros_like(tokens)) if guidance > 1.0 else None
        txt = Flux2PromptEncoder.prepare_text_ids(context[:1])
        x = initial_noise(list(range(n_prompts)))
        states = {ladder[0]: x}
        for s0, s1 in itertools.pairwise(ladder):
            v = teacher_velocity(teacher.transformer, x, context, uncond, s0, guidance, img, txt)
            x = x + (s1 - s0) * v
            mx.eval(x)
            states[s1] = x

        student_context = student.text_encoder(tokens)
        endings = {"teacher": states[0.0]}
        for k in range(len(turbo_sigmas) - 1):
            x = states[turbo_sigmas[k]]
            for s0, s1 in itertools.pairwise(turbo_sigmas[k:]):
                v = teacher_velocity(
                    student.transformer, x, student_context, None, s0, 1.0, img, txt
                )
                x = x + (s1 - s0) * v
                mx.eval(x)
            endings[f"student_from_sigma_{turbo_sigmas[k]:.3f}"] = x
        return endings


def handoff(
    resources: Path | None = None, n_prompts: int = 100, guidance: float = 3.0
) -> dict[str, Any]:
    """Checker scores of every ending of :func:`handoff_latents` on the evaluation prompts."""
    from app.demo.codec import load_codec
    from app.demo.evaluate import eval_prompts, score_images, to_uint8
    from app.demo.model import CODEC_FILE, RESOURCES, VARIANT_FILES
    from app.demo.train import teacher_ladder

    folder = resources or RESOURCES
    prompts = eval_prompts(n_prompts)
    endings = handoff_latents(prompts, folder, guidance)
    codec = load_codec(folder / CODEC_FILE)
    ladder, turbo_sigmas = teacher_ladder()
    teacher = endings["teacher"]
    out: dict[str, Any] = {
        "prompts": n_prompts,
        "teacher_guidance": guidance,
        "turbo_sigmas": turbo_sigmas,
        "teacher_ladder_steps": len(ladder) - 1,
        "weights": {v: VARIANT_FILES[v] for v in ("demo", "demo-turbo")},
        "endings": {},
    }
    for name, latents in endings.items():
        images = np.clip(np.array(codec.decode(latents, xp=mx)) / 2 + 0.5, 0, 1)
        scored = score_images(to_uint8(images), prompts)
        out["endings"][name] = {
            "scores": scored["scores"],
            "shape_by_clause": {
                shape: f"{row['right']}/{row['clauses']}"
                for shape, row in scored["shape_by_clause"]["shape"].items()
            },
            "rel_l1_to_teacher": float(
                mx.mean(mx.abs(latents - teacher)) / mx.mean(mx.abs(teacher))
            ),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=Path, default=None)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--guidance", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = handoff(args.resources, args.prompts, args.guidance)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
