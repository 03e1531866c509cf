"""Z-Image adapter on tiny random-weight shells running mflux's real ``generate_image``.

Vanilla is mflux's eager predict here (``is_m1_or_m2`` patched True): one numerical path, so
comparisons are bit for bit. The compiled path: tests/test_adapter_compiled.py; threshold 0 and
observing against vanilla (base with CFG, Turbo) in test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.z_image.model.z_image_transformer.transformer_block import (
    ZImageTransformerBlock,
)

from app.adapters import common, install_gate, shells, z_image
from app.gate import Decision, TeaCacheParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
CFG = {"num_inference_steps": 6, "height": 128, "width": 128, "guidance": 4.0}


pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def base() -> Any:
    with common.use_precision(mx.float32):
        return shells.z_image_shell("z-image")


def test_forced_skips_reuse_each_branchs_own_residual(
    base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer_calls = 0
    original = ZImageTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal layer_calls
        layer_calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ZImageTransformerBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == ()

    base.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(base, probes.LatentRecorder()) as recorder,
            install_gate(base, gate),
        ):
            gated = probes.generate_latents(base, **CFG)
    finally:
        base.vae.before_decode = None
    calls = layer_calls
    vanilla = probes.generate_latents(base, **CFG)

    assert gate.pattern == "FSCSCF" and gate.skipped == 2
    assert not mx.array_equal(gated, vanilla).item()
    tr = base.transformer
    # The noise refiner uses ZImageTransformerBlock too (the context refiner another class).
    refiners = len(tr.noise_refiner)
    computed = sum(e.decision.computes for e in gate.events)
    skipped = gate.skipped
    # Computed steps: refiners for both branches + all main layers for both branches.
    # Skipped steps: refiners for both branches + layer 0 once (the signal) and nothing else.
    expected = computed * (2 * refiners + 2 * len(tr.layers)) + skipped * (2 * refiners + 1)
    assert calls == expected
    assert set(gate.outputs.values()) == {1}

    for event in gate.events:
        if event.decision is not Decision.skipped:
            continue
        step = event.index
        t_emb = z_image._time_embedding(tr, mx.ones((1,)) - _sigma(base, step), mx.zeros((1,)))
        for branch, prompt in (("cond", shells.DEFAULT_PROMPT), ("uncond", " ")):
            body_in, residual, result = gate.reused[(step, branch)]
            source = max(s for (s, b) in gate.stored if b == branch and s < step)
            out, stored_in, stored_residual = gate.stored[(source, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            cap = base._encode_prompts.table[prompt]
            expected_in = z_image._stream(tr, recorder.inputs[step], t_emb, cap).unified
            assert mx.array_equal(body_in, expected_in).item()
            assert mx.array_equal(result, body_in + residual).item()
        assert not mx.array_equal(
            gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        ).item()


def _sigma(pipeline: Any, step: int) -> mx.array:
    from mflux.models.common.config.config import Config

    config = Config(
        model_config=pipeline.model_config,
        num_inference_steps=CFG["num_inference_steps"],
        height=CFG["height"],
        width=CFG["width"],
        guidance=CFG["guidance"],
        scheduler="flow_match_euler_discrete",
    )
    return config.scheduler.sigmas[step].reshape((1,))
