"""Z-Image (base and Turbo): a gated ``predict`` in place of mflux's.

As for FLUX.2 (app/adapters/flux2.py): threshold 0 calls the pipeline's own predict untouched;
where mflux compiles its predict, the gated step is split-compiled (app/adapters/compiled.py),
otherwise it is the eager re-walk below.

Re-walk of mflux 0.24.0 ``ZImageTransformer.__call__`` and ``ZImage._predict``:

- once per generation and caption (``_Caption``): the caption embedder and the context refiner
  (``ZImageContextBlock`` takes no timestep: its output is the same at every step, verified in
  tests/adapters/test_adapter_z_image.py against mflux's every-step walk, bit for bit), and the
  rotary tables of the image and caption positions (they depend on the shapes alone);
- every step: time embedding, patchify, image embedder + noise refiner, ``unified = concat([x,
  caption])``. The image tokens' positions start after the padded caption, so the two CFG
  branches' noise refiners see the same input, bit for bit, where their captions pad to the
  same length (both under 32 tokens, say): the refiner then runs once for both;
- signal ("signal B", as mlx-teacache ships for Z-Image): the residual of the first main layer,
  ``layers[0](unified) - unified``. The adaLN modulation depends on the timestep only, so a
  modulated-input signal would not see the latents move; the layer-0 residual does;
- body: the remaining main layers, continuing from ``layers[0]``'s output; the residual is taken
  over all main layers (``out - unified``), so a skip still runs layer 0 (it is the signal);
- tail: the final layer, unpatchify, negate. CFG combines ``pos + g·(pos − neg)`` as mflux does,
  one decision per step (made on the conditional branch, which carries the signal), one residual
  per branch.

A gate that reads no signal (MagCache) skips a step with the noise refiner and the tail only:
no layer 0, no caption.

The block-0 split (the first-block probe, ``common.probe_stack``): the prelude above already ends
with main layer 0 (``first``); the probe reads its residual on the image tokens (``[:, :x_len]``
of ``first − unified``, which TeaCache reads over every token), ``_rest_layers`` runs layers 1..,
and the cached residual is the rest's (``out − first``). The unconditional branch reads the same
verdict and keeps TeaCache's residual. Where mflux compiles, the probe runs ``_CompiledZImage``'s
prelude and body (so a computed step is the vanilla pass's) and its tail on ``first``'s image
tokens: like TeaCache, its signal and measurement are built in the previous step's sync, and a
skipped step runs the prelude with layer 0 (what the decision reads) and the tail. A vanilla
(observing) pass records the same image-token residual.
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
    probe_stack,
)
from app.adapters.compiled import SplitStep, counted_compile, is_compiled
from app.families.z_image import FAMILY
from app.gate import LiveGate, Verdict

_CAPTION_PAD = 32  # mflux's _patchify pads captions and images to a multiple of this


@dataclass(frozen=True, slots=True)
class _Caption:
    """A caption's step-invariant part of the stream, for one generation."""

    feats: mx.array  # the caption features it was built from (looked up by identity)
    cap_emb: mx.array  # (1, caption tokens, dim), after the context refiner
    x_freqs_cis: mx.array  # the image tokens' rotary table (their positions follow the caption)
    freqs_cis: mx.array  # the unified sequence's: [image, caption]

    @property
    def padded_length(self) -> int:
        return self.cap_emb.shape[1]


@dataclass(frozen=True, slots=True)
class _Stream:
    unified: mx.array
    freqs_cis: mx.array
    attn_mask: mx.array
    t_emb: mx.array
    x_len: int


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


def _patchify(tr: ZImageTransformer, x: mx.array, cap_feats: mx.array) -> tuple[Any, ...]:
    return ZImageTransformer._patchify(
        image=x, cap_feats=cap_feats, patch_size=tr.patch_size, f_patch_size=tr.f_patch_size
    )


def _caption(
    tr: ZImageTransformer, x: mx.array, cap_feats: mx.array
) -> tuple[mx.array, mx.array, mx.array]:
    """``(cap_emb, x_freqs_cis, freqs_cis)`` of ``_Caption``: ZImageTransformer.__call__'s
    caption embedding and context refiner, and its rotary tables (``x`` is read for its shape)."""
    _, cap_emb, _, x_pos_ids, cap_pos_ids, _, cap_pad_mask = _patchify(tr, x, cap_feats)
    x_freqs_cis = tr.rope_embedder(x_pos_ids)
    cap_emb = tr.cap_embedder[1](tr.cap_embedder[0](cap_emb))
    cap_emb = mx.where(cap_pad_mask[:, None], tr.cap_pad_token, cap_emb)
    cap_freqs_cis = tr.rope_embedder(cap_pos_ids)
    cap_attn_mask = mx.ones((1, cap_emb.shape[0]), dtype=mx.bool_)
    cap_emb = mx.expand_dims(cap_emb, axis=0)
    for layer in tr.context_refiner:
        cap_emb = layer(x=cap_emb, attn_mask=cap_attn_mask, freqs_cis=cap_freqs_cis)
    return cap_emb, x_freqs_cis, mx.concatenate([x_freqs_cis, cap_freqs_cis], axis=0)


