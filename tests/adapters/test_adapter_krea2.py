"""Krea 2 adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux compiles Krea 2's predict except on base/Pro M1/M2. Both are checked: on the eager path
(``is_m1_or_m2`` patched True) vanilla and the gated re-walk share one numerical path; on the
compiled path the adapter's split-compiled step traced bit-identical to mflux's one compiled
predict on these float32 shells (seeds 0–1, with and without CFG: max |Δ| 0), so both compare bit
for bit. Threshold 0 and observing (eager): test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.krea2.model.krea2_transformer.transformer_block import SingleStreamBlock
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate, shells
from app.adapters.krea2 import shell as krea2_shell
from app.adapters.replay import record_and_replay
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
STEPS = 6
TURBO = {"num_inference_steps": STEPS, "height": 128, "width": 128, "guidance": 1.0}
CFG = {**TURBO, "guidance": 3.0}


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return krea2_shell("krea-2")


def _patchify_first(pipeline: Any, latents: mx.array) -> mx.array:
    """mflux's image stream of ``latents``: pad, patchify, ``first`` (written out here)."""
    tr = pipeline.transformer
    b, c, h, w = latents.shape
    p = tr.patch
    tokens = latents.reshape(b, c, h // p, p, w // p, p).transpose(0, 2, 4, 1, 3, 5)
    return tr.first(tokens.reshape(b, (h // p) * (w // p), c * p * p))


@pytest.mark.parametrize("path", ["eager", "compiled"])
def test_forced_skips_reuse_each_branchs_own_residual(
    pipeline: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: path == "eager"))
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
    vanilla = probes.generate_latents(pipeline, **CFG)
    with install_gate(pipeline, probes.recorder()):
        observed = probes.generate_latents(pipeline, **CFG)

    assert mx.array_equal(observed, vanilla).item()  # the split step, every step computed
    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))
    assert set(gate.outputs.values()) == {1}
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    if path == "compiled":
        # The compiled step keeps and adds each branch's residual inside its compiled parts
        # (the gate sees no ends to record): both branches cached, distinct; its parity with the
        # eager step is test_compiled_gate_split.py's.
        assert set(gate.cached_branches) <= {"cond", "uncond"}
        return
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            out, stored_in, stored_residual = gate.stored[(step - 1, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # The residual is kept over the joint sequence the tail reads: the caption's
            # tokens, then this step's image stream of its own latents.
            expected_in = _patchify_first(pipeline, recorder.inputs[step])
            image_in = body_in[:, body_in.shape[1] - expected_in.shape[1] :]
            assert mx.array_equal(image_in, expected_in).item()
            assert mx.array_equal(result, body_in + residual).item()
        cond, uncond = gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        assert not mx.array_equal(cond, uncond).item()


def test_a_skipped_step_predicts_the_tail_of_input_plus_residual(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CFG (Turbo's default): the velocity on a skipped step is ``last(x + r, t)``
    unpatchified, computed here independently of the adapter; nothing runs a block."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))
    blocks = 0
    original = SingleStreamBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal blocks
        blocks += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SingleStreamBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE)
    sink: list[mx.array] = []
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        install_gate(pipeline, gate),
    ):
        undo = record_and_replay(pipeline, sink, None)
        try:
            probes.generate_latents(pipeline, **TURBO)
        finally:
            undo()
    assert gate.pattern == "FSCSCF"
    assert {branch for (_, branch) in gate.stored} == {"cond"}  # no CFG: one residual
    tr = pipeline.transformer
    assert blocks == 4 * len(tr.blocks)  # four computed steps, one branch each
    from mflux.models.krea2.model.krea2_transformer.timestep_embedder import Krea2TimestepMLP

    sigmas = recorder.config.scheduler.sigmas
    for step in (1, 3):
        _, _, result = gate.reused[(step, "cond")]
        embedding = Krea2TimestepMLP.timestep_embedding(sigmas[step].reshape(1), tr.tdim)
        t = tr.tmlp(embedding[:, None, :].astype(result.dtype))
        side = recorder.inputs[step].shape[-1] // tr.patch
        final = tr.last(result, t)[:, -side * side :]  # (1, h·w, C·p·p): the image tokens
        image = final.reshape(1, side, side, tr.channels, tr.patch, tr.patch)
        image = image.transpose(0, 3, 1, 4, 2, 5).reshape(recorder.inputs[step].shape)
        assert mx.array_equal(sink[step], image).item()


def test_the_compiled_step_is_traced_once_per_generation(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate):
        state = pipeline._predict.teacache_state
        probes.generate_latents(pipeline, **CFG)
        first = dict(state.traces)
        probes.generate_latents(pipeline, **CFG)
    # Not once per step; the captions' fused stream once per generation and caption, the
    # measurement with each next step's prelude (the look-ahead).
    once = {"caption": 1, "prelude": 1, "measure": 1, "body": 1, "tail": 1}
    assert first == once
    assert dict(state.traces) == {name: 2 * count for name, count in once.items()}


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    embeds, _ = pipeline._encode_prompts(
        prompt=shells.DEFAULT_PROMPT, negative_prompt=None, guidance=1.0
    )
    latents = mx.random.normal((1, 16, 8, 8), key=mx.random.key(3))
    timestep = mx.array([0.6])
    with install_gate(pipeline, gate):
        gated = pipeline._predict(pipeline.transformer, embeds, None, 1.0)(
            latents=latents, timestep=timestep
        )
    plain = pipeline._predict(pipeline.transformer, embeds, None, 1.0)(
        latents=latents, timestep=timestep
    )
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()
