"""ERNIE-Image adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux compiles ERNIE-Image's predict except on base/Pro M1/M2; both paths are checked. With CFG
mflux runs one transformer call of batch 2 (``[negative, prompt]``); the anatomy keeps the batch,
so a step is one branch of the gated step and each CFG branch's residual is its own row of the
batch's (app/adapters/ernie_image.py). On the eager path (``is_m1_or_m2`` patched True) vanilla
and the gated re-walk share one numerical path; on the compiled path the split-compiled step
traced bit-identical to mflux's one compiled predict on these float32 shells (seeds 0–2, Turbo
and CFG: max |Δ| 0), so both compare bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.ernie_image.model.ernie_transformer.timestep_embedder import (
    get_timestep_embedding,
)
from mflux.models.ernie_image.model.ernie_transformer.transformer_block import (
    ErnieTransformerBlock,
)
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate, lora
from app.adapters.ernie_image import STREAM_DTYPE_ATTR, ErnieAnatomy, shell
from app.adapters.replay import record_and_replay
from app.adapters.shells import DEFAULT_PROMPT
from app.families.ernie_image import ErnieDims
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from app.gate.firstblock import FirstBlockParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
FORCED = FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)
STEPS = 6
# 64² pixels: a 4 × 4 latent grid (16 image tokens) beside 16 caption tokens
TURBO = {"num_inference_steps": STEPS, "height": 64, "width": 64}
CFG = {**TURBO, "guidance": 4.0}
RUNS = {"turbo": ("ernie-image-turbo", TURBO), "cfg": ("ernie-image", CFG)}


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def shells() -> Iterator[dict[str, Any]]:
    with common.use_precision(mx.float32):
        built = {run: shell(model_name) for run, (model_name, _) in RUNS.items()}
    yield built
    built.clear()


def _use_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: path == "eager"))


@pytest.mark.parametrize("path", ["eager", "compiled"])
@pytest.mark.parametrize("run", list(RUNS))
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(
    shells: dict[str, Any], run: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_path(monkeypatch, path)
    pipeline, kwargs = shells[run], RUNS[run][1]
    vanilla = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        zero = probes.generate_latents(pipeline, **kwargs)
    trace = probes.recorder(calibrating=True)
    with install_gate(pipeline, trace):
        observed = probes.generate_latents(pipeline, **kwargs)
    assert mx.array_equal(zero, vanilla).item()
    assert mx.array_equal(observed, vanilla).item()
    assert off.pattern == "C" * STEPS and off.signals == [] and off.stored == {}
    assert trace.skipped == 0 and len(trace.events) == STEPS
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "teacache", "output_rel_l1") is not None
        for e in trace.events[1:]
    )


def _embedded(pipeline: Any, latents: mx.array, batch: int) -> mx.array:
    """mflux's image tokens of ``latents`` repeated for the batch (written out here)."""
    batched = mx.concatenate([latents] * batch, axis=0)
    return pipeline.transformer.x_embedder(batched.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("path", ["eager", "compiled"])
def test_forced_skips_reuse_each_branchs_own_residual(
    shells: dict[str, Any], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CFG the one residual is the batch's: row 0 the negative caption's, row 1 the
    prompt's, each stored by the branch's own computed step and added to that branch's own
    image stream."""
    _use_path(monkeypatch, path)
    pipeline = shells["cfg"]
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

    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))
    assert set(gate.outputs.values()) == {1}
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    if path == "compiled":
        # The compiled step keeps and adds the residual inside its compiled parts (the gate sees
        # no ends to record); its parity with the eager step is the observing pass's above.
        return
    assert {branch for _, branch in gate.stored} == {common.COND}  # one call, one residual
    for step in (1, 3):
        body_in, residual, result = gate.reused[(step, common.COND)]
        out, stored_in, stored_residual = gate.stored[(step - 1, common.COND)]
        assert residual is stored_residual
        assert mx.array_equal(stored_residual, out - stored_in).item()
        assert residual.shape[0] == 2  # [negative, prompt]
        assert not mx.array_equal(residual[0], residual[1]).item()  # each row its branch's
        assert mx.array_equal(body_in, _embedded(pipeline, recorder.inputs[step], 2)).item()
        assert mx.array_equal(result, body_in + residual).item()


def test_a_skipped_step_predicts_the_tail_of_input_plus_residual(
    shells: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turbo (no CFG): the velocity on a skipped step is the tail of ``x + r`` computed here
    independently of the adapter (``final_norm`` modulated by ``c``, ``final_linear``, the
    patch-1 unpatchify); nothing runs a block."""
    _use_path(monkeypatch, "eager")
    pipeline = shells["turbo"]
    blocks = 0
    original = ErnieTransformerBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal blocks
        blocks += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ErnieTransformerBlock, "__call__", counting)
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
    tr = pipeline.transformer
    assert blocks == 4 * len(tr.layers)  # four computed steps, one call each
    sigmas = recorder.config.scheduler.sigmas
    for step in (1, 3):
        _, _, result = gate.reused[(step, common.COND)]
        timestep = sigmas[step].reshape((1,)) * 1000
        c = tr.time_embedding(get_timestep_embedding(timestep, tr.hidden_size))
        latents = recorder.inputs[step]
        patches = tr.final_linear(tr.final_norm(result, c).astype(latents.dtype))
        _, channels, height, width = latents.shape
        image = patches.reshape(1, height, width, channels).transpose(0, 3, 1, 2)
        assert mx.array_equal(sink[step], image).item()


@pytest.mark.parametrize("run", list(RUNS))
def test_the_first_block_probe_reads_the_prompts_row(
    shells: dict[str, Any], run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe decides on block 0's residual over the prompt's image tokens (the CFG batch's
    second row, the image tokens first in mflux's ``[image, text]`` stream); a forced pattern
    skips where the guards allow, and each skip adds the batch's residual to this step's block-0
    output, the signal's base."""
    _use_path(monkeypatch, "eager")
    pipeline, kwargs = shells[run], RUNS[run][1]
    first = pipeline.transformer.layers[0]
    calls: list[tuple[mx.array, mx.array]] = []  # block 0's (input, output), one per step
    original = ErnieTransformerBlock.__call__

    def spying(self: Any, x: mx.array, *args: Any) -> Any:
        out = original(self, x, *args)
        if self is first:
            calls.append((x, out))
        return out

    monkeypatch.setattr(ErnieTransformerBlock, "__call__", spying)
    probe = probes.RecordingProbe(FORCED)
    with install_gate(pipeline, probe):
        probes.generate_latents(pipeline, **kwargs)
    assert probe.pattern == "FSCSCF" and probe.skipped == 2
    assert len(calls) == STEPS
    image = 16  # 4 × 4 latent pixels
    batch = 2 if run == "cfg" else 1
    for step, (x, out) in enumerate(calls):
        assert x.shape[0] == batch
        expected = out[-1:, :image] - x[-1:, :image]
        assert mx.array_equal(probe.signals[step], expected).item()
    for step in (1, 3):
        base, reused, result = probe.reused[(step, common.COND)]
        assert reused is probe.stored[(step - 1, common.COND)][2]
        assert reused.shape[0] == batch
        assert mx.array_equal(base, calls[step][1][:, :image]).item()
        assert mx.array_equal(result, base + reused).item()


def _factory_args(pipeline: Any, latents: mx.array, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    text_bth, text_lens = pipeline._encode_prompts(
        prompt=DEFAULT_PROMPT, negative_prompt=None, guidance=kwargs.get("guidance", 1.0)
    )
    return text_bth, text_lens, latents


def test_the_compiled_step_is_traced_once_per_generation(
    shells: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_path(monkeypatch, "compiled")
    pipeline = shells["cfg"]
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate):
        state = pipeline._predict.teacache_state
        probes.generate_latents(pipeline, **CFG)
        first = dict(state.traces)
        probes.generate_latents(pipeline, **CFG)
    once = {"prelude": 1, "measure": 1, "body": 1, "tail": 1}
    assert first == once
    assert dict(state.traces) == {name: 2 * count for name, count in once.items()}


def test_calls_outside_a_generation_are_not_gated(shells: dict[str, Any]) -> None:
    pipeline = shells["cfg"]
    gate = TeaCacheGate(ALTERNATE)
    latents = mx.random.normal((1, 128, 4, 4), key=mx.random.key(3))
    text_bth, text_lens, _ = _factory_args(pipeline, latents, CFG)
    call = {"latents": latents, "sigma": mx.array([0.6]), "text_bth": text_bth}
    call |= {"text_lens": text_lens, "guidance": 4.0}
    with install_gate(pipeline, gate):
        gated = pipeline._predict(pipeline.transformer, text_bth, text_lens, latents)(**call)
    plain = pipeline._predict(pipeline.transformer, text_bth, text_lens, latents)(**call)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()


def test_the_residual_stream_is_float32_unless_the_bfloat16_stream_is_chosen() -> None:
    """mflux's numerics (the default): bf16 weights, yet block 0 leaves the stream float32 (the
    float32 time embedding's modulation promotes it). The opt-in keeps it in the weights' dtype;
    its distance from mflux's output is lab/bench/ernie_stream.py's to measure."""
    dims = ErnieDims(64, 2, 1, 128, (8, 12, 12))
    with common.use_precision(mx.bfloat16):
        pipeline = shell("ernie-image-turbo", dims=dims, dtype=mx.bfloat16)
        latents = mx.random.normal((1, 128, 2, 2), key=mx.random.key(0)).astype(mx.bfloat16)
        args = _factory_args(pipeline, latents, TURBO)
        text = args[:2]
        dtypes = []
        for stream_dtype in (None, mx.bfloat16):
            setattr(pipeline.transformer, STREAM_DTYPE_ATTR, stream_dtype)
            anatomy = ErnieAnatomy(pipeline.transformer, *args)
            head = anatomy.embed(latents, mx.array([0.5]), text)
            ctx = anatomy.context(head, text)
            state = anatomy.blocks(ctx, anatomy.stream(head, ctx), 0, 1)
            dtypes.append(state.dtype)
            assert anatomy.tail(head, anatomy.tokens(ctx, state), text).dtype == mx.bfloat16
    assert dtypes == [mx.float32, mx.bfloat16]


# A LoRA in the names mflux's ERNIE mapping accepts (PEFT's ``transformer.``, ComfyUI's
# ``diffusion_model.`` and the bare module path), on both blocks' attention and MLP.
LORA_TARGETS = {
    "transformer.layers.0.self_attention.to_q": "layers.0.self_attention.to_q",
    "diffusion_model.layers.1.mlp.linear_fc2": "layers.1.mlp.linear_fc2",
    "layers.1.self_attention.to_out.0": "layers.1.self_attention.to_out.0",
}


def test_a_lora_is_baked_where_mfluxs_mapping_puts_it_and_changes_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As tests/adapters/test_lora.py holds the other families (its bounds: the bake to 1e-6,
    the effect above 0.007 of the final latents; measured here 6.0e-8 and 0.19)."""
    from tests.fakes import lora as fake_lora

    _use_path(monkeypatch, "eager")
    with common.use_precision(mx.float32):
        plain = probes.generate_latents(shell("ernie-image"), **CFG)
        patched = shell("ernie-image")
        before = {
            p: fake_lora.module_at(patched.transformer, p).weight for p in LORA_TARGETS.values()
        }
        updates = fake_lora.write_lora(
            tmp_path / "style.safetensors", patched.transformer, LORA_TARGETS
        )
        lora.apply_loras(patched, [str(tmp_path / "style.safetensors")], [0.7])
        for module_path, update in updates.items():
            weight = fake_lora.module_at(patched.transformer, module_path).weight
            assert float(mx.max(mx.abs(weight - before[module_path] - 0.7 * update))) <= 1e-6
        changed = probes.generate_latents(patched, **CFG)
    assert float(mx.max(mx.abs(changed - plain))) > 0.007


def test_previews_read_the_schedulers_clean_prediction_in_flux2s_latent_space(
    shells: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mflux's ERNIE loop steps ``config.scheduler`` (the previewer reads each step's ``x − σ·v``
    there) on FLUX.2's latents laid out spatially: 2×2 patches of its 32 channels, channel
    ``c·4 + dy·2 + dx``, decoded by ``Flux2VAE.decode_packed_latents`` whose weights ERNIE maps as
    FLUX.2's. The projection is FLUX.2's table on the unpatchified latent."""
    import numpy as np
    from mflux.models.ernie_image.variants.txt2img.ernie_image import ErnieImage
    from mflux.models.ernie_image.weights.ernie_weight_mapping import ErnieWeightMapping
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.flux2.weights.flux2_weight_mapping import Flux2WeightMapping

    from app.adapters import previews
    from app.families import latent_rgb
    from app.families.ernie_image import FAMILY
    from tests.adapters.test_previews import DERIVED_ATOL, _expected

    assert ErnieImage.__annotations__["vae"] is Flux2VAE
    ernie = [t.to_pattern for t in ErnieWeightMapping.get_vae_mapping()]
    assert ernie == [t.to_pattern for t in Flux2WeightMapping.get_vae_mapping()]
    assert FAMILY.require_preview().loop_sigmas is None

    _use_path(monkeypatch, "eager")
    pipeline = shells["turbo"]
    cleans: dict[int, np.ndarray] = {}
    images: dict[int, np.ndarray] = {}
    previewer = previews.previewer_for(pipeline, images.__setitem__)
    projection = previewer.decode

    def decode(x0: mx.array, height: int, width: int) -> np.ndarray | mx.array:
        cleans[len(cleans)] = np.array(x0)
        return projection(x0, height, width)

    previewer.decode = decode
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        common.attached(pipeline, previewer),
    ):
        final = probes.generate_latents(pipeline, **TURBO)
    assert sorted(images) == list(range(STEPS))
    sig = np.array(recorder.config.scheduler.sigmas)
    lat = [np.array(x) for x in recorder.inputs]
    for t in range(STEPS):
        velocity = (lat[t + 1] - lat[t]) / (sig[t + 1] - sig[t])
        np.testing.assert_allclose(cleans[t], lat[t] - sig[t] * velocity, atol=DERIVED_ATOL)
    assert np.array_equal(cleans[STEPS - 1], np.array(final))  # σ = 0 at the last step

    height, width = 64, 96
    h, w = height // 16, width // 16
    packed = np.random.default_rng(7).standard_normal((1, 128, h, w)).astype(np.float32)
    latent = packed[0].reshape(32, 2, 2, h, w).transpose(0, 3, 1, 4, 2).reshape(32, 2 * h, 2 * w)
    got = previews.to_host(previews.family_projection(FAMILY)(mx.array(packed), height, width))
    want = _expected(latent, latent_rgb.FLUX2_FACTORS, latent_rgb.FLUX2_BIAS)
    assert got.shape == want.shape == (height // 8, width // 8, 3)
    assert int(np.abs(got.astype(int) - want.astype(int)).max()) <= 1
    assert np.mean(got == want) > 0.99