def _image(
    tr: ZImageTransformer, x: mx.array, t_emb: mx.array, cap_feats: mx.array, x_freqs_cis: mx.array
) -> mx.array:
    """The image tokens after the noise refiner (ZImageTransformer.__call__'s image embedding
    and noise refiner; ``cap_feats`` only places the padding, as in mflux's ``_patchify``)."""
    key = f"{tr.patch_size}-{tr.f_patch_size}"
    x_emb, _, _, _, _, x_pad_mask, _ = _patchify(tr, x, cap_feats)
    x_emb = tr.all_x_embedder[key](x_emb)
    x_emb = mx.where(x_pad_mask[:, None], tr.x_pad_token, x_emb)
    x_attn_mask = mx.ones((1, x_emb.shape[0]), dtype=mx.bool_)
    x_emb = mx.expand_dims(x_emb, axis=0)
    for layer in tr.noise_refiner:
        x_emb = layer(x=x_emb, attn_mask=x_attn_mask, freqs_cis=x_freqs_cis, t_emb=t_emb)
    return x_emb


def _x_size(latents: mx.array) -> tuple[int, int, int]:
    _, f, h, w = latents.shape
    return f, h, w


class _Captions:
    """The generation's ``_Caption`` per caption, built on first use (a new one per predict
    factory call, that is per ``generate_image``)."""

    def __init__(self, build: Callable[[mx.array, mx.array], tuple[mx.array, ...]]) -> None:
        self._build = build
        self._made: list[_Caption] = []

    def of(self, latents: mx.array, feats: mx.array) -> _Caption:
        for made in self._made:
            if made.feats is feats:
                return made
        caption = _Caption(feats, *self._build(latents, feats))
        self._made.append(caption)
        return caption


def _stream(tr: ZImageTransformer, x_emb: mx.array, caption: _Caption, t_emb: mx.array) -> _Stream:
    unified = mx.concatenate([x_emb, caption.cap_emb], axis=1)
    attn_mask = mx.ones((1, unified.shape[1]), dtype=mx.bool_)
    return _Stream(unified, caption.freqs_cis, attn_mask, t_emb, x_emb.shape[1])


def _layer(tr: ZImageTransformer, index: int, s: _Stream, x: mx.array) -> mx.array:
    return tr.layers[index](x=x, attn_mask=s.attn_mask, freqs_cis=s.freqs_cis, t_emb=s.t_emb)


