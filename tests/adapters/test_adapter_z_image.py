"""Z-Image adapter on tiny random-weight shells running mflux's real ``generate_image``.

Vanilla is mflux's eager predict here (``is_m1_or_m2`` patched True): one numerical path, so
comparisons are bit for bit. The compiled path: tests/test_adapter_compiled.py; threshold 0 and
observing against vanilla (base with CFG, Turbo) in test_adapter_parity.py, with every family's.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mflux.models.z_image.model.z_image_transformer.context_block import ZImageContextBlock
from mflux.models.z_image.model.z_image_transformer.transformer import ZImageTransformer
from mflux.models.z_image.model.z_image_transformer.transformer_block import (
    ZImageTransformerBlock,
)

from app.adapters import common, install_gate, shells, z_image
from app.adapters.z_image import shell as z_image_shell
from app.gate import Decision, TeaCacheParams
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
CFG = {"num_inference_steps": 6, "height": 128, "width": 128, "guidance": 4.0}


pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


# The prompt's caption length: 16 tokens pads to 32 like the negative prompt's (16), so both
# branches' image tokens sit at the same positions and share the noise refiner; 40 pads to 64.
CAPTIONS = {"captions-pad-alike": 16, "captions-pad-apart": 40}


@pytest.fixture(scope="module", params=list(CAPTIONS))
def base(request: pytest.FixtureRequest) -> Any:
    with common.use_precision(mx.float32):
        pipeline = z_image_shell("z-image")
    tokens = CAPTIONS[request.param]
    if tokens != 16:
        dim = pipeline.transformer.cap_embedder[0].weight.shape[0]
        feats = mx.random.normal((tokens, dim), key=mx.random.key(7))
        pipeline._encode_prompts.table[shells.DEFAULT_PROMPT] = feats
    return pipeline


def _mflux_stream(tr: Any, x: mx.array, t_emb: mx.array, cap_feats: mx.array) -> mx.array:
    """``unified`` as mflux's ZImageTransformer.__call__ computes it on every step (verbatim up to
    the main layers): the oracle of the adapter's once-per-generation caption."""
    key = f"{tr.patch_size}-{tr.f_patch_size}"
    x_emb, cap_emb, _, x_pos_ids, cap_pos_ids, x_pad_mask, cap_pad_mask = (
        ZImageTransformer._patchify(
            image=x, cap_feats=cap_feats, patch_size=tr.patch_size, f_patch_size=tr.f_patch_size
        )
    )
    x_emb = tr.all_x_embedder[key](x_emb)
    x_emb = mx.where(x_pad_mask[:, None], tr.x_pad_token, x_emb)
    x_freqs_cis = tr.rope_embedder(x_pos_ids)
    x_attn_mask = mx.ones((1, x_emb.shape[0]), dtype=mx.bool_)
    x_emb = mx.expand_dims(x_emb, axis=0)
    for layer in tr.noise_refiner:
        x_emb = layer(x=x_emb, attn_mask=x_attn_mask, freqs_cis=x_freqs_cis, t_emb=t_emb)
    cap_emb = tr.cap_embedder[1](tr.cap_embedder[0](cap_emb))
    cap_emb = mx.where(cap_pad_mask[:, None], tr.cap_pad_token, cap_emb)
    cap_freqs_cis = tr.rope_embedder(cap_pos_ids)
    cap_attn_mask = mx.ones((1, cap_emb.shape[0]), dtype=mx.bool_)
    cap_emb = mx.expand_dims(cap_emb, axis=0)
    for layer in tr.context_refiner:
        cap_emb = layer(x=cap_emb, attn_mask=cap_attn_mask, freqs_cis=cap_freqs_cis)
    return mx.concatenate([x_emb, cap_emb], axis=1)


def _count_calls(monkeypatch: pytest.MonkeyPatch, cls: type) -> dict[str, int]:
    counts = {"calls": 0}
    original = cls.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["calls"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", counting)
    return counts


def test_forced_skips_reuse_each_branchs_own_residual(
    base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    layers = _count_calls(monkeypatch, ZImageTransformerBlock)
    context = _count_calls(monkeypatch, ZImageContextBlock)
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
    calls, context_calls = layers["calls"], context["calls"]
    vanilla = probes.generate_latents(base, **CFG)

    assert gate.pattern == "FSCSCF" and gate.skipped == 2
    assert not mx.array_equal(gated, vanilla).item()
    tr = base.transformer
    # The noise refiner uses ZImageTransformerBlock too (the context refiner another class).
    refiners = len(tr.noise_refiner)
    computed = sum(e.decision.computes for e in gate.events)
    skipped = gate.skipped
    # Captions that pad alike put both branches' image tokens at the same positions (they follow
    # the padded caption): the noise refiner then runs once a step for both, else once each.
    captions = base._encode_prompts.table
    alike = captions[shells.DEFAULT_PROMPT].shape[0] == captions[" "].shape[0]
    refiner_runs = refiners * (1 if alike else 2)
    # Computed steps: the refiner + all main layers for both branches.
    # Skipped steps: the refiner + layer 0 once (the signal) and nothing else.
    expected = computed * (refiner_runs + 2 * len(tr.layers)) + skipped * (refiner_runs + 1)
    assert calls == expected
    # The context refiner takes no timestep: once per branch for the whole generation.
    assert context_calls == 2 * len(tr.context_refiner)
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
            # Bit for bit what mflux computes on this very step, caption refiner included.
            expected_in = _mflux_stream(tr, recorder.inputs[step], t_emb, cap)
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


def test_observing_is_bit_exact_to_vanilla_whether_captions_pad_alike_or_not(base: Any) -> None:
    """The once-per-generation caption and the shared noise refiner change no bit of a computed
    step (test_adapter_parity.py holds the same for every family's default shell)."""
    vanilla = probes.generate_latents(base, **CFG)
    trace = probes.recorder()
    with install_gate(base, trace):
        observed = probes.generate_latents(base, **CFG)
    assert trace.skipped == 0 and all(
        probes.figure(e, "teacache", "rel_l1") is not None for e in trace.events[1:]
    )
    assert mx.array_equal(observed, vanilla).item()
