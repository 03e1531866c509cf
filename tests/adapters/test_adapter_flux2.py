"""FLUX.2 Klein adapter on tiny random-weight shells running mflux's real ``generate_image``.

Vanilla here is mflux's *eager* predict (``is_m1_or_m2`` patched True), so vanilla and the
gated re-walk share one numerical path and are compared bit for bit. The compiled vanilla path
is compared within a measured tolerance in tests/test_adapter_compiled.py; threshold 0 and
observing against vanilla (CFG and not) in test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.flux2.model.flux2_transformer.single_transformer_block import (
    Flux2SingleTransformerBlock,
)

from app.adapters import common, install_gate, shells
from app.adapters.flux2 import shell as flux2_shell
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

# Zero coefficients predict no change, so every eligible step skips up to the streak cap:
# a deterministic skip pattern on random weights (their thresholds mean nothing).
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
CFG = {"num_inference_steps": 6, "height": 128, "width": 128, "guidance": 4.0}
NO_CFG = {**CFG, "guidance": 1.0}


pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return flux2_shell("flux2-klein-base-4b")


def test_forced_skips_reuse_each_branchs_own_residual(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    body_runs = 0
    original = Flux2SingleTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal body_runs
        body_runs += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Flux2SingleTransformerBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    pipeline.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(pipeline, probes.LatentRecorder()) as recorder,
            install_gate(pipeline, gate),
        ):
            gated = probes.generate_latents(pipeline, **CFG)
    finally:
        pipeline.vae.before_decode = None
    gated_body_runs = body_runs
    vanilla = probes.generate_latents(pipeline, **CFG)

    assert gate.pattern == "FSCSCF"
    assert gate.skipped == 2  # engagement: the gate really skipped
    assert not mx.array_equal(gated, vanilla).item()
    computed = [e.index for e in gate.events if e.decision.computes]
    blocks = len(pipeline.transformer.single_transformer_blocks)
    assert gated_body_runs == len(computed) * 2 * blocks  # two branches, nothing on skipped steps
    assert set(gate.outputs.values()) == {1}  # one record_output per step, CFG or not

    transformer = pipeline.transformer
    for event in gate.events:
        if event.decision is not Decision.skipped:
            continue
        step = event.index
        latents = recorder.inputs[step]
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            # The residual is the one stored at the last computed step, for this branch.
            source = max(s for (s, b) in gate.stored if b == branch and s < step)
            out, stored_in, stored_residual = gate.stored[(source, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # The body input is this step's fresh embedding of its own latents: the residual is
            # kept over the image tokens the tail reads (app/adapters/step.py).
            expected_in = transformer.x_embedder(latents)
            assert mx.array_equal(body_in, expected_in).item()
            assert mx.array_equal(result, body_in + residual).item()
        cond = gate.stored[(max(s for (s, b) in gate.stored if s < step), "cond")][2]
        uncond = gate.stored[(max(s for (s, b) in gate.stored if s < step), "uncond")][2]
        assert not mx.array_equal(cond, uncond).item()


def test_skipped_step_prediction_is_the_tail_of_input_plus_residual(pipeline: Any) -> None:
    """End to end for one skipped step: the noise mflux received equals the CFG combination of
    ``tail(body_in + residual)`` per branch, computed here independently of the adapter."""
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)
    noises: list[mx.array] = []
    original_record = gate.record_output

    def keep(output: mx.array) -> None:
        noises.append(output)
        original_record(output)

    gate.record_output = keep  # type: ignore[method-assign]
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        install_gate(pipeline, gate),
    ):
        probes.generate_latents(pipeline, **CFG)
    step = next(e.index for e in gate.events if e.decision is Decision.skipped)
    tr = pipeline.transformer
    timestep = recorder.config.scheduler.timesteps[step]
    t = mx.full((1,), timestep, dtype=mx.float32).astype(mx.float32)
    t = t * mx.where(mx.max(t) <= 1.0, 1000.0, 1.0).astype(mx.float32)
    temb = tr.time_guidance_embed(t, None).astype(mx.float32)
    branches = {}
    for branch in ("cond", "uncond"):
        _, _, result = gate.reused[(step, branch)]
        text_len = result.shape[1] - recorder.inputs[step].shape[1]
        branches[branch] = tr.proj_out(tr.norm_out(result[:, text_len:], temb))
    expected = branches["uncond"] + CFG["guidance"] * (branches["cond"] - branches["uncond"])
    assert mx.array_equal(noises[step], expected).item()


def test_no_cfg_keeps_a_single_residual(pipeline: Any) -> None:
    gate = probes.RecordingGate(ALTERNATE)
    with install_gate(pipeline, gate):
        probes.generate_latents(pipeline, **NO_CFG)
    assert gate.skipped == 2
    assert {branch for (_, branch) in gate.stored} == {"cond"}


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate):
        predict = pipeline._predict(pipeline.transformer)
        embeds, ids = pipeline._encode_prompt_pair.table[shells.DEFAULT_PROMPT]
        from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator

        latents, latent_ids, _, _ = Flux2LatentCreator.prepare_packed_latents(
            seed=0, height=64, width=64, batch_size=1
        )
        kwargs = {
            "latents": latents,
            "latent_ids": latent_ids,
            "prompt_embeds": embeds,
            "text_ids": ids,
            "negative_prompt_embeds": None,
            "negative_text_ids": None,
            "guidance": 1.0,
            "timestep": mx.array(500.0),
        }
        gated = predict(**kwargs)
    plain = pipeline._predict(pipeline.transformer)(**kwargs)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()