def _tail(
    tr: ZImageTransformer, s: _Stream, out: mx.array, x_size: tuple[int, int, int]
) -> mx.array:
    key = f"{tr.patch_size}-{tr.f_patch_size}"
    out = tr.all_final_layer[key](out, s.t_emb)
    output = ZImageTransformer._unpatchify(
        x=out[0, : s.x_len],
        size=x_size,
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


class _CompiledZImage(SplitStep):
    """The split-compiled gated step (app/adapters/compiled.py), built once per generation.

    The prelude is the time embedding and the noise refiner of each branch (once where the
    branches' captions pad alike), and, for a gate that reads the signal, layer 0 (signal B): two
    or three of 34 blocks' worth of work on every step. The captions' part comes from
    ``_Caption`` (compiled, once per generation and caption). The residual is kept over the
    image tokens only (``out[:, :x_len] - x_emb``): the final layer is per-token and the tail
    keeps only those tokens.

    ``inputs``: ``(sigmas, text_encodings, negative_encodings, guidance)``. The prelude is
    ``(t_emb, x_cond, x_uncond, first, signal)`` for a gate that reads the signal, ``(t_emb,
    x_cond, x_uncond)`` for one that does not (``x_uncond`` None without CFG or where the branches
    share the noise refiner; ``first``, layer 0's output, continues the body).
    """

    def __init__(self, tr: ZImageTransformer, state: GateState) -> None:
        super().__init__(state)
        self.tr = tr
        self.probes = state.gate.probes_first_block
        self.records = state.gate.records_first_block
        self._cond: _Caption | None = None
        self._uncond: _Caption | None = None
        self._size = (0, 0, 0)
        self.captions = _Captions(counted_compile("caption", self._caption, state.traces))
        self._prelude_fn = counted_compile("prelude", self._prelude_parts, state.traces)
        self.body = counted_compile("body", self._body, state.traces)
        self.tail = counted_compile("tail", self._tail, state.traces)

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        sigma_t = config.scheduler.sigmas[t].reshape((1,))  # as ZImage.generate_image passes it
        return mx.ones_like(sigma_t) - sigma_t

    def _caption(self, latents: mx.array, feats: mx.array) -> tuple[mx.array, ...]:
        return _caption(self.tr, latents, feats)

    def _branches(
        self, latents: mx.array, inputs: tuple[Any, ...]
    ) -> tuple[_Caption, _Caption | None, bool]:
        """The branches' captions, and whether their image tokens share the noise refiner."""
        _, text_encodings, negative_encodings, _ = inputs
        cond = self.captions.of(latents, text_encodings)
        if negative_encodings is None:
            return cond, None, False
        uncond = self.captions.of(latents, negative_encodings)
        return cond, uncond, uncond.padded_length == cond.padded_length

    def prelude(self, latents: mx.array, timestep: mx.array, inputs: tuple[Any, ...]) -> Any:
        cond, uncond, shared = self._branches(latents, inputs)
        # The same for every step of the generation: what compute and skip read.
        self._cond, self._uncond, self._size = cond, uncond, _x_size(latents)
        sigmas, text_encodings, negative_encodings, _ = inputs
        return self._prelude_fn(
            latents,
            timestep,
            sigmas,
            (text_encodings, cond.x_freqs_cis, cond.cap_emb, cond.freqs_cis),
            None if uncond is None or shared else (negative_encodings, uncond.x_freqs_cis),
        )

    def _prelude_parts(
        self,
        latents: mx.array,
        timestep: mx.array,
        sigmas: mx.array,
        cond: tuple[mx.array, ...],
        uncond: tuple[mx.array, ...] | None,
    ) -> tuple[Any, ...]:
        tr = self.tr
        feats, x_freqs_cis, cap_emb, freqs_cis = cond
        t_emb = _time_embedding(tr, timestep, sigmas)
        x_cond = _image(tr, latents, t_emb, feats, x_freqs_cis)
        x_uncond = None if uncond is None else _image(tr, latents, t_emb, *uncond)
        if not self.reads_signal:
            return t_emb, x_cond, x_uncond
        unified = mx.concatenate([x_cond, cap_emb], axis=1)
        attn_mask = mx.ones((1, unified.shape[1]), dtype=mx.bool_)
        first = tr.layers[0](x=unified, attn_mask=attn_mask, freqs_cis=freqs_cis, t_emb=t_emb)
        signal = first - unified
        if self.probes:  # the probe reads the image tokens
            signal = signal[:, : x_cond.shape[1]]
        return t_emb, x_cond, x_uncond, first, signal

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
        x_cond: mx.array,
        x_uncond: mx.array | None,
        first: mx.array | None,
        cond: tuple[mx.array, mx.array],
        uncond: tuple[mx.array, mx.array] | None,
        guidance: float,
        x_size: tuple[int, int, int],
    ) -> tuple[mx.array, ...]:
        x_len = x_cond.shape[1]
        unified = mx.concatenate([x_cond, cond[0]], axis=1)
        out_cond = self._main_layers(unified, cond[1], t_emb, first)[:, :x_len]
        noise = self._head(out_cond, t_emb, x_size)
        # The probe's conditional residual is over layer 0's output, TeaCache's over its input.
        residual = out_cond - (first[:, :x_len] if self.probes and first is not None else x_cond)
        if uncond is None or x_uncond is None:
            return noise, residual
        unified = mx.concatenate([x_uncond, uncond[0]], axis=1)
        out_uncond = self._main_layers(unified, uncond[1], t_emb, None)[:, :x_len]
        negative_noise = self._head(out_uncond, t_emb, x_size)
        return noise + guidance * (noise - negative_noise), residual, out_uncond - x_uncond

    def _tail(
        self,
        t_emb: mx.array,
        x_cond: mx.array,
        cond: mx.array,
        x_uncond: mx.array | None,
        uncond: mx.array | None,
        guidance: float,
        x_size: tuple[int, int, int],
    ) -> mx.array:
        # ``x_cond``: the image tokens' input, or layer 0's output over every token (the probe).
        noise = self._head(x_cond[:, : cond.shape[1]] + cond, t_emb, x_size)
        if x_uncond is None or uncond is None:
            return noise
        return noise + guidance * (noise - self._head(x_uncond + uncond, t_emb, x_size))

    def _x_uncond(self, pre: Any, inputs: tuple[Any, ...]) -> mx.array | None:
        if inputs[2] is None:
            return None
        return pre[1] if pre[2] is None else pre[2]  # None: the branches share the refiner

    def body_outputs(self, pre: Any, inputs: tuple[Any, ...]) -> tuple[mx.array, ...]:
        """``(noise, residual_cond[, residual_uncond])`` of a computed step."""
        cond, uncond = self._cond, self._uncond
        assert cond is not None  # the prelude ran first
        return self.body(
            pre[0],
            pre[1],
            self._x_uncond(pre, inputs),
            pre[3] if self.reads_signal else None,
            (cond.cap_emb, cond.freqs_cis),
            None if uncond is None else (uncond.cap_emb, uncond.freqs_cis),
            inputs[3],
            self._size,
        )

    def compute(self, pre: Any, inputs: tuple[Any, ...], store: bool) -> mx.array:
        if self.records:  # an observer: the probe's trace on the image tokens (it never skips)
            self.gate.record_first_block(pre[4][:, : pre[1].shape[1]])
        noise, *residuals = self.body_outputs(pre, inputs)
        if store:
            self.keep(residuals)
        return noise

    def skip(self, pre: Any, inputs: tuple[Any, ...]) -> mx.array:
        x_uncond = self._x_uncond(pre, inputs)
        cond, uncond = self.residuals(cfg=x_uncond is not None)
        # The probe's conditional residual is over layer 0's output (its image tokens).
        base = pre[3] if self.probes else pre[1]
        return self.tail(pre[0], base, cond, x_uncond, uncond, inputs[3], self._size)


