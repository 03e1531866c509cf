"""Prompt adherence of the trained demo models against the issue's bars, scored by the checker.

The issue's 100 evaluation prompts (CPU, about two minutes) through the batched sampler, which
reproduces mflux's loop pixel for pixel for one prompt (test_demo_pipeline.py); on a batch,
OpenBLAS's batch-dependent kernels can move a prompt or two against the per-image figures in
resources/demo/eval-*.json (``python -m lab.demo.evaluate``, the real pipeline).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from app.demo.codec import load_codec
from app.demo.model import CODEC_FILE, VARIANT_FILES, load_model
from app.paths import DEMO_DIR
from app.variants import get_variant
from lab.demo.evaluate import eval_prompts, sample_batch, score_images, to_uint8

N = 100  # the bars are over 100 random in-vocabulary prompts
COLOUR_FLOOR, SHAPE_FLOOR, TURBO_MARGIN = 0.90, 0.80, 0.05  # the bars


def _scores(variant: str, steps: int) -> dict[str, float]:
    model = load_model(DEMO_DIR / VARIANT_FILES[variant])
    codec = load_codec(DEMO_DIR / CODEC_FILE)
    prompts = eval_prompts(N)
    guidance = get_variant(variant).default_guidance  # "default settings": demo samples with CFG
    assert guidance is not None
    latents = sample_batch(model, prompts, list(range(N)), steps, guidance)
    images = np.clip(np.array(codec.decode(latents, xp=mx)) / 2 + 0.5, 0, 1)
    return score_images(to_uint8(images), prompts)["scores"]


@pytest.fixture(scope="module")
def demo_scores() -> dict[str, float]:
    return _scores("demo", 28)


def test_demo_meets_the_colour_bar(demo_scores: dict[str, float]) -> None:
    # Run 8k at guidance 3: 0.99 through the real pipeline (eval-demo.json), 0.99 here.
    assert demo_scores["colour"] >= COLOUR_FLOOR, demo_scores


@pytest.mark.slow
def test_demo_meets_the_shape_bar(demo_scores: dict[str, float]) -> None:
    # Run 8k: 0.85 through the real pipeline, 0.85 here. A broken codec, tokenizer or sampler
    # scores near chance (runs 1 and 2: 0.13-0.15), so this also guards the whole path.
    assert demo_scores["shape"] >= SHAPE_FLOOR, demo_scores


@pytest.mark.slow
def test_turbo_is_within_five_points_of_the_demo(demo_scores: dict[str, float]) -> None:
    # Run 8k's turbo: 0.98 / 0.80 colour / shape through the real pipeline against the demo's
    # 0.99 / 0.85 — shape exactly 5 points behind, so a turbo one prompt worse fails here.
    turbo = _scores("demo-turbo", 4)
    for key in ("colour", "shape"):
        assert turbo[key] >= demo_scores[key] - TURBO_MARGIN - 1e-9, (key, turbo, demo_scores)
