"""FLUX.1 adapter on random-weight shells (1 joint + 1 single block at the fixed 3072 width,
128², few steps) running mflux's real ``generate_image``. mflux calls the FLUX.1 transformer
eagerly, so vanilla and the gated re-walk share one numerical path: comparisons are bit for bit.
The shell is built once per module (about 4 s on two cores). Threshold 0 and observing against
vanilla (dev): test_adapter_parity.py, with every family's; schnell's here, on dev's blocks."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.flux.model.flux_transformer.single_transformer_block import (
    SingleTransformerBlock,
)

from app.adapters import AlreadyInstalledError, common, install_gate
from app.adapters.flux1 import shell as flux1_shell
from app.families.flux1 import Flux1Dims
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
RUN = {"num_inference_steps": 3, "height": 128, "width": 128, "guidance": 3.5}


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def dev() -> Any:
    with common.use_precision(mx.float32):
        return flux1_shell("dev")


def test_forced_skip_reuses_the_residual_over_the_concatenated_sequence(
    dev: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    single_calls = 0
    original = SingleTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal single_calls
        single_calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SingleTransformerBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == ()

    dev.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(dev, probes.LatentRecorder()) as recorder,
            install_gate(dev, gate),
        ):
            probes.generate_latents(dev, **RUN)
    finally:
        dev.vae.before_decode = None

    assert gate.pattern == "FSF" and gate.skipped == 1
    assert single_calls == 2  # the skipped step ran no body
    assert set(gate.outputs.values()) == {1}
    body_in, residual, result = gate.reused[(1, "cond")]
    out, stored_in, stored_residual = gate.stored[(0, "cond")]
    assert residual is stored_residual
    assert mx.array_equal(stored_residual, out - stored_in).item()
    # The body input is this step's embedding of its own latents: the residual is kept over
    # the image tokens the tail reads (app/adapters/step.py).
    expected_in = dev.transformer.x_embedder(recorder.inputs[1])
    assert mx.array_equal(body_in, expected_in).item()
    assert mx.array_equal(result, body_in + residual).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)


def test_install_remove_restores_exactly_and_rolls_back(dev: Any) -> None:
    before = probes.pipeline_snapshot(dev)
    installation = install_gate(dev, TeaCacheGate(OFF))
    during = probes.pipeline_snapshot(dev)
    # Only the transformer's class and the callback lists change; no parameter, no attribute.
    assert during["parameters"] == before["parameters"]
    assert during["transformer_attrs"] == before["transformer_attrs"]
    assert during["pipeline_attrs"] == before["pipeline_attrs"]
    assert during["transformer_class"] is not before["transformer_class"]
    with pytest.raises(AlreadyInstalledError):
        install_gate(dev, TeaCacheGate(OFF))
    installation.remove()
    assert probes.pipeline_snapshot(dev) == before

    class Broken:
        def register(self, callback: object) -> None:
            raise RuntimeError("registry broke")

    real_callbacks = dev.callbacks
    dev.callbacks = Broken()
    try:
        broken_before = probes.pipeline_snapshot(dev)
        with pytest.raises(RuntimeError, match="registry broke"):
            install_gate(dev, TeaCacheGate(OFF))
        assert probes.pipeline_snapshot(dev) == broken_before
    finally:
        dev.callbacks = real_callbacks
    assert probes.pipeline_snapshot(dev) == before


def test_schnell_parity(dev: Any) -> None:
    """schnell has no guidance embedder (a different TimeTextEmbed); same seam otherwise.
    Its shell borrows dev's two blocks (building another 546M parameters would double the cost)."""
    with common.use_precision(mx.float32):
        schnell = flux1_shell("schnell", dims=Flux1Dims(0, 0), seed=3)
    schnell.transformer.transformer_blocks = dev.transformer.transformer_blocks
    schnell.transformer.single_transformer_blocks = dev.transformer.single_transformer_blocks
    run = {"num_inference_steps": 2, "height": 128, "width": 128}
    vanilla = probes.generate_latents(schnell, **run)
    trace = probes.recorder()
    with install_gate(schnell, trace):
        observed = probes.generate_latents(schnell, **run)
    assert mx.array_equal(observed, vanilla).item()
    assert probes.figure(trace.events[1], "teacache", "rel_l1") is not None


def test_the_preview_projection_matches_a_numpy_derivation() -> None:
    """FLUX.1's latents are 2×2-packed tokens of 16 channels (mflux's ``unpack_latents``): the
    projection (packed, without unpacking) equals its factor table on a NumPy unpatchify, on a
    non-square image so a transposed layout shows."""
    import numpy as np

    from app.adapters import previews
    from app.families import get_family, latent_rgb

    height, width = 64, 96
    h, w = height // 16, width // 16
    packed = np.random.default_rng(3).standard_normal((1, h * w, 64)).astype(np.float32)
    latent = packed.reshape(h, w, 16, 2, 2).transpose(2, 0, 3, 1, 4).reshape(16, 2 * h, 2 * w)
    rgb = np.einsum("chw,cr->hwr", latent, np.array(latent_rgb.FLUX1_FACTORS))
    rgb = rgb + np.array(latent_rgb.FLUX1_BIAS)
    want = np.round(np.clip(rgb / 2 + 0.5, 0, 1) * 255).astype(np.uint8)
    projection = previews.family_projection(get_family("flux1"))
    got = previews.to_host(projection(mx.array(packed), height, width))
    assert got.shape == want.shape == (height // 8, width // 8, 3)
    # float32 sums in a different order: a value at a .5 boundary may round the other way
    assert int(np.abs(got.astype(int) - want.astype(int)).max()) <= 1
    assert np.mean(got == want) > 0.99
