"""Why a trajectory-distilled turbo lets TeaCache skip: how much the teacher's stride velocity
changes between the 4 turbo sigmas.

    python -m app.demo.secants --out resources/demo/turbo-secants.json

The teacher (the shipped ``demo``) integrates mflux's 28-step Euler ladder, merged with the turbo
sigmas, from the same noise for 16 evaluation prompts, classifier-free guided at 3 by default (as
the shipped turbo is distilled, ``train --turbo-guidance 3``).
The secant velocity of a stride is ``(x(σ₁) − x(σ₀)) / (σ₁ − σ₀)``: exactly what a student that
lands on the teacher's states must output. Its relative L1 change between adjacent strides is the
output change the gate would measure on a perfect student; small values mean skippable steps.
Both mflux's shifted 4-step sigmas and linear ones are reported.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from app.blas import preload_openblas
from app.demo.reports import emit_json

preload_openblas()

import mlx.core as mx  # noqa: E402

TEACHER_GUIDANCE = 3.0  # the shipped demo-turbo's (runs 7h, 8k) teacher guidance


def secant_changes(
    resources: Path | None = None, n_prompts: int = 16, guidance: float = TEACHER_GUIDANCE
) -> dict[str, Any]:
    from app.demo.evaluate import eval_prompts
    from app.demo.model import RESOURCES, VARIANT_FILES, load_model
    from app.demo.pipeline import float32_precision
    from app.demo.scenes import tokenize
    from app.demo.train import integrate, teacher_ladder
    from app.gate import rel_l1

    with float32_precision():
        folder = resources or RESOURCES
        model = load_model(folder / VARIANT_FILES["demo"])
        prompts = eval_prompts(n_prompts)
        tokens = mx.array([tokenize(p) for p in prompts])
        # The distillation's own teacher ladder (28 Euler steps merged with the turbo sigmas),
        # with the linear sigmas merged in as well.
        teacher, shifted = teacher_ladder()
        targets = {"mflux_shifted": shifted, "linear": [1.0, 0.75, 0.5, 0.25, 0.0]}
        ladder = sorted(set(teacher).union(targets["linear"]), reverse=True)
        mx.random.seed(0)
        x = mx.random.normal((len(prompts), 64, 128))
        path = integrate(model, x, tokens, ladder, guidance, keep=ladder)
        states = {sigma: path[:, i] for i, sigma in enumerate(ladder)}
        teacher = folder / VARIANT_FILES["demo"]
        out: dict[str, Any] = {
            "prompts": len(prompts),
            "guidance": guidance,
            "teacher": str(
                teacher.relative_to(Path.cwd()) if teacher.is_relative_to(Path.cwd()) else teacher
            ),
        }
        for name, sigmas in targets.items():
            secants = [(states[b] - states[a]) / (b - a) for a, b in itertools.pairwise(sigmas)]
            out[name] = {
                "sigmas": sigmas,
                "secant_rel_l1": [rel_l1(v1, v0) for v0, v1 in itertools.pairwise(secants)],
            }
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--guidance", type=float, default=TEACHER_GUIDANCE)
    args = parser.parse_args(argv)
    result = secant_changes(args.resources, guidance=args.guidance)
    emit_json(result, args.out)


if __name__ == "__main__":
    main()
