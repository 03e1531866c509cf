"""MOSS-Image's adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux runs MOSS-Image eagerly on every machine (nothing in it is ``mx.compile``'d), calling the
transformer once per branch: the gated step is eager, and vanilla and the gated re-walk share one
numerical path, compared bit for bit. The unconditional branch skips layer 22 (mflux's default),
so the tiny shell has 23 layers.

The generic tests run MOSS-Image's shell cases (``FAMILY.random_weights.cases``): CFG and not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.moss_image.model.moss_image_transformer.moss_image_block import (
    MOSSImageBlock,
    MOSSImageTextBlock,
)

from app.adapters import common, install_gate, shells
from app.adapters.replay import record_and_replay
from app.families import get_family
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
STEPS = 6
CFG = {"num_inference_steps": STEPS, "height": 64, "width": 64, "guidance": 3.0}
NO_CFG = {**CFG, "guidance": 1.0}

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def built() -> Iterator[Callable[[str, int], Any]]:
    """Tiny shells through the registry, one per (mflux model name, seed) for the module."""
    cache: dict[tuple[str, int], Any] = {}

    def get(model_name: str, seed: int = 0) -> Any:
        if (model_name, seed) not in cache:
            with common.use_precision(mx.float32):
                cache[(model_name, seed)] = shells.random_weight_shell(
                    get_family("moss-image"), model_name, seed=seed
                )
        return cache[(model_name, seed)]

    yield get
    cache.clear()


@pytest.fixture
def pipeline(built: Callable[[str, int], Any]) -> Any:
    return built("moss-image-sft", 0)


# -- MOSS-Image's own ----------------------------------------------------------------------------


def test_forced_skips_reuse_each_branchs_own_residual(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    layers: list[int] = []
    original = MOSSImageBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        layers.append(next(i for i, m in enumerate(pipeline.transformer.layers) if m is self))
        return original(self, *args, **kwargs)

    pipeline.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(pipeline, probes.LatentRecorder()) as recorder,
            install_gate(pipeline, gate),
        ):
            monkeypatch.setattr(MOSSImageBlock, "__call__", counting)
            gated = probes.generate_latents(pipeline, **CFG)
            monkeypatch.setattr(MOSSImageBlock, "__call__", original)
    finally:
        pipeline.vae.before_decode = None
    vanilla = probes.generate_latents(pipeline, **CFG)
    with install_gate(pipeline, probes.recorder()):
        observed_run = probes.generate_latents(pipeline, **CFG)

    assert mx.array_equal(observed_run, vanilla).item()  # the split step, every step computed
    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))
    assert set(gate.outputs.values()) == {1}
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    # Four computed steps: the conditional branch runs all 23 layers, the unconditional one all
    # but layer 22 (mflux's uncond_skip_layers); a skipped step runs none.
    depth = len(pipeline.transformer.layers)
    assert layers == 4 * [*range(depth), *(i for i in range(depth) if i != 22)]
    tr = pipeline.transformer
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            out, stored_in, stored_residual = gate.stored[(step - 1, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # The residual is kept over the image tokens: this step's embedding of its latents.
            latents = recorder.inputs[step]
            b, c, h, w = latents.shape
            tokens = latents.reshape(b, c, h * w).transpose(0, 2, 1)
            assert mx.array_equal(body_in, tr.video_embedder(tokens)).item()
            assert mx.array_equal(result, body_in + residual).item()
        cond, uncond = gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        assert not mx.array_equal(cond, uncond).item()


def test_a_skipped_step_predicts_the_tail_of_input_plus_residual(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CFG: the noise on a skipped step is the head over ``x + r`` on the latent grid,
    computed here independently of the adapter from mflux's modulation; no layer runs."""
    blocks = 0
    original = MOSSImageBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal blocks
        blocks += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MOSSImageBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE)
    sink: list[mx.array] = []
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        install_gate(pipeline, gate),
    ):
        undo = record_and_replay(pipeline, sink, None)
        try:
            probes.generate_latents(pipeline, **NO_CFG)
        finally:
            undo()
    assert gate.pattern == "FSCSCF"
    assert {branch for (_, branch) in gate.stored} == {"cond"}  # no CFG: one residual
    tr = pipeline.transformer
    assert blocks == 4 * len(tr.layers)  # four computed steps, one branch each
    timesteps = recorder.config.scheduler.timesteps.tolist()
    for step in (1, 3):
        _, _, result = gate.reused[(step, "cond")]
        _, head = tr._modulation(timesteps[step], 1)
        x = tr.final_norm_video(result) * (1 + head[:, 1:2]) + head[:, 0:1]
        b, c, h, w = recorder.inputs[step].shape
        noise = tr.final_linear_video(x).transpose(0, 2, 1).reshape(b, c, h, w)
        assert mx.array_equal(sink[step], noise).item()


def test_the_captions_stream_is_built_once_per_generation_and_caption(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mflux runs the caption's two text blocks on every call; the gated step once per caption
    in a generation (they read no timestep), with the same values (observing stays bit-exact:
    test_threshold_zero_and_observe_are_bit_exact_to_vanilla)."""
    calls = 0
    original = MOSSImageTextBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MOSSImageTextBlock, "__call__", counting)
    text_blocks = len(pipeline.transformer.text_embedder.blocks)
    probes.generate_latents(pipeline, **CFG)
    assert calls == STEPS * 2 * text_blocks  # mflux: every call
    calls = 0
    with install_gate(pipeline, probes.recorder()):
        probes.generate_latents(pipeline, **CFG)
        probes.generate_latents(pipeline, **CFG)
    assert calls == 2 * 2 * text_blocks  # two generations, two captions each


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    caption = pipeline.prompt_cache[shells.DEFAULT_PROMPT]
    latents = mx.random.normal((1, 128, 4, 4), key=mx.random.key(3))
    with install_gate(pipeline, gate):
        gated = pipeline.transformer(latents, 600.0, caption)
    plain = pipeline.transformer(latents, 600.0, caption)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()