def make_predict_factory(
    state: GateState,
) -> Callable[[ZImageTransformer], Callable[..., mx.array]]:
    def factory(transformer: ZImageTransformer) -> Callable[..., mx.array]:
        own = state.own_factory(transformer) if state.own_factory is not None else None
        split = _CompiledZImage(transformer, state) if is_compiled(own) else None
        captions = _Captions(lambda latents, feats: _caption(transformer, latents, feats))
        gate = state.gate

        def predict(
            latents: mx.array,
            timestep: mx.array,
            sigmas: mx.array,
            text_encodings: mx.array,
            negative_encodings: mx.array | None,
            guidance: float,
        ) -> mx.array:
            gating = state.lifecycle.active and gate.needs_signal
            if gating and split is not None and isinstance(timestep, mx.array):
                # The split-compiled gated step (its Python kept short: it runs every step).
                noise = split.step(
                    latents, timestep, (sigmas, text_encodings, negative_encodings, guidance)
                )
                if gate.capture_output:
                    state.record(noise)
                return noise
            if not gating:
                # Outside a generation, and at threshold 0: the pipeline's own predict, untouched.
                kw = {
                    "latents": latents,
                    "timestep": timestep,
                    "sigmas": sigmas,
                    "text_encodings": text_encodings,
                    "negative_encodings": negative_encodings,
                    "guidance": guidance,
                }
                if state.gating:
                    gate.decide(None)
                noise = own(**kw) if own is not None else _plain(transformer, kw)
                if state.gating:
                    state.record(noise)
                return noise
            t_emb = _time_embedding(transformer, timestep, sigmas)
            x_size = _x_size(latents)
            cond_caption = captions.of(latents, text_encodings)
            x_cond = _image(transformer, latents, t_emb, text_encodings, cond_caption.x_freqs_cis)
            cond = _stream(transformer, x_cond, cond_caption, t_emb)
            first = _layer(transformer, 0, cond, cond.unified)
            if gate.probes_first_block:  # the probe: the rest of the stack, or its residual
                out = probe_stack(
                    gate,
                    cond.unified,
                    first,
                    lambda: _rest_layers(transformer, cond, first),
                    signal=(first - cond.unified)[:, : cond.x_len],
                )
                noise = _tail(transformer, cond, out, x_size)
                verdict = gate.decide(None)  # the conditional branch's, for the other branch
            else:
                # Never computed for a gate that reads none.
                verdict = gate.decide(first - cond.unified)
                if gate.records_first_block:  # the probe's vanilla trace
                    gate.record_first_block((first - cond.unified)[:, : cond.x_len])
                noise = _tail(
                    transformer, cond, _body(transformer, cond, gate, verdict, COND, first), x_size
                )
            if negative_encodings is not None:
                caption = captions.of(latents, negative_encodings)
                x_uncond = (
                    x_cond
                    if caption.padded_length == cond_caption.padded_length
                    else _image(
                        transformer, latents, t_emb, negative_encodings, caption.x_freqs_cis
                    )
                )
                uncond = _stream(transformer, x_uncond, caption, t_emb)
                negative_noise = _tail(
                    transformer,
                    uncond,
                    _body(transformer, uncond, gate, verdict, UNCOND, None),
                    x_size,
                )
                noise = noise + guidance * (noise - negative_noise)
            state.record(noise)
            return noise

        return predict

    factory.teacache_state = state  # type: ignore[attr-defined]
    return factory


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict_factory(pipeline, gate, family=FAMILY, make_factory=make_predict_factory)
