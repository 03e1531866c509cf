"""Lens Turbo adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux calls Lens's transformer eagerly on every machine (no predict factory, no ``mx.compile``,
no CFG), so vanilla and the gated re-walk share one numerical path and compare bit for bit on
both of mflux's machine paths. mflux's loop holds its latents and text features in bfloat16
whatever the weights (the shells' float32 weights promote the stream to float32 after ``img_in``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mflux.models.lens.model.transformer.lens_transformer_block import LensTransformerBlock

from app.adapters import common, install_gate, previews
from app.adapters.lens import shell
from app.adapters.replay import record_and_replay
from app.adapters.shells import DEFAULT_PROMPT
from app.families import get_family, latent_rgb
from app.families.lens import FAMILY
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from app.gate.firstblock import FirstBlockParams
from tests.adapters.test_previews import DERIVED_ATOL, _expected, _unpatchify_2x2
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
FORCED = FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)
STEPS = 6
RUN = {"num_inference_steps": STEPS, "height": 64, "width": 64}  # 16 image tokens, 16 text
IMAGE = 16

pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Iterator[Any]:
    with common.use_precision(mx.float32):
        yield shell()


@pytest.mark.parametrize("m1_or_m2", [True, False], ids=["eager-machine", "compiling-machine"])
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(
    pipeline: Any, m1_or_m2: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mflux.utils.apple_silicon import AppleSiliconUtil

    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: m1_or_m2))
    vanilla = probes.generate_latents(pipeline, **RUN)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        zero = probes.generate_latents(pipeline, **RUN)
    trace = probes.recorder(calibrating=True)
    with install_gate(pipeline, trace):
        observed = probes.generate_latents(pipeline, **RUN)
    assert mx.array_equal(zero, vanilla).item()
    assert mx.array_equal(observed, vanilla).item()
    assert off.pattern == "C" * STEPS and off.signals == [] and off.stored == {}
    assert trace.skipped == 0 and len(trace.events) == STEPS
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "teacache", "output_rel_l1") is not None
        for e in trace.events[1:]
    )


def test_forced_skips_reuse_the_image_streams_residual(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A skipped step adds the last computed step's image-stream residual to this step's
    ``img_in`` tokens and runs the tail only (``norm_out``, ``proj_out``): no block runs."""
    blocks = 0
    original = LensTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal blocks
        blocks += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LensTransformerBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)
    sink: list[mx.array] = []

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    pipeline.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(pipeline, probes.LatentRecorder()) as recorder,
            install_gate(pipeline, gate),
        ):
            undo = record_and_replay(pipeline, sink, None)
            try:
                gated = probes.generate_latents(pipeline, **RUN)
            finally:
                undo()
    finally:
        pipeline.vae.before_decode = None
    tr = pipeline.transformer
    assert blocks == 4 * len(tr.transformer_blocks)  # four computed steps
    vanilla = probes.generate_latents(pipeline, **RUN)

    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    assert {branch for _, branch in gate.stored} == {common.COND}  # no CFG: one residual
    sigmas = FAMILY.require_preview().loop_sigmas
    assert sigmas is not None
    for step in (1, 3):
        body_in, residual, result = gate.reused[(step, common.COND)]
        out, stored_in, stored_residual = gate.stored[(step - 1, common.COND)]
        assert residual is stored_residual
        assert mx.array_equal(stored_residual, out - stored_in).item()
        assert mx.array_equal(body_in, tr.img_in(recorder.inputs[step])).item()
        assert mx.array_equal(result, body_in + residual).item()
        timestep = mx.array([sigmas(recorder.config)[step].item()])
        temb = tr.time_text_embed(timestep, result.dtype)
        assert mx.array_equal(sink[step], tr.proj_out(tr.norm_out(result, temb))).item()


