"""FLUX.3 Image Klein (distilled and base): a gated ``predict``, eager as mflux's own.

mflux 0.24.0 builds ``predict = self._predict(self.transformer)`` once per generation and does not
compile it (its RoPE angles are built on the host in float64, ``Flux3PosEmbed``), so the adapter
sets an instance attribute ``_predict`` (mflux's keyword signature) whose closure keeps the gate
outside the transformer:

- at threshold 0 (and outside a generation, and for edits) it calls mflux's own predict untouched;
- otherwise it re-walks ``Flux3Transformer.__call__`` and ``_Flux3KleinCore._predict`` on the
  text-to-image path (no image conditioning).

Re-walk of mflux 0.24.0 ``Flux3Transformer.__call__``:

- prelude: the time embeddings (the image's at ``t``, the context's at 0; a flow map adds the
  target time's to both), the image stream's per-mode modulation, ``x_embedders["image"]``;
- signal: block 0's modulated image input, ``(1 + scale) · norm(x) + shift`` of
  ``mode_blocks["image"][0]``. The per-mode stage attends within each stream, so the image stream
  never sees the caption before the single stream: the signal is caption-independent and one
  decision serves both CFG branches exactly;
- body (per branch): the caption embedding, the per-mode stage (image and text streams), the single
  stream over ``[image, text]`` with per-token modulation; the residual is kept over the image
  tokens only (``out[:, :N] − x``), all the tail reads, one per branch (``"cond"``/``"uncond"``);
- tail: ``norm_out`` with the image's time embedding, ``proj_out``; the base checkpoint's CFG
  combines ``u + g·(c − u)`` in float32, as mflux does.

The block-0 split (the first-block probe, ``common.probe_stack``): ``_first_block`` runs the image
stream's per-mode block 0 (it attends within the image stream only, so its change is
caption-independent); its residual is taken on the image stream; ``_rest_blocks`` runs the image
stream's blocks 1.., the whole text stream and the single stream, and returns the image tokens the
tail reads. The conditional branch decides; the unconditional one (the base's CFG) reads that
verdict and keeps the whole stack's residual, as under TeaCache. A vanilla (observing) pass
records the same residual after block 0 of the conditional branch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux3.model.flux3_transformer.flux3_transformer import Flux3Transformer

from app.adapters.base import Installation
from app.adapters.common import COND, UNCOND, GateState, install_predict_factory, probe_stack
from app.families.flux3 import FAMILY
from app.gate import LiveGate, Verdict


@dataclass(frozen=True, slots=True)
class _Prelude:
    x: mx.array  # the embedded image tokens
    vec_image: mx.array  # the image's time embedding (the tail's too)
    vec_context: mx.array  # the text's (time 0)
    mod_image: tuple[mx.array, mx.array, mx.array]  # the image stream's per-mode modulation


def _prelude(
    tr: Flux3Transformer, latents: mx.array, timestep: mx.array, target: mx.array | None
) -> _Prelude:
    # Verbatim from Flux3Transformer.__call__ (text-to-image: no image_cond stream).
    if tr.flow_map != (target is not None):
        raise ValueError("target_timestep is required by, and only by, a flow-map transformer")
    vec_image = tr.timestep_embedder(timestep)
    vec_context = tr.timestep_embedder(mx.zeros_like(timestep))
    if tr.flow_map:
        assert tr.target_timestep_embedder is not None and target is not None
        target_vec = tr.target_timestep_embedder(target)
        vec_image, vec_context = vec_image + target_vec, vec_context + target_vec
    mod_image = tr.early_stream_modulations["image"](vec_image)
    x = tr.x_embedders["image"](latents.astype(ModelConfig.precision))
    return _Prelude(x=x, vec_image=vec_image, vec_context=vec_context, mod_image=mod_image)


def _signal(tr: Flux3Transformer, pre: _Prelude) -> mx.array:
    shift, scale, _ = pre.mod_image
    return (1 + scale) * tr.mode_blocks["image"][0].norm(pre.x) + shift


@dataclass(frozen=True, slots=True)
class _FirstBlock:
    """The image stream after its per-mode block 0, and the rotary embeddings it used."""

    image: mx.array
    rotary_image: tuple[mx.array, mx.array]


def _first_block(tr: Flux3Transformer, pre: _Prelude, latent_ids: mx.array) -> _FirstBlock:
    rotary_image = tr.pos_embed(latent_ids)
    image = tr.mode_blocks["image"][0](pre.x, rotary_image, pre.mod_image)
    return _FirstBlock(image, rotary_image)


def _body(
    tr: Flux3Transformer,
    pre: _Prelude,
    latent_ids: mx.array,
    tokens: mx.array,
    ids: mx.array,
    first: _FirstBlock | None = None,
    on_first: Callable[[mx.array], None] | None = None,
) -> mx.array:
    """One branch's stack, as mflux runs it (from ``first`` where block 0 already ran; each
    stream's per-mode blocks depend on that stream alone, so running the image stream's before
    the text stream's computes the same values); returns the image tokens of the single stream.
    ``on_first`` is handed the image stream after block 0."""
    dtype = ModelConfig.precision
    num_image = pre.x.shape[1]
    mod_txt = tr.early_stream_modulations["txt"](pre.vec_context)
    single_image = tr.single_stream_modulations["image"](pre.vec_image)
    single_txt = tr.single_stream_modulations["txt"](pre.vec_context)
    if first is None:
        first = _first_block(tr, pre, latent_ids)
        if on_first is not None:
            on_first(first.image)
    image, rotary_image = first.image, first.rotary_image
    txt, rotary_txt = tr.context_embedder(tokens.astype(dtype)), tr.pos_embed(ids)
    for depth in range(1, len(tr.txt_mode_blocks)):
        image = tr.mode_blocks["image"][depth](image, rotary_image, pre.mod_image)
    for depth in range(len(tr.txt_mode_blocks)):
        txt = tr.txt_mode_blocks[depth](txt, rotary_txt, mod_txt)
    x = mx.concatenate([image, txt], axis=1)
    single_rotary = tr.pos_embed(mx.concatenate([latent_ids, ids], axis=0))
    widths = ((single_image, image.shape[1]), (single_txt, txt.shape[1]))

    def joined(i: int) -> mx.array:
        parts = [
            mx.broadcast_to(mod[i], (x.shape[0], length, x.shape[-1])) for mod, length in widths
        ]
        return mx.concatenate(parts, axis=1)

    single_mod = (joined(0), joined(1), joined(2))
    for block in tr.single_transformer_blocks:
        x = block(x, single_rotary, single_mod)
    return x[:, :num_image]


def _rest_blocks(
    tr: Flux3Transformer,
    pre: _Prelude,
    first: _FirstBlock,
    latent_ids: mx.array,
    tokens: mx.array,
    ids: mx.array,
) -> mx.array:
    """The probe's remaining stack after the image stream's block 0: the image tokens the tail
    reads."""
    return _body(tr, pre, latent_ids, tokens, ids, first=first)


def _branch(
    tr: Flux3Transformer,
    pre: _Prelude,
    latent_ids: mx.array,
    tokens: mx.array,
    ids: mx.array,
    gate: LiveGate,
    verdict: Verdict,
    branch: str,
) -> mx.array:
    if verdict.decision.computes:
        on_first: Callable[[mx.array], None] | None = None
        if branch == COND and gate.records_first_block:  # the probe's vanilla trace

            def record(image: mx.array) -> None:
                gate.record_first_block(image - pre.x)

            on_first = record
        out = _body(tr, pre, latent_ids, tokens, ids, on_first=on_first)
        if verdict.store_residual:
            gate.store_residual(out, pre.x, branch)
    else:
        out = gate.reuse(pre.x, branch)
    return tr.proj_out(tr.norm_out(out, pre.vec_image))


def make_predict_factory(state: GateState) -> Callable[[Flux3Transformer], Callable[..., mx.array]]:
    def factory(transformer: Flux3Transformer) -> Callable[..., mx.array]:
        own = state.own_factory(transformer) if state.own_factory is not None else None

        def predict(**kw: Any) -> mx.array:
            gate = state.gate
            cond = kw.get("cond_tokens")
            edit = cond is not None and cond.shape[1] > 0
            if not state.gating or edit or not gate.needs_signal:
                # Outside a generation, an edit's reference images, threshold 0: mflux's own.
                assert own is not None
                if state.gating and not edit:
                    gate.decide(None)
                noise = own(**kw)
                if state.gating and not edit:
                    state.record(noise)
                return noise
            pre = _prelude(transformer, kw["latents"], kw["timestep"], kw["target_timestep"])
            latent_ids, tokens, ids = kw["latent_ids"], kw["text_tokens"], kw["text_ids"]
            if gate.probes_first_block:  # the first-block probe: split after block 0
                first = _first_block(transformer, pre, latent_ids)
                out = probe_stack(
                    gate,
                    pre.x,
                    first.image,
                    lambda: _rest_blocks(transformer, pre, first, latent_ids, tokens, ids),
                )
                velocity = transformer.proj_out(transformer.norm_out(out, pre.vec_image))
                verdict = gate.decide(None)  # the conditional branch's, for the other branch
            else:
                verdict = gate.decide(_signal(transformer, pre))
                velocity = _branch(transformer, pre, latent_ids, tokens, ids, gate, verdict, COND)
            if kw["uncond_tokens"] is not None:
                unconditional = _branch(
                    transformer,
                    pre,
                    latent_ids,
                    kw["uncond_tokens"],
                    kw["uncond_ids"],
                    gate,
                    verdict,
                    UNCOND,
                ).astype(mx.float32)
                velocity = unconditional + kw["guidance"] * (
                    velocity.astype(mx.float32) - unconditional
                )
            state.record(velocity)
            return velocity

        return predict

    factory.teacache_state = state  # type: ignore[attr-defined]  # marks an installed gate
    return factory


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict_factory(pipeline, gate, family=FAMILY, make_factory=make_predict_factory)
