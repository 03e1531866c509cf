"""Z-Image (base and Turbo): an eager ``predict`` in place of mflux's compiled one.

Re-walk of mflux 0.24.0 ``ZImageTransformer.__call__`` and ``ZImage._predict``:

- prelude (every step): time embedding, patchify, image embedder + noise refiner, caption
  embedder + context refiner, ``unified = concat([x, caption])``;
- signal ("signal B", as mlx-teacache ships for Z-Image): the residual of the first main layer,
  ``layers[0](unified) - unified``. The adaLN modulation depends on the timestep only, so a
  modulated-input signal would not see the latents move; the layer-0 residual does;
- body: the remaining main layers, continuing from ``layers[0]``'s output; the residual is taken
  over all main layers (``out - unified``), so a skip still runs layer 0 (it is the signal);
- tail: the final layer, unpatchify, negate. CFG combines ``pos + g·(pos − neg)`` as mflux does,
  one decision per step (made on the conditional branch, which carries the signal), one residual
  per branch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mflux.models.z_image.model.z_image_transformer.transformer import ZImageTransformer

from app.adapters.base import Installation
from app.adapters.common import (
    COND,
    UNCOND,
    GateState,
    install_predict_factory,
)
from app.gate import TeaCacheGate, Verdict


@dataclass(frozen=True, slots=True)
class _Stream:
    unified: mx.array
    freqs_cis: mx.array
    attn_mask: mx.array
    t_emb: mx.array
    x_len: int
    x_size: tuple[int, int, int]


def _time_embedding(tr: ZImageTransformer, timestep: Any, sigmas: mx.array) -> mx.array:
    # Verbatim from ZImageTransformer.__call__.
    if not isinstance(timestep, mx.array):
        if isinstance(timestep, int):
            sigma_t = sigmas[timestep].reshape((1,))
            timestep = mx.ones_like(sigma_t) - sigma_t
        else:
            timestep = mx.array(timestep, dtype=mx.float32)
    if timestep.ndim == 0:
        timestep = timestep.reshape((1,))
    t_emb = tr.t_embedder(timestep.astype(mx.float32) * tr.t_scale)
    return ZImageTransformer.stream_t_emb(t_emb, tr.float32)


def _stream(tr: ZImageTransformer, x: mx.array, t_emb: mx.array, cap_feats: mx.array) -> _Stream:
    key = f"{tr.patch_size}-{tr.f_patch_size}"
    x_emb, cap_emb, x_size, x_pos_ids, cap_pos_ids, x_pad_mask, cap_pad_mask = (
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
    unified = mx.concatenate([x_emb, cap_emb], axis=1)
    freqs_cis = mx.concatenate([x_freqs_cis, cap_freqs_cis], axis=0)
    attn_mask = mx.ones((1, unified.shape[1]), dtype=mx.bool_)
    return _Stream(unified, freqs_cis, attn_mask, t_emb, x_emb.shape[1], x_size)


def _layer(tr: ZImageTransformer, index: int, s: _Stream, x: mx.array) -> mx.array:
    return tr.layers[index](x=x, attn_mask=s.attn_mask, freqs_cis=s.freqs_cis, t_emb=s.t_emb)


def _tail(tr: ZImageTransformer, s: _Stream, out: mx.array) -> mx.array:
    key = f"{tr.patch_size}-{tr.f_patch_size}"
    out = tr.all_final_layer[key](out, s.t_emb)
    output = ZImageTransformer._unpatchify(
        x=out[0, : s.x_len],
        size=s.x_size,
        patch_size=tr.patch_size,
        f_patch_size=tr.f_patch_size,
        out_channels=tr.out_channels,
    )
    return -output


def _body(
    tr: ZImageTransformer,
    s: _Stream,
    gate: TeaCacheGate,
    verdict: Verdict,
    branch: str,
    first: mx.array | None,
) -> mx.array:
    """Main layers or the cached residual. ``first`` is layer 0's output when the signal
    already ran it."""
    if not verdict.decision.computes:
        return gate.reuse(s.unified, branch)
    out = first if first is not None else _layer(tr, 0, s, s.unified)
    for index in range(1, len(tr.layers)):
        out = _layer(tr, index, s, out)
    if verdict.store_residual:
        gate.store_residual(out, s.unified, branch)
    return out


def _plain(transformer: ZImageTransformer, kw: dict[str, Any]) -> mx.array:
    """mflux's predict body, eager (no gate)."""
    noise = transformer(
        timestep=kw["timestep"],
        x=kw["latents"],
        cap_feats=kw["text_encodings"],
        sigmas=kw["sigmas"],
    )
    if kw["negative_encodings"] is None:
        return noise
    negative_noise = transformer(
        timestep=kw["timestep"],
        x=kw["latents"],
        cap_feats=kw["negative_encodings"],
        sigmas=kw["sigmas"],
    )
    return noise + kw["guidance"] * (noise - negative_noise)


def make_predict_factory(
    state: GateState,
) -> Callable[[ZImageTransformer], Callable[..., mx.array]]:
    def factory(transformer: ZImageTransformer) -> Callable[..., mx.array]:
        def predict(
            latents: mx.array,
            timestep: mx.array,
            sigmas: mx.array,
            text_encodings: mx.array,
            negative_encodings: mx.array | None,
            guidance: float,
        ) -> mx.array:
            kw = {
                "latents": latents,
                "timestep": timestep,
                "sigmas": sigmas,
                "text_encodings": text_encodings,
                "negative_encodings": negative_encodings,
                "guidance": guidance,
            }
            if not state.gating:
                return _plain(transformer, kw)
            gate = state.gate
            if not gate.needs_signal:
                gate.decide(None)
                noise = _plain(transformer, kw)
                state.record(noise)
                return noise
            t_emb = _time_embedding(transformer, timestep, sigmas)
            cond = _stream(transformer, latents, t_emb, text_encodings)
            first = _layer(transformer, 0, cond, cond.unified)
            verdict = gate.decide(first - cond.unified)
            noise = _tail(transformer, cond, _body(transformer, cond, gate, verdict, COND, first))
            if negative_encodings is not None:
                uncond = _stream(transformer, latents, t_emb, negative_encodings)
                negative_noise = _tail(
                    transformer, uncond, _body(transformer, uncond, gate, verdict, UNCOND, None)
                )
                noise = noise + guidance * (noise - negative_noise)
            state.record(noise)
            return noise

        return predict

    factory.teacache_state = state  # type: ignore[attr-defined]
    return factory


def install(pipeline: Any, gate: TeaCacheGate) -> Installation:
    return install_predict_factory(
        pipeline, gate, family="z-image", model_name="Z-Image", make_factory=make_predict_factory
    )
