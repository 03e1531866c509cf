"""Z-Image (base and Turbo): a gated ``predict`` in place of mflux's.

As for FLUX.2 (app/adapters/flux2.py): threshold 0 calls the pipeline's own predict untouched;
where mflux compiles its predict, the gated step is split-compiled (app/adapters/compiled.py),
otherwise it is the eager re-walk below.

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

The block-0 split (the first-block probe, ``common.probe_stack``): the prelude above already ends
with main layer 0 (``first``); the probe reads its residual on the image tokens (``[:, :x_len]``
of ``first − unified``, which TeaCache reads over every token), ``_rest_layers`` runs layers 1..,
and the cached residual is the rest's (``out − first``). The unconditional branch reads the same
verdict and keeps TeaCache's residual. Where mflux compiles, the probe runs ``_CompiledZImage``'s
prelude and body (so a computed step is the vanilla pass's, bit for bit) and its own tail. A
vanilla (observing) pass records the same image-token residual.
"""

from __future__ import annotations

from collections import Counter
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
    probe_stack,
)
from app.adapters.compiled import counted_compile, is_compiled
from app.families.z_image import FAMILY
from app.gate import LiveGate, Verdict


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
    gate: LiveGate,
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


def _rest_layers(tr: ZImageTransformer, s: _Stream, first: mx.array) -> mx.array:
    """Main layers 1.. from layer 0's output (the probe's remaining blocks)."""
    out = first
    for index in range(1, len(tr.layers)):
        out = _layer(tr, index, s, out)
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


