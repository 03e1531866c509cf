"""Where does the turbo lose shape? Hand the teacher's trajectory to the student at each stride.

    python -m lab.demo.handoff --out lab/demo/results/turbo-handoff.json

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
from pathlib import Path
from typing import Any

from app.blas import preload_openblas
from lab.demo.reports import emit_json

preload_openblas()

import mlx.core as mx  # noqa: E402


def handoff_latents(
    prompts: list[str], resources: Path | None = None, guidance: float = 3.0
) -> dict[str, mx.array]:
    """Final latents per ending: ``teacher`` and ``student_from_sigma_<σ_k>`` for k = 0…3, from
    mflux's noise of seeds 0…n−1 (the evaluation's seeds)."""
    from app.demo.model import VARIANT_FILES, load_model
    from app.demo.pipeline import float32_precision
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import initial_noise
    from lab.demo.scenes import tokenize
    from lab.demo.train import integrate, teacher_ladder

    folder = resources or DEMO_DIR
    with float32_precision():
        teacher = load_model(folder / VARIANT_FILES["demo"])
        student = load_model(folder / VARIANT_FILES["demo-turbo"])
        tokens = mx.array([tokenize(p) for p in prompts], dtype=mx.int32)
        ladder, turbo_sigmas = teacher_ladder()
        noise = initial_noise(list(range(len(prompts))))
        states = integrate(teacher, noise, tokens, ladder, guidance, keep=turbo_sigmas)
        endings = {"teacher": states[:, -1]}
        for k in range(len(turbo_sigmas) - 1):
            endings[f"student_from_sigma_{turbo_sigmas[k]:.3f}"] = integrate(
                student, states[:, k], tokens, turbo_sigmas[k:], 1.0
            )
        return endings


def handoff(
    resources: Path | None = None, n_prompts: int = 100, guidance: float = 3.0
) -> dict[str, Any]:
    """Checker scores of every ending of :func:`handoff_latents` on the evaluation prompts."""
    from app.demo.codec import load_codec
    from app.demo.model import CODEC_FILE, VARIANT_FILES
    from app.gate import rel_l1
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import eval_prompts, score_images, to_uint8
    from lab.demo.train import teacher_ladder, trainer_decode

    folder = resources or DEMO_DIR
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
        scored = score_images(to_uint8(trainer_decode(codec, latents)), prompts)
        out["endings"][name] = {
            "scores": scored["scores"],
            "shape_by_clause": {
                shape: f"{row['right']}/{row['clauses']}"
                for shape, row in scored["shape_by_clause"]["shape"].items()
            },
            "rel_l1_to_teacher": rel_l1(latents, teacher),
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
    emit_json(result, args.out)


if __name__ == "__main__":
    main()
