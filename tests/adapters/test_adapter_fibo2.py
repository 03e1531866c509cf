"""FIBO 2 on a tiny random-weight shell of mflux's own classes running mflux's real
``generate_image`` (128 wide, 3 blocks, the real two noise refiners and two-layer perceiver).

mflux runs FIBO 2 eagerly, calling the transformer once for the caption and, with CFG, once for
the negative caption: vanilla and the gated re-walk share one numerical path and compare bit for
bit. The shell's negative caption is long enough to get more gist tokens than the prompt (320
against 256), so the two branches' streams differ in length, as a long JSON caption's would.

Until the family kit's generic tests take ``RandomWeights.cases``, the cases are listed here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.fibo2.model.fibo2_transformer.fibo2_perceiver import Fibo2Perceiver
from mflux.models.fibo2.model.fibo2_transformer.fibo2_transformer_block import (
    Fibo2TransformerBlock,
)

from app.adapters import common, install_gate, lora
from app.adapters.common import COND, UNCOND
from app.adapters.fibo2 import Fibo2Anatomy, shell
from app.adapters.previews import family_projection
from app.families import get_family
from app.families.fibo2 import FIBO2_FULL, FIBO2_TINY
from app.gate import Decision, TeaCacheParams
from tests.fakes import lora as fake_lora
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
STEPS = 5
SIZE = {"num_inference_steps": STEPS, "height": 128, "width": 128}
CASES = {"fibo2-cfg": 5.0, "fibo2-no-cfg": 1.0}  # mflux's default guidance 5, and none

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return shell("fibo2")


@pytest.mark.parametrize("case", list(CASES))
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(pipeline: Any, case: str) -> None:
    kwargs = {**SIZE, "guidance": CASES[case]}
    vanilla = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        gated = probes.generate_latents(pipeline, **kwargs)
    trace = probes.recorder(calibrating=True)
    with install_gate(pipeline, trace):
        observed = probes.generate_latents(pipeline, **kwargs)

    assert mx.array_equal(gated, vanilla).item()
    assert mx.array_equal(observed, vanilla).item()
    assert off.pattern == "C" * STEPS and off.signals == [] and off.stored == {}
    assert trace.skipped == 0 and len(trace.events) == STEPS
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "teacache", "output_rel_l1") is not None
        for e in trace.events[1:]
    )


def _counting(module: Any, calls: list[int]) -> Callable[[], None]:
    """Swap ``module``'s class for a subclass that counts its calls; returns the undo."""
    original = type(module)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original.__call__(self, *args, **kwargs)

    module.__class__ = type(original.__name__, (original,), {"__call__": call})

    def undo() -> None:
        module.__class__ = original

    return undo


def test_forced_skips_reuse_each_branchs_own_residual(pipeline: Any) -> None:
    kwargs = {**SIZE, "guidance": 5.0}
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)
    refiner_calls: list[int] = []
    perceiver_calls: list[int] = []
    undo = [
        _counting(pipeline.transformer.noise_refiner[0], refiner_calls),
        _counting(pipeline.transformer.perceiver, perceiver_calls),
    ]
    try:
        with install_gate(pipeline, gate):
            forced = probes.generate_latents(pipeline, **kwargs)
    finally:
        for step in undo:
            step()
    vanilla = probes.generate_latents(pipeline, **kwargs)

    assert gate.pattern == "FSCSF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(forced, vanilla).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    # Each branch keeps its own residual over the image tokens (8 × 8 at 128²).
    assert {branch for _, branch in gate.stored} == {COND, UNCOND}
    for step in (0, 2):  # the computed steps that store (the last has none to serve)
        cond, uncond = gate.stored[(step, COND)][2], gate.stored[(step, UNCOND)][2]
        assert cond.shape == uncond.shape == (1, 64, 128)
        assert not mx.array_equal(cond, uncond).item()
    for event in gate.events:
        if event.decision is not Decision.skipped:
            continue
        for branch in (COND, UNCOND):
            previous = max(i for i, b in gate.stored if b == branch and i < event.index)
            residual = gate.stored[(previous, branch)][2]
            base, reused, result = gate.reused[(event.index, branch)]
            assert reused is residual
            assert mx.array_equal(result, base + residual).item()
    # What no step reads is built once: the refiners once a step for both branches (mflux: once
    # a branch), the perceiver once a caption for the generation (mflux: once a call).
    assert len(refiner_calls) == STEPS
    assert len(perceiver_calls) == 2