def test_the_first_block_probe_reads_the_image_stream(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = pipeline.transformer.transformer_blocks[0]
    calls: list[tuple[mx.array, mx.array]] = []  # block 0's image stream (in, out), per step
    original = LensTransformerBlock.__call__

    def spying(self: Any, *args: Any, **kwargs: Any) -> Any:
        txt, img = original(self, *args, **kwargs)
        if self is first:
            calls.append((kwargs["hidden_states"], img))
        return txt, img

    monkeypatch.setattr(LensTransformerBlock, "__call__", spying)
    probe = probes.RecordingProbe(FORCED)
    with install_gate(pipeline, probe):
        probes.generate_latents(pipeline, **RUN)
    assert probe.pattern == "FSCSCF" and probe.skipped == 2
    assert len(calls) == STEPS
    for step, (x, out) in enumerate(calls):
        assert mx.array_equal(probe.signals[step], out - x).item()
    for step in (1, 3):
        base, reused, result = probe.reused[(step, common.COND)]
        assert reused is probe.stored[(step - 1, common.COND)][2]
        assert mx.array_equal(base, calls[step][1]).item()
        assert mx.array_equal(result, base + reused).item()


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    call = {
        "hidden_states": mx.random.normal((1, IMAGE, 128), key=mx.random.key(3)),
        "encoder_layers": pipeline.text_encoder.encode(DEFAULT_PROMPT),
        "timestep": mx.array([0.6]),
        "latent_height": 4,
        "latent_width": 4,
    }
    plain = pipeline.transformer(**call)
    with install_gate(pipeline, gate):
        gated = pipeline.transformer(**call)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()


def test_previews_read_each_steps_clean_prediction_off_the_loops_own_sigmas(
    pipeline: Any,
) -> None:
    """mflux's Lens loop steps ``x + (σ_next − σ)·v`` on its own sigmas, outside
    ``config.scheduler``: every preview's clean latents follow from two consecutive latents."""
    cleans: dict[int, np.ndarray] = {}
    images: dict[int, np.ndarray] = {}
    previewer = previews.previewer_for(pipeline, images.__setitem__)
    assert previewer.loop_sigmas is FAMILY.require_preview().loop_sigmas
    projection = previewer.decode

    def decode(x0: mx.array, height: int, width: int) -> np.ndarray | mx.array:
        cleans[len(cleans)] = np.array(x0.astype(mx.float32))
        return projection(x0, height, width)

    previewer.decode = decode
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        common.attached(pipeline, previewer),
    ):
        probes.generate_latents(pipeline, **RUN)
    assert sorted(images) == list(range(STEPS))
    assert previewer.loop_sigmas is not None
    sig = np.array(previewer.loop_sigmas(recorder.config))
    # mflux's own schedule: the config's shift at this sequence length, ending at 0
    owner = pipeline._turbo_sigmas(IMAGE, STEPS)
    np.testing.assert_allclose(sig, np.array(owner, dtype=np.float32), rtol=0, atol=0)
    lat = [np.array(x.astype(mx.float32)) for x in recorder.inputs]  # before each step, and last
    assert len(lat) == STEPS + 1
    for t in range(STEPS):
        velocity = (lat[t + 1] - lat[t]) / (sig[t + 1] - sig[t])
        # Step 0's latents are bfloat16 (mflux's loop draws them so) and the previewer works in
        # the latents' dtype: its σ gap rounds to bfloat16's 8 bits (2⁻⁹ relative), which moved
        # the clean latents by at most 3.1e-3 here; from step 1 on they are float32.
        atol = 1e-2 if t == 0 else DERIVED_ATOL
        np.testing.assert_allclose(cleans[t], lat[t] - sig[t] * velocity, atol=atol)
    assert images[0].shape == (64 // 8, 64 // 8, 3)  # FLUX.2's latents, unpatchified


def test_the_projection_is_flux2s_on_the_packed_tokens() -> None:
    """Lens's loop holds FLUX.2's packed tokens (mflux reshapes them to (1, 128, H/16, W/16) and
    decodes with ``Flux2VAE.decode_packed_latents``, its VAE FLUX.2 Klein 4B's own repo's)."""
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.lens.variants.txt2img import lens_image

    assert lens_image.Flux2VAE is Flux2VAE
    assert lens_image.VAE_REPO == "black-forest-labs/FLUX.2-klein-4B"
    height, width = 64, 96
    h, w = height // 16, width // 16
    packed = np.random.default_rng(5).standard_normal((1, h * w, 128)).astype(np.float32)
    latent = _unpatchify_2x2(packed, h, w, 32)
    got = previews.to_host(
        previews.family_projection(get_family("lens"))(mx.array(packed), height, width)
    )
    want = _expected(latent, latent_rgb.FLUX2_FACTORS, latent_rgb.FLUX2_BIAS)
    assert got.shape == want.shape == (height // 8, width // 8, 3)
    assert int(np.abs(got.astype(int) - want.astype(int)).max()) <= 1
    assert np.mean(got == want) > 0.99


def _snapshot(pipeline: Any) -> dict[str, Any]:
    """What an installation may touch, by identity (tests/fakes/probes.py's snapshot reads the
    pipeline as an ``nn.Module``; ``LensImage`` is a plain class): the classes, the pipeline's and
    the transformer's attributes, the transformer's parameter tree, the callback lists."""
    from mlx.utils import tree_flatten

    transformer = pipeline.transformer
    return {
        "pipeline_class": type(pipeline),
        "pipeline_attrs": {k: id(v) for k, v in vars(pipeline).items()},
        "transformer_class": type(transformer),
        "transformer_attrs": {k: id(v) for k, v in vars(transformer).items()},
        "parameters": {k: id(v) for k, v in tree_flatten(transformer.parameters())},
        "callbacks": {
            name: [id(entry) for entry in getattr(pipeline.callbacks, name)]
            for name in ("before_loop", "in_loop", "after_loop", "interrupt")
        },
    }


def test_install_then_remove_restores_the_pipeline_exactly(pipeline: Any) -> None:
    from app.adapters import AlreadyInstalledError, detect_family

    assert detect_family(pipeline) is FAMILY
    before = _snapshot(pipeline)
    with install_gate(pipeline, TeaCacheGate(ALTERNATE)) as installation:
        during = _snapshot(pipeline)
        assert during["parameters"] == before["parameters"]
        assert during["transformer_class"] is not before["transformer_class"]
        with pytest.raises(AlreadyInstalledError):
            install_gate(pipeline, TeaCacheGate(ALTERNATE))
        probes.generate_latents(pipeline, num_inference_steps=3, height=64, width=64)
        assert installation.family == "lens"
    assert _snapshot(pipeline) == before
