"""Qwen-Image adapter on a tiny random-weight shell running mflux's real ``generate_image``.

mflux calls the Qwen transformer eagerly, twice per step (positive, then negative caption), so
vanilla and the gated re-walk share one numerical path: comparisons are bit for bit. Threshold 0
and observing against vanilla: test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.qwen.model.qwen_transformer.qwen_transformer_block import QwenTransformerBlock

from app.adapters import common, install_gate
from app.adapters.qwen_image import shell as qwen_shell
from app.gate import Decision, TeaCacheParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
RUN = {"num_inference_steps": 6, "height": 128, "width": 128, "guidance": 4.0}


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return qwen_shell("qwen-image")


def test_two_calls_per_step_share_one_decision_and_keep_two_residuals(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_calls = 0
    original = QwenTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal block_calls
        block_calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(QwenTransformerBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == ()

    pipeline.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(pipeline, probes.LatentRecorder()) as recorder,
            install_gate(pipeline, gate),
        ):
            gated = probes.generate_latents(pipeline, **RUN)
    finally:
        pipeline.vae.before_decode = None
    calls = block_calls
    vanilla = probes.generate_latents(pipeline, **RUN)

    assert gate.pattern == "FSCSCF" and gate.skipped == 2
    assert not mx.array_equal(gated, vanilla).item()
    # One signal per step (the positive call decides, the negative reuses the decision).
    assert gate.signals == list(range(RUN["num_inference_steps"]))
    computed = sum(e.decision.computes for e in gate.events)
    assert calls == computed * 2 * len(pipeline.transformer.transformer_blocks)
    assert set(gate.outputs.values()) == {1}
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            out, stored_in, stored_residual = gate.stored[(step - 1, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # Image stream input of this step: img_in of this step's latents (both branches).
            expected_in = pipeline.transformer.img_in(recorder.inputs[step])
            assert mx.array_equal(body_in, expected_in).item()
            assert mx.array_equal(result, body_in + residual).item()
        assert not mx.array_equal(
            gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        ).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)


def test_an_interrupted_generation_does_not_confuse_the_pairing(pipeline: Any) -> None:
    """A run that dies mid-step leaves a half-paired step; the next run must start fresh."""
    gate = probes.RecordingGate(ALTERNATE)

    class Boom:
        def call_in_loop(self, t: int, **kw: Any) -> None:
            if t == 0:
                raise RuntimeError("cancelled")

    boom = Boom()
    pipeline.callbacks.register(boom)  # before the gate's lifecycle: step 0 never ends
    try:
        with install_gate(pipeline, gate):
            with pytest.raises(RuntimeError, match="cancelled"):
                probes.generate_latents(pipeline, **RUN)
            assert gate.step_index == 0  # step 0 never ended: its pairing key is stale
            pipeline.callbacks.in_loop.remove(boom)
            gated = probes.generate_latents(pipeline, **RUN)
    finally:
        if boom in pipeline.callbacks.in_loop:
            pipeline.callbacks.in_loop.remove(boom)
    assert gate.pattern == "FSCSCF"
    fresh = probes.RecordingGate(ALTERNATE)
    with install_gate(pipeline, fresh):
        again = probes.generate_latents(pipeline, **RUN)
    assert mx.array_equal(gated, again).item()
