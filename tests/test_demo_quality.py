"""Prompt adherence of the trained demo models, scored by the checker (CPU, ~20 s).

30 of the 100 evaluation prompts through the batched sampler (which reproduces mflux's loop
pixel for pixel, see test_demo_pipeline.py). The full 100-prompt figures through the real pipeline
are in resources/demo/eval-*.json (``python -m app.demo.evaluate``).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from app.demo.codec import load_codec
from app.demo.evaluate import eval_prompts, sample_batch, score_images, to_uint8
from app.demo.model import CODEC_FILE, RESOURCES, VARIANT_FILES, load_model
from app.variants import get_variant

N = 30
COLOUR_FLOOR, SHAPE_FLOOR, TURBO_MARGIN = 0.90, 0.80, 0.05  # the bars
SHAPE_REGRESSION_FLOOR = 0.56

UNDERTRAINED_FOR_SHAPE = pytest.mark.xfail(
    strict=True,
    reason="run-7g weights (84k steps, grown to 8 single blocks) follow shape on 75% of the 100 "
    "prompts at guidance 3, 95% interval [66, 82] (colour 99%); stars are the gap (25/42 right, "
    "read as squares or triangles); shape rose 68 → 75% with the growth "
    "(resources/demo/training/README.md)",
)
TURBO_TRAILS_ON_STARS = pytest.mark.xfail(
    strict=True,
    reason="the shipped demo-turbo (run 7h, on-policy distillation along guidance-3 teacher "
    "trajectories) scores 98/69% colour/shape on the 100 prompts against the demo's 99/75%: "
    "6 points behind on shape, [-15, +3] (it was 9 before on-policy training), and below the "
    "80% shape bar itself; it loses stars (25 → 15 of 42) (resources/demo/training)",
)


def _scores(variant: str, steps: int) -> dict[str, float]:
    model = load_model(RESOURCES / VARIANT_FILES[variant])
    codec = load_codec(RESOURCES / CODEC_FILE)
    prompts = eval_prompts(N)
    guidance = get_variant(variant).default_guidance  # "default settings": demo samples with CFG
    assert guidance is not None
    latents = sample_batch(model, prompts, list(range(N)), steps, guidance)
    images = np.clip(np.array(codec.decode(latents, xp=mx)) / 2 + 0.5, 0, 1)
    return score_images(to_uint8(images), prompts)["scores"]


@pytest.fixture(scope="module")
def demo_scores() -> dict[str, float]:
    return _scores("demo", 28)


def test_demo_colour_is_learned(demo_scores: dict[str, float]) -> None:
    # The colour bar, on 30 of the 100 prompts (run 7g at guidance 3: 29/30 through the
    # real pipeline, 0.99 on all 100).
    assert demo_scores["colour"] >= COLOUR_FLOOR, demo_scores


@pytest.mark.slow
@UNDERTRAINED_FOR_SHAPE
def test_demo_meets_the_shape_bar(demo_scores: dict[str, float]) -> None:
    assert demo_scores["shape"] >= SHAPE_FLOOR, demo_scores


def test_demo_shape_does_not_regress(demo_scores: dict[str, float]) -> None:
    # Guards the shipped weights until the bar above is met: run 7g measured 20/30 on these
    # prompts (run 6b 19/30, run 4 15/30, run 3 11/30, runs 1 and 2 about 0.10–0.15, plain chance
    # with two clauses); a broken codec, tokenizer or sampler scores near 0. The floor (17/30)
    # leaves three prompts of room for BLAS/Metal numerics.
    assert demo_scores["shape"] >= SHAPE_REGRESSION_FLOOR, demo_scores


@pytest.mark.slow
@TURBO_TRAILS_ON_STARS
def test_turbo_within_five_points_and_meets_the_bars(demo_scores: dict[str, float]) -> None:
    turbo = _scores("demo-turbo", 4)
    assert turbo["shape"] >= SHAPE_FLOOR
    for key in ("colour", "shape"):
        assert turbo[key] >= demo_scores[key] - TURBO_MARGIN, (key, turbo, demo_scores)
