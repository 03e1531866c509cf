"""The shipped weights still draw what the committed evaluations record: a cheap guard.

The issue's bars are over 100 prompts through the real pipeline; those figures are committed
(lab/demo/results/eval-*.json, ``python -m lab.demo.evaluate``) and test_demo_evaluations.py checks
them against the bars and against their own per-prompt records. What can break afterwards is the
path from the weights to a scored image (weights, decoder, tokenizer, sampler, checker): a broken
one scores near chance (runs 1 and 2: shape 0.13-0.15) and disagrees with the committed verdicts on
most prompts. So this renders the first prompts of the committed set and compares verdicts prompt
by prompt. The demo at its default settings is guarded the same way through the real pipeline by
test_demo_sampling.py (its first 3 prompts, verdicts equal to eval-demo.json's); here the turbo,
whose 4 unguided steps are cheap, runs 20 prompts through the batched sampler.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from app.demo.decoder import load_decoder
from app.demo.model import DECODER_FILE, VARIANT_FILES, load_model
from app.paths import DEMO_DIR
from app.variants import get_variant
from lab.demo.evaluate import eval_prompts, sample_batch, score_images, to_uint8
from lab.paths import DEMO_RESULTS

N = 20  # first prompts of the committed 100: committed turbo verdicts 19/20 colour, 16/20 shape
# The batched sampler reproduces mflux's loop pixel for pixel for one prompt (test_demo_pipeline);
# on a batch, OpenBLAS's batch-dependent kernels can move a prompt. Measured 2026-12-01: the turbo's
# colour and shape verdicts on the first 20 prompts equal eval-demo-turbo.json's on 20 of 20.
# One prompt of slack for that kernel noise; a broken path disagrees on most of them.
MAX_DISAGREEING = 1
# Floors: the committed 19/20 colour and 16/20 shape, less that one prompt (broken: ~0.15 shape).
COLOUR_FLOOR, SHAPE_FLOOR = 18 / N, 15 / N


@pytest.fixture(scope="module")
def turbo() -> dict[str, Any]:
    variant = get_variant("demo-turbo")
    assert (variant.default_steps, variant.default_guidance) == (4, 1.0)
    model = load_model(DEMO_DIR / VARIANT_FILES["demo-turbo"])
    decoder = load_decoder(DEMO_DIR / DECODER_FILE)
    prompts = eval_prompts(N)
    latents = sample_batch(model, prompts, list(range(N)), 4, 1.0)  # seeds as in the evaluation
    images = np.clip(np.array(decoder(latents, 128, 128)) / 2 + 0.5, 0, 1)
    return score_images(to_uint8(images), prompts)


def test_turbo_verdicts_are_the_committed_ones(turbo: dict[str, Any]) -> None:
    committed = json.loads((DEMO_RESULTS / "eval-demo-turbo.json").read_text(encoding="utf-8"))
    expected = committed["per_prompt"][:N]
    assert [r["prompt"] for r in turbo["per_prompt"]] == [r["prompt"] for r in expected]
    disagreeing = [
        (got["prompt"], key)
        for got, want in zip(turbo["per_prompt"], expected, strict=True)
        for key in ("colour", "shape")
        if got[key] != want[key]
    ]
    assert len(disagreeing) <= MAX_DISAGREEING, disagreeing


def test_turbo_scores_hold_on_the_slice(turbo: dict[str, Any]) -> None:
    scores = turbo["scores"]
    assert scores["colour"] >= COLOUR_FLOOR - 1e-9, scores  # 1e-9: float division, not a prompt
    assert scores["shape"] >= SHAPE_FLOOR - 1e-9, scores
