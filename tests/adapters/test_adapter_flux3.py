"""FLUX.3 Image Klein adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux does not compile FLUX.3's predict (its RoPE angles are built on the host), so vanilla and the
gated re-walk share one numerical path: comparisons are bit for bit. Threshold 0 and observing
against vanilla (distilled and base): test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.flux3.model.flux3_scheduler.flux3_flow_map_scheduler import (
    Flux3FlowMapScheduler,
)
from mflux.models.flux3.model.flux3_transformer.flux3_block import Flux3Block

from app.adapters import common, flux3, install_gate, shells
from app.adapters.flux3 import shell as flux3_shell
from app.adapters.replay import record_and_replay
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

# Zero coefficients predict no change, so every eligible step skips up to the streak cap:
# a deterministic skip pattern on random weights (their thresholds mean nothing).
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
STEPS = 6
DISTILLED = {"num_inference_steps": STEPS, "height": 128, "width": 128}
BASE = {**DISTILLED, "guidance": 4.0}


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def distilled() -> Any:
    with common.use_precision(mx.float32):
        return flux3_shell("flux3-image-klein")


@pytest.fixture(scope="module")
def base() -> Any:
    with common.use_precision(mx.float32):
        return flux3_shell("flux3-image-klein-base")


def _expected_input(pipeline: Any, latents: mx.array) -> mx.array:
    return pipeline.transformer.x_embedders["image"](latents.astype(mx.float32))


def test_forced_skips_reuse_each_branchs_own_residual(
    base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_runs = 0
    original = Flux3Block.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal block_runs
        block_runs += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Flux3Block, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    base.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(base, probes.LatentRecorder()) as recorder,
            install_gate(base, gate),
        ):
            gated = probes.generate_latents(base, **BASE)
    finally:
        base.vae.before_decode = None
    gated_block_runs = block_runs
    vanilla = probes.generate_latents(base, **BASE)

    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement: it really skipped
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))  # one decision per step serves both branches
    tr = base.transformer
    per_branch = 2 * len(tr.txt_mode_blocks) + len(tr.single_transformer_blocks)
    computed = sum(e.decision.computes for e in gate.events)
    assert gated_block_runs == computed * 2 * per_branch  # nothing runs on a skipped step
    assert set(gate.outputs.values()) == {1}  # one record_output per step
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            out, stored_in, stored_residual = gate.stored[(step - 1, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # The image stream of this step's own latents; both branches share it.
            assert mx.array_equal(body_in, _expected_input(base, recorder.inputs[step])).item()
            assert mx.array_equal(result, body_in + residual).item()
        cond, uncond = gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        assert not mx.array_equal(cond, uncond).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)


def test_a_skipped_step_predicts_the_tail_of_input_plus_residual(distilled: Any) -> None:
    """End to end on the distilled flow map: the velocity mflux received on a skipped step equals
    ``proj_out(norm_out(x + r))`` with the step's own (current + target) time embedding,
    computed here independently of the adapter's tail."""
    gate = probes.RecordingGate(ALTERNATE)
    sink: list[mx.array] = []
    with (
        common.attached(distilled, probes.LatentRecorder()) as recorder,
        install_gate(distilled, gate),
    ):
        undo = record_and_replay(distilled, sink, None)
        try:
            probes.generate_latents(distilled, **DISTILLED)
        finally:
            undo()
    assert gate.pattern == "FSCSCF" and len(sink) == STEPS
    tr = distilled.transformer
    times = Flux3FlowMapScheduler(num_inference_steps=STEPS).timesteps
    for step in (1, 3):
        _, _, result = gate.reused[(step, "cond")]
        vec = tr.timestep_embedder(times[step : step + 1])
        assert tr.target_timestep_embedder is not None  # the distilled checkpoint's flow map
        vec = vec + tr.target_timestep_embedder(times[step + 1 : step + 2])
        assert mx.array_equal(sink[step], tr.proj_out(tr.norm_out(result, vec))).item()
        body_in = _expected_input(distilled, recorder.inputs[step])
        assert mx.array_equal(result, body_in + gate.reused[(step, "cond")][1]).item()


def test_the_distilled_model_keeps_a_single_residual(distilled: Any) -> None:
    gate = probes.RecordingGate(ALTERNATE)
    with install_gate(distilled, gate):
        probes.generate_latents(distilled, **DISTILLED)
    assert gate.skipped == 2
    assert {branch for (_, branch) in gate.stored} == {"cond"}


def test_calls_outside_a_generation_are_not_gated(distilled: Any) -> None:
    from mflux.models.flux3.latent_creator.flux3_latent_creator import Flux3LatentCreator

    gate = TeaCacheGate(ALTERNATE)
    tokens, ids = distilled.prompt_cache[shells.DEFAULT_PROMPT]
    times = Flux3FlowMapScheduler(num_inference_steps=4).timesteps
    kwargs = {
        "latents": Flux3LatentCreator.create_noise(0, 64, 64),
        "latent_ids": Flux3LatentCreator.prepare_ids(4, 4),
        "text_tokens": tokens,
        "text_ids": ids,
        "uncond_tokens": None,
        "uncond_ids": None,
        "cond_tokens": None,
        "cond_ids": None,
        "guidance": None,
        "timestep": times[1:2],
        "target_timestep": times[2:3],
    }
    with install_gate(distilled, gate):
        gated = distilled._predict(distilled.transformer)(**kwargs)
    plain = distilled._predict(distilled.transformer)(**kwargs)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()
    # The re-walk's prelude and signal are mflux's own on the same inputs.
    anatomy = flux3.Flux3Anatomy(distilled.transformer)
    rest = (times[2:3], kwargs["latent_ids"], tokens, ids)
    head = anatomy.embed(kwargs["latents"], times[1:2], rest)
    assert mx.array_equal(head["x"], _expected_input(distilled, kwargs["latents"])).item()