def _geometry(tr: ZImageTransformer, latents: mx.array) -> tuple[int, tuple[int, int, int]]:
    """``(x_len, x_size)`` of ``_stream`` from the latents' shape alone (as ``_patchify`` pads)."""
    _, f, h, w = latents.shape
    tokens = (f // tr.f_patch_size) * (h // tr.patch_size) * (w // tr.patch_size)
    return tokens + (-tokens) % 32, (f, h, w)


class _CompiledZImage:
    """The split-compiled gated step (app/adapters/compiled.py), built once per generation.

    The prelude is compiled too: for Z-Image it is the refiners and layer 0 (signal B), five of
    34 blocks' worth of work on every step, which would otherwise run eager. The residual is kept
    over the image tokens only (``out[:, :x_len] - unified[:, :x_len]``): the final layer is
    per-token and the tail keeps only those tokens.
    """

    def __init__(self, tr: ZImageTransformer, traces: Counter[str]) -> None:
        self.tr = tr
        self.prelude = counted_compile("prelude", self._prelude, traces)
        self.body = counted_compile("body", self._body, traces)
        self.tail = counted_compile("tail", self._tail, traces)

    def _prelude(
        self,
        latents: mx.array,
        timestep: mx.array,
        sigmas: mx.array,
        text_encodings: mx.array,
        negative_encodings: mx.array | None,
    ) -> tuple[Any, ...]:
        tr = self.tr
        t_emb = _time_embedding(tr, timestep, sigmas)
        cond = _stream(tr, latents, t_emb, text_encodings)
        first = _layer(tr, 0, cond, cond.unified)
        out: tuple[Any, ...] = (first - cond.unified, t_emb, cond.unified, cond.freqs_cis, first)
        if negative_encodings is not None:
            uncond = _stream(tr, latents, t_emb, negative_encodings)
            out = (*out, uncond.unified, uncond.freqs_cis)
        return out

    def _main_layers(
        self, unified: mx.array, freqs_cis: mx.array, t_emb: mx.array, first: mx.array | None
    ) -> mx.array:
        tr = self.tr
        attn_mask = mx.ones((1, unified.shape[1]), dtype=mx.bool_)
        out = first
        for index, layer in enumerate(tr.layers):
            if index == 0 and first is not None:
                continue
            out = layer(
                x=unified if out is None else out,
                attn_mask=attn_mask,
                freqs_cis=freqs_cis,
                t_emb=t_emb,
            )
        assert out is not None
        return out

    def _head(self, out_img: mx.array, t_emb: mx.array, x_size: tuple[int, int, int]) -> mx.array:
        tr = self.tr
        out = tr.all_final_layer[f"{tr.patch_size}-{tr.f_patch_size}"](out_img, t_emb)
        output = ZImageTransformer._unpatchify(
            x=out[0],
            size=x_size,
            patch_size=tr.patch_size,
            f_patch_size=tr.f_patch_size,
            out_channels=tr.out_channels,
        )
        return -output

    def _body(
        self,
        t_emb: mx.array,
        unified: mx.array,
        freqs_cis: mx.array,
        first: mx.array,
        negative_unified: mx.array | None,
        negative_freqs_cis: mx.array | None,
        guidance: float,
        x_len: int,
        x_size: tuple[int, int, int],
    ) -> tuple[mx.array, ...]:
        cond = self._main_layers(unified, freqs_cis, t_emb, first)[:, :x_len]
        noise = self._head(cond, t_emb, x_size)
        if negative_unified is None or negative_freqs_cis is None:
            return noise, cond
        uncond = self._main_layers(negative_unified, negative_freqs_cis, t_emb, None)[:, :x_len]
        negative_noise = self._head(uncond, t_emb, x_size)
        return noise + guidance * (noise - negative_noise), cond, uncond

    def _tail(
        self,
        t_emb: mx.array,
        cond: mx.array,
        uncond: mx.array | None,
        guidance: float,
        x_size: tuple[int, int, int],
    ) -> mx.array:
        noise = self._head(cond, t_emb, x_size)
        if uncond is None:
            return noise
        return noise + guidance * (noise - self._head(uncond, t_emb, x_size))

    def step(self, state: GateState, kw: dict[str, Any]) -> mx.array:
        gate = state.gate
        negative = kw["negative_encodings"]
        signal, t_emb, unified, freqs_cis, first, *uncond_stream = self.prelude(
            kw["latents"], kw["timestep"], kw["sigmas"], kw["text_encodings"], negative
        )
        x_len, x_size = _geometry(self.tr, kw["latents"])
        if gate.probes_first_block:
            return self._probe_step(gate, kw, t_emb, unified, freqs_cis, first, uncond_stream)
        verdict = gate.decide(signal)
        if gate.records_first_block:
            gate.record_first_block(signal[:, :x_len])  # the probe's vanilla trace
        cond_in = unified[:, :x_len]
        uncond_in = uncond_stream[0][:, :x_len] if uncond_stream else None
        if verdict.decision.computes:
            negative_unified, negative_freqs_cis = uncond_stream or (None, None)
            noise, *outs = self.body(
                t_emb,
                unified,
                freqs_cis,
                first,
                negative_unified,
                negative_freqs_cis,
                kw["guidance"],
                x_len,
                x_size,
            )
            if verdict.store_residual:
                for branch, out, body_in in zip(
                    (COND, UNCOND), outs, (cond_in, uncond_in), strict=False
                ):
                    assert body_in is not None
                    gate.store_residual(out, body_in, branch)
        else:
            reused_uncond = gate.reuse(uncond_in, UNCOND) if uncond_in is not None else None
            noise = self.tail(
                t_emb, gate.reuse(cond_in, COND), reused_uncond, kw["guidance"], x_size
            )
        return noise

    def _probe_step(
        self,
        gate: LiveGate,
        kw: dict[str, Any],
        t_emb: mx.array,
        unified: mx.array,
        freqs_cis: mx.array,
        first: mx.array,
        uncond_stream: list[mx.array],
    ) -> mx.array:
        """The first-block probe on the split: the prelude and the body are the ones a vanilla
        pass runs (a computed step is vanilla's, bit for bit); only the decision, the residual's
        base and the tail's input differ (layer 0's output + the cached residual)."""
        x_len, x_size = _geometry(self.tr, kw["latents"])
        first_img = first[:, :x_len]
        verdict = gate.decide(first_img - unified[:, :x_len])
        uncond_in = uncond_stream[0][:, :x_len] if uncond_stream else None
        if verdict.decision.computes:
            negative_unified, negative_freqs_cis = uncond_stream or (None, None)
            noise, *outs = self.body(
                t_emb,
                unified,
                freqs_cis,
                first,
                negative_unified,
                negative_freqs_cis,
                kw["guidance"],
                x_len,
                x_size,
            )
            if verdict.store_residual:
                for branch, out, base in zip(
                    (COND, UNCOND), outs, (first_img, uncond_in), strict=False
                ):
                    assert base is not None
                    gate.store_residual(out, base, branch)
            return noise
        reused_uncond = gate.reuse(uncond_in, UNCOND) if uncond_in is not None else None
        return self.tail(t_emb, gate.reuse(first_img, COND), reused_uncond, kw["guidance"], x_size)


def make_predict_factory(
    state: GateState,
) -> Callable[[ZImageTransformer], Callable[..., mx.array]]:
    def factory(transformer: ZImageTransformer) -> Callable[..., mx.array]:
        own = state.own_factory(transformer) if state.own_factory is not None else None
        split = _CompiledZImage(transformer, state.traces) if is_compiled(own) else None

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
            gate = state.gate
            if not state.gating or not gate.needs_signal:
                # Outside a generation, and at threshold 0: the pipeline's own predict, untouched.
                if state.gating:
                    gate.decide(None)
                noise = own(**kw) if own is not None else _plain(transformer, kw)
                if state.gating:
                    state.record(noise)
                return noise
            if split is not None and isinstance(timestep, mx.array):
                noise = split.step(state, kw)
                state.record(noise)
                return noise
            t_emb = _time_embedding(transformer, timestep, sigmas)
            cond = _stream(transformer, latents, t_emb, text_encodings)
            first = _layer(transformer, 0, cond, cond.unified)
            if gate.probes_first_block:  # the probe: the rest of the stack, or its residual
                out = probe_stack(
                    gate,
                    cond.unified,
                    first,
                    lambda: _rest_layers(transformer, cond, first),
                    signal=(first - cond.unified)[:, : cond.x_len],
                )
                noise = _tail(transformer, cond, out)
                verdict = gate.decide(None)  # the conditional branch's, for the other branch
            else:
                verdict = gate.decide(first - cond.unified)
                if gate.records_first_block:  # the probe's vanilla trace
                    gate.record_first_block((first - cond.unified)[:, : cond.x_len])
                noise = _tail(
                    transformer, cond, _body(transformer, cond, gate, verdict, COND, first)
                )
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


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict_factory(pipeline, gate, family=FAMILY, make_factory=make_predict_factory)
