"""Why a trajectory-distilled turbo lets TeaCache skip: how much the teacher's stride velocity
changes between the 4 turbo sigmas.

    python -m lab.demo.secants --out lab/demo/results/turbo-secants.json

The teacher (the shipped ``demo``) integrates mflux's 28-step Euler ladder, merged with the turbo
sigmas, from the same noise for 16 evaluation prompts, classifier-free guided at 3 by default (as
the shipped turbo is distilled, ``train --turbo-guidance 3``).
The secant velocity of a stride is ``(x(σ₁) − x(σ₀)) / (σ₁ − σ₀)``: exactly what a student that
lands on the teacher's states must output. Its relative L1 change between adjacent strides is the
output change the gate would measure on a perfect student; small values mean skippable steps.
Both mflux's shifted 4-step sigmas and linear ones are reported.

``--students`` adds two idealised 4-step students run with mflux's Euler step, each predicting a
sharp image ``x0_k`` at every step (so ``v_k = (x_k − x0_k)/σ_k``):

- ``consistency``: the teacher's ODE endpoint from the student's own state — a perfect
  consistency-distilled student;
- ``posterior_sample``: a fresh sample from the teacher given the student's state (ancestral
  DDIM, η = 1, down the same ladder, fresh noise at every rung) — what a perfect
  distribution-matching or adversarial student draws in distribution: a sharp image consistent
  with what the state shows, its undetermined details drawn anew at every step.

For each, the relative L1 change of ``v`` into steps 1, 2 and 3 (pooled; and the least over
prompts).
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.blas import preload_openblas
from lab.demo.reports import emit_json

preload_openblas()

import mlx.core as mx  # noqa: E402

TEACHER_GUIDANCE = 3.0  # the shipped demo-turbo's (runs 7h, 8k) teacher guidance


def secant_changes(
    resources: Path | None = None, n_prompts: int = 16, guidance: float = TEACHER_GUIDANCE
) -> dict[str, Any]:
    from app.demo.model import VARIANT_FILES, load_model
    from app.demo.pipeline import float32_precision
    from app.gate import rel_l1
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import eval_prompts
    from lab.demo.scenes import tokenize
    from lab.demo.train import integrate, teacher_ladder

    with float32_precision():
        folder = resources or DEMO_DIR
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


def _posterior_sample(
    velocity: Callable[[mx.array, float], mx.array],
    x: mx.array,
    rungs: list[float],
    key: mx.array,
) -> mx.array:
    """From ``x`` at ``rungs[0]`` down to 0 by ancestral DDIM with η = 1: a sample of the
    teacher's posterior given ``x``."""
    keys = mx.random.split(key, len(rungs))
    for i, (hi, lo) in enumerate(itertools.pairwise(rungs)):
        v = velocity(x, hi)
        x0, eps = x - hi * v, x + (1 - hi) * v
        if lo == 0.0:
            return x0
        # DDIM's η = 1 noise share for x_σ = (1 − σ)·x0 + σ·ε: everything fresh at σ = 1.
        kept = ((1 - hi) * lo) / ((1 - lo) * hi)
        fresh = lo * (1 - kept * kept) ** 0.5
        z = mx.random.normal(x.shape, key=keys[i])
        x = (1 - lo) * x0 + (lo * lo - fresh * fresh) ** 0.5 * eps + fresh * z
        mx.eval(x)
    return x


def student_changes(
    resources: Path | None = None,
    n_prompts: int = 16,
    guidance: float = TEACHER_GUIDANCE,
    schedules: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """Per schedule and idealised student, the rel-L1 change of its velocity into steps 1–3."""
    from app.demo.model import VARIANT_FILES, load_model
    from app.demo.pipeline import float32_precision
    from app.gate import rel_l1
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import eval_prompts
    from lab.demo.scenes import tokenize
    from lab.demo.train import guided_velocity, integrate, teacher_ladder

    with float32_precision():
        model = load_model((resources or DEMO_DIR) / VARIANT_FILES["demo"])
        tokens = mx.array([tokenize(p) for p in eval_prompts(n_prompts)])
        velocity = guided_velocity(model, tokens, 64, guidance)
        teacher, shifted = teacher_ladder()
        schedules = schedules or {"mflux_shifted": shifted, "linear": [1.0, 0.75, 0.5, 0.25, 0.0]}
        ladder = sorted(set(teacher).union(*schedules.values()), reverse=True)
        out: dict[str, Any] = {}
        for name, sigmas in schedules.items():
            out[name] = {}
            for student in ("consistency", "posterior_sample"):
                mx.random.seed(0)
                x = mx.random.normal((n_prompts, 64, 128))
                step_keys = mx.random.split(mx.random.key(1), len(sigmas))
                velocities = []
                for k, sigma in enumerate(sigmas[:-1]):
                    if velocities:
                        x = x + (sigma - sigmas[k - 1]) * velocities[-1]  # mflux's Euler step
                    rungs = [s for s in ladder if s <= sigma]
                    if student == "consistency":  # the teacher's ODE endpoint
                        x0 = integrate(model, x, tokens, rungs, guidance)
                    else:
                        x0 = _posterior_sample(velocity, x, rungs, step_keys[k])
                    velocities.append((x - x0) / sigma)
                    mx.eval(velocities[-1], x)
                pairs = list(itertools.pairwise(velocities))
                out[name][student] = {
                    "rel_l1_into_steps_1_2_3": [rel_l1(b, a) for a, b in pairs],
                    "least_over_prompts": [
                        min(rel_l1(b[i : i + 1], a[i : i + 1]) for i in range(n_prompts))
                        for a, b in pairs
                    ],
                }
        return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--guidance", type=float, default=TEACHER_GUIDANCE)
    parser.add_argument(
        "--students", action="store_true", help="add the idealised consistency/posterior students"
    )
    args = parser.parse_args(argv)
    result = secant_changes(args.resources, guidance=args.guidance)
    if args.students:
        result["idealised_students"] = student_changes(args.resources, guidance=args.guidance)
    emit_json(result, args.out)


if __name__ == "__main__":
    main()
