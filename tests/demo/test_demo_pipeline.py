"""The demo as a Flux2Klein shell: mflux's real FLUX.2 loop, our text encoder and decoder."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

from app.demo.pipeline import DemoFlux2Klein, eager_predict, load_demo_pipeline
from lab.demo.scenes import PAD_ID, PromptError

PROMPT = (
    "two small red stars at the left and a large blue circle at the right on a white background"
)


class StepCounter:
    def __init__(self) -> None:
        self.steps: list[int] = []

    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any,
        **kwargs: Any,
    ) -> None:
        self.steps.append(t)


@pytest.fixture
def pipe(demo_pipeline: DemoFlux2Klein) -> DemoFlux2Klein:
    return demo_pipeline  # loaded once per session (tests/conftest.py)


def _image(pipe: DemoFlux2Klein, **kwargs: Any) -> np.ndarray:
    args = {"seed": 7, "prompt": PROMPT, "num_inference_steps": 6, "height": 128, "width": 128}
    return np.asarray(pipe.generate_image(**{**args, **kwargs}).image.convert("RGB"))


def test_shell_runs_mflux_generation_loop(pipe: DemoFlux2Klein) -> None:
    assert isinstance(pipe, Flux2Klein)
    assert vars(pipe)["_predict"] is eager_predict  # instance seam, no mx.compile
    counter = StepCounter()
    assert pipe.callbacks is not None  # set by load_demo_pipeline
    pipe.callbacks.register(counter)
    try:
        before = ModelConfig.precision
        image = _image(pipe, num_inference_steps=28)
        assert ModelConfig.precision == before  # float32 only inside the demo's generation
    finally:
        pipe.callbacks.in_loop.remove(counter)
    assert counter.steps == list(range(28))
    assert image.shape == (128, 128, 3) and image.dtype == np.uint8
    assert image.std() > 5  # a picture, not a flat fill


def test_same_seed_same_image_and_seeds_differ(pipe: DemoFlux2Klein) -> None:
    assert np.array_equal(_image(pipe), _image(pipe))
    assert not np.array_equal(_image(pipe), _image(pipe, seed=8))


def test_classifier_free_guidance_uses_the_blank_negative_prompt(pipe: DemoFlux2Klein) -> None:
    pos, _pos_ids, neg, neg_ids = pipe._encode_prompt_pair(
        prompt=PROMPT, negative_prompt=" ", guidance=3.0
    )
    assert neg is not None and neg_ids is not None
    assert pos.shape == neg.shape == (1, 24, 128)
    blank = pipe.text_model(mx.full((1, 24), PAD_ID, dtype=mx.int32))
    assert mx.array_equal(neg, blank)
    assert pipe._encode_prompt_pair(prompt=PROMPT, negative_prompt=" ", guidance=1.0)[2] is None
    assert not np.array_equal(_image(pipe, guidance=3.0), _image(pipe, guidance=1.0))


def test_out_of_vocabulary_prompt_fails_before_generating(pipe: DemoFlux2Klein) -> None:
    with pytest.raises(PromptError, match="does not know 'dragon'"):
        _image(pipe, prompt="a red dragon")


def test_batched_sampler_reproduces_the_pipeline(pipe: DemoFlux2Klein) -> None:
    """The GPU evaluation's batched sampler is mflux's arithmetic: same pixels as the loop."""
    from app.demo.decoder import load_decoder
    from app.demo.model import DECODER_FILE, VARIANT_FILES, load_model
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import sample_batch, to_uint8

    model = load_model(DEMO_DIR / VARIANT_FILES["demo"])
    latents = sample_batch(model, [PROMPT], [7], steps=6)
    decoder = load_decoder(DEMO_DIR / DECODER_FILE)
    decoded = np.clip(np.array(decoder(latents, 128, 128)) / 2 + 0.5, 0, 1)
    # Measured identical (max difference 0) on 2026-11-30; one level allows a rounding tie.
    assert np.abs(to_uint8(decoded)[0].astype(int) - _image(pipe).astype(int)).max() <= 1


def test_turbo_loads_and_unknown_variant_is_refused() -> None:
    turbo = load_demo_pipeline("demo-turbo")
    image = np.asarray(
        turbo.generate_image(
            seed=1, prompt="a red circle", num_inference_steps=4, height=128, width=128
        ).image
    )
    assert image.shape == (128, 128, 3)
    with pytest.raises(ValueError, match="unknown demo variant"):
        load_demo_pipeline("demo-large")