def test_the_two_branches_streams_differ_in_length_as_their_captions_do(pipeline: Any) -> None:
    """The prompt's 16 tokens get 256 gist tokens, the negative caption's 400 get 320: each
    branch's tail reads its own image tokens after its own gist tokens."""
    from mflux.models.fibo2.model.fibo2_text_encoder.prompt_encoder import Fibo2PromptEncoder

    perceiver = pipeline.transformer.perceiver
    prompt = pipeline.prompt_cache[probes.DEFAULT_PROMPT]
    negative = pipeline.prompt_cache[Fibo2PromptEncoder.TEXT_TO_IMAGE_NEGATIVE]
    assert perceiver.gist_count(prompt.shape[2]) == 256
    assert perceiver.gist_count(negative.shape[2]) == 320
    anatomy = Fibo2Anatomy(pipeline.transformer)
    latents = mx.random.normal((1, 32, 16, 16), key=mx.random.key(1))
    sigma = mx.array([0.7])
    for embeds in (prompt, negative):
        call = anatomy.branch_call(latents, sigma, embeds)
        assert call is not None
        theirs = type(pipeline.transformer).__call__(pipeline.transformer, latents, sigma, embeds)
        ours = anatomy.forward(call.latents, call.timestep, call.cond)
        assert ours.shape == latents.shape and mx.array_equal(ours, theirs).item()
    edit = anatomy.branch_call(latents, sigma, prompt, context_latents=[latents])
    assert edit is None  # FIBO 2 Edit's images (#41): mflux's own forward


def test_the_loops_latents_are_the_flux2_previews_space(pipeline: Any) -> None:
    """FIBO 2 decodes its loop latents as FLUX.2's packed ones after a 2×2 patchify, which
    FLUX.2's unpatchify (its preview's reshape) undoes exactly."""
    from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    latents = mx.random.normal((1, 32, 16, 16), key=mx.random.key(2))
    packed = Flux2LatentCreator.patchify_latents(latents)
    assert mx.array_equal(Flux2VAE._unpatchify_latents(packed), latents).item()
    family = get_family("fibo2")
    assert family.require_preview().factors is get_family("flux2").require_preview().factors
    thumbnail = family_projection(family)(latents, 128, 128)
    assert thumbnail.shape == (16, 16, 3) and thumbnail.dtype == mx.uint8


# Fibo2LoRAMapping's own names: diffusers' (transformer.), ComfyUI's (diffusion_model.) and the
# timestep MLP's renamed one (t_embedder.mlp.0 → linear1)
TARGETS = {
    "transformer.layers.0.attention.to_q": "layers.0.attention.to_q",
    "diffusion_model.layers.1.cross_attention.to_k": "layers.1.cross_attention.to_k",
    "perceiver.layers.0.ffn.w1": "perceiver.layers.0.ffn.w1",
    "t_embedder.mlp.0": "t_embedder.linear1",
}
# Max |Δ| of the final latents (values of order 1) the LoRA must cause at least (scale 0.7, 4
# steps, CFG): measured 1.89 on this shell; the floor is under a tenth of it and far above 0 (a
# build without the LoRA differs by exactly 0, asserted).
LORA_EFFECT_FLOOR = 0.1


def test_a_lora_in_mfluxs_fibo2_names_is_baked_and_changes_the_output(tmp_path: Path) -> None:
    run = {**SIZE, "num_inference_steps": 4, "guidance": 5.0}
    with common.use_precision(mx.float32):
        plain = probes.generate_latents(shell("fibo2"), **run)
        assert mx.array_equal(plain, probes.generate_latents(shell("fibo2"), **run)).item()
        patched = shell("fibo2")
        before = {
            p: mx.array(fake_lora.module_at(patched.transformer, p).weight)
            for p in TARGETS.values()
        }
        updates = fake_lora.write_lora(tmp_path / "style.safetensors", patched.transformer, TARGETS)
        lora.apply_loras(patched, [str(tmp_path / "style.safetensors")], [0.7])
        for path, update in updates.items():
            weight = fake_lora.module_at(patched.transformer, path).weight
            assert float(mx.max(mx.abs(weight - before[path] - 0.7 * update))) <= 1e-6, path
        with_lora = probes.generate_latents(patched, **run)
    assert float(mx.max(mx.abs(with_lora - plain))) > LORA_EFFECT_FLOOR


def test_the_shells_dimensions_are_mfluxs() -> None:
    from mflux.models.fibo2.model.fibo2_transformer.fibo2_transformer import Fibo2Transformer

    defaults = {
        n: p.default for n, p in inspect.signature(Fibo2Transformer.__init__).parameters.items()
    }
    assert {k: defaults[k] for k in FIBO2_FULL.kwargs()} == FIBO2_FULL.kwargs()
    assert ModelConfig.from_name(model_name="fibo2").transformer_overrides == {}
    # the perceiver keeps 256 gist tokens at least: the tiny shell's queries cover them
    assert inspect.signature(Fibo2Perceiver.__init__).parameters["min_gist"].default == 256
    assert FIBO2_TINY.max_num_gist_tokens >= 256
    assert FIBO2_TINY.dim // FIBO2_TINY.n_heads == sum(FIBO2_TINY.axes_dims)
    assert Fibo2TransformerBlock.ffn_hidden_dim(FIBO2_TINY.dim) > 0
