"""Krea 2 (Turbo): a gated ``predict``, split-compiled where mflux compiles its own.

mflux 0.24.0 builds ``predict = self._predict(self.transformer, embeds, neg_embeds, guidance)`` once
per generation (the captions' embeddings and the guidance are the closure's) and wraps it in
``mx.compile`` except on base/Pro M1/M2. The adapter sets an instance attribute ``_predict`` with
that signature whose closure keeps the gate outside any compiled code:

- at threshold 0 (and outside a generation) it calls mflux's own predict, untouched;
- otherwise one step is: prelude, the decision (eager), then the body and tail of each CFG branch
  or the tail of input + cached residual; compiled (app/adapters/compiled.py) where mflux's own
  predict is, eager where it is not.

Re-walk of mflux 0.24.0 ``Krea2Transformer.__call__`` (no control image, no attention mask) and
``Krea2._predict``:

- prelude: pad and patchify the latents, ``first``; the time embedding ``t`` (``tmlp``) and its
  projection ``tvec`` (``tproj``), the time-only modulation every block adds its table to (each
  branch recomputes them, as each of mflux's transformer calls does);
- signal: block 0's modulated input over the image tokens, ``(1 + prescale) · prenorm(x) +
  preshift`` (``prenorm`` is per token, so the image part of the joint input is this) —
  caption-independent, so one decision serves both CFG branches exactly;
- body (per branch): the caption's text fusion and MLP, the joint sequence ``[text, image]``, its
  rotary embeddings, the blocks; the residual is kept over the image tokens (the tail is per
  token), one per branch (``"cond"``/``"uncond"``);
- tail: ``last`` (a per-token modulated norm and linear), the image tokens, unpatchify and crop;
  CFG combines ``u + g·(c − u)``.

The block-0 split (the first-block probe): the probe prelude is the prelude plus the conditional
branch's joint sequence through block 0 (``_first_block``); the probe body runs the remaining
blocks (``_rest_blocks``) and the tail, and the unconditional branch whole. The conditional
branch decides on block 0's change of the image tokens and keeps its residual over block 0's
output; the unconditional branch reads that verdict and keeps the whole stack's residual, as under
TeaCache. A vanilla (observing) pass runs the same split and records block 0's change, so a probe
pass resumed from vanilla replays what it would compute; compiled or eager as the plain split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mflux.models.krea2.model.krea2_transformer.timestep_embedder import Krea2TimestepMLP
from mflux.models.krea2.model.krea2_transformer.transformer import Krea2Transformer

from app.adapters.base import Installation
from app.adapters.common import COND, UNCOND, GateState, install_predict_factory
from app.adapters.compiled import counted_compile, is_compiled
from app.families.krea2 import FAMILY
from app.gate import LiveGate


class _Krea2Step:
    """One generation's gated step (its captions and guidance are the generation's), in three
    functions compiled where mflux's own predict is."""

    def __init__(
        self,
        tr: Krea2Transformer,
        embeds: mx.array,
        neg_embeds: mx.array | None,
        guidance: float,
        traces: Counter[str],
        *,
        compiled: bool,
    ) -> None:
        self.tr = tr
        self.embeds = embeds
        self.neg_embeds = neg_embeds
        self.guidance = guidance

        def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            return counted_compile(name, fn, traces) if compiled else fn

        self.prelude = wrap("prelude", self._prelude)
        self.body = wrap("body", self._body)
        self.tail = wrap("tail", self._tail)
        self.probe_prelude = wrap("probe_prelude", self._probe_prelude)
        self.probe_body = wrap("probe_body", self._probe_body)

    # -- the transformer's parts, verbatim from Krea2Transformer.__call__ ----------------------
    def _time(self, timestep: mx.array, dtype: mx.Dtype) -> tuple[mx.array, mx.array]:
        """``t`` and ``tvec``. Each branch computes its own, as each mflux transformer call does:
        one pair shared by two branches inside one ``mx.compile`` trips MLX 0.32.2's compiler
        (``IndexError: _Map_base::at`` where one modulation split feeds two blocks)."""
        tr = self.tr
        embedding = Krea2TimestepMLP.timestep_embedding(timestep, tr.tdim)
        t = tr.tmlp(embedding[:, None, :].astype(dtype))
        return t, tr.tproj(t)

    def _prelude(self, latents: mx.array, timestep: mx.array) -> tuple[mx.array, mx.array]:
        tr = self.tr
        x = Krea2Transformer._pad_to_multiple(latents, tr.patch)
        img = tr.first(Krea2Transformer._patchify(x, tr.patch))
        _, tvec = self._time(timestep, img.dtype)
        block0 = tr.blocks[0]
        prescale, preshift, *_ = block0.mod(tvec)
        return img, (1 + prescale) * block0.prenorm(img) + preshift

    def _unpatchify(self, final: mx.array) -> mx.array:
        tr = self.tr
        h_, w_ = self._grid
        bs, patch = final.shape[0], tr.patch
        out = final.reshape(bs, h_, w_, tr.channels, patch, patch).transpose(0, 3, 1, 4, 2, 5)
        out = out.reshape(bs, tr.channels, h_ * patch, w_ * patch)
        return out[:, :, : self._size[0], : self._size[1]]

    def _joint(
        self, img: mx.array, timestep: mx.array, embeds: mx.array
    ) -> tuple[mx.array, mx.array, mx.array, mx.array, int]:
        """One caption's joint sequence ``[text, image]`` before the blocks: ``t``, ``tvec``, the
        sequence, its rotary embeddings, the caption's length."""
        tr = self.tr
        t, tvec = self._time(timestep, img.dtype)
        context = tr.txtmlp(tr.txtfusion(tr._unpack_context(embeds), mask=None))
        combined = mx.concatenate([context, img], axis=1)
        return t, tvec, combined, self._freqs(img.shape[0], context.shape[1]), context.shape[1]

    def _freqs(self, bs: int, txtlen: int) -> mx.array:
        """The rotary embeddings of ``[text, image]``: text at (0, 0, 0), image at (0, h, w)."""
        h_, w_ = self._grid
        txtpos = mx.zeros((bs, txtlen, 3), dtype=mx.float32)
        gh, gw = mx.meshgrid(
            mx.arange(h_, dtype=mx.float32), mx.arange(w_, dtype=mx.float32), indexing="ij"
        )
        imgids = mx.stack([mx.zeros_like(gh), gh, gw], axis=-1).reshape(1, h_ * w_, 3)
        imgpos = mx.broadcast_to(imgids, (bs, h_ * w_, 3))
        return self.tr.pe_embedder(mx.concatenate([txtpos, imgpos], axis=1))

    def _branch(
        self, img: mx.array, timestep: mx.array, embeds: mx.array
    ) -> tuple[mx.array, mx.array]:
        """One caption's stack over ``[text, image]`` and its tail: the velocity, and the
        blocks' output over the image tokens (for the residual)."""
        tr = self.tr
        t, tvec, combined, freqs, txtlen = self._joint(img, timestep, embeds)
        for block in tr.blocks:
            combined = block(combined, tvec, freqs, None)
        final = tr.last(combined, t)
        return self._unpatchify(final[:, txtlen:, :]), combined[:, txtlen:]

    # -- the block-0 split (the first-block probe) ---------------------------------------------
    def _first_block(self, img: mx.array, timestep: mx.array, embeds: mx.array) -> mx.array:
        """The caption's joint sequence through block 0."""
        _, tvec, combined, freqs, _ = self._joint(img, timestep, embeds)
        return self.tr.blocks[0](combined, tvec, freqs, None)

    def _rest_blocks(self, combined1: mx.array, timestep: mx.array) -> tuple[mx.array, mx.array]:
        """Blocks 1.. from block 0's output and the tail: the velocity, and the image tokens
        after the last block."""
        tr = self.tr
        h_, w_ = self._grid
        bs, txtlen = combined1.shape[0], combined1.shape[1] - h_ * w_
        t, tvec = self._time(timestep, combined1.dtype)
        freqs = self._freqs(bs, txtlen)
        for block in tr.blocks[1:]:
            combined1 = block(combined1, tvec, freqs, None)
        final = tr.last(combined1, t)
        return self._unpatchify(final[:, txtlen:, :]), combined1[:, txtlen:]

    def _probe_prelude(
        self, latents: mx.array, timestep: mx.array, embeds: mx.array
    ) -> tuple[mx.array, ...]:
        img, signal = self._prelude(latents, timestep)
        combined1 = self._first_block(img, timestep, embeds)
        return img, signal, combined1, combined1[:, combined1.shape[1] - img.shape[1] :]

    def _probe_body(
        self,
        combined1: mx.array,
        img: mx.array,
        timestep: mx.array,
        neg_embeds: mx.array | None,
    ) -> tuple[mx.array, ...]:
        v, cond = self._rest_blocks(combined1, timestep)
        if neg_embeds is None:
            return v, cond
        v_neg, uncond = self._branch(img, timestep, neg_embeds)
        return v_neg + self.guidance * (v - v_neg), cond, uncond

    def _body(
        self,
        img: mx.array,
        timestep: mx.array,
        embeds: mx.array,
        neg_embeds: mx.array | None,
    ) -> tuple[mx.array, ...]:
        v, cond = self._branch(img, timestep, embeds)
        if neg_embeds is None:
            return v, cond
        v_neg, uncond = self._branch(img, timestep, neg_embeds)
        return v_neg + self.guidance * (v - v_neg), cond, uncond

    def _head(self, out: mx.array, timestep: mx.array) -> mx.array:
        t, _ = self._time(timestep, out.dtype)
        return self._unpatchify(self.tr.last(out, t))

    def _tail(self, timestep: mx.array, cond: mx.array, uncond: mx.array | None) -> mx.array:
        v = self._head(cond, timestep)
        if uncond is None:
            return v
        v_neg = self._head(uncond, timestep)
        return v_neg + self.guidance * (v - v_neg)

    # -- one step ----------------------------------------------------------------------------
    def step(self, state: GateState, latents: mx.array, timestep: mx.array) -> mx.array:
        gate = state.gate
        patch = self.tr.patch
        height, width = latents.shape[-2], latents.shape[-1]
        self._size = (height, width)  # constant within a generation: read while tracing
        self._grid = (-(-height // patch), -(-width // patch))
        if gate.probes_first_block or gate.records_first_block:
            return self._probe_step(state, latents, timestep)
        img, signal = self.prelude(latents, timestep)
        verdict = gate.decide(signal)
        if verdict.decision.computes:
            v, *outs = self.body(img, timestep, self.embeds, self.neg_embeds)
            if verdict.store_residual:
                for branch, out in zip((COND, UNCOND), outs, strict=False):
                    gate.store_residual(out, img, branch)
            return v
        uncond = gate.reuse(img, UNCOND) if self.neg_embeds is not None else None
        return self.tail(timestep, gate.reuse(img, COND), uncond)

    def _probe_step(self, state: GateState, latents: mx.array, timestep: mx.array) -> mx.array:
        """One step on the block-0 split: the probe decides on block 0's change of the
        conditional branch's image tokens (an observer on TeaCache's signal, recording that
        change); the probe's conditional residual is over block 0's output, an observer's and
        every unconditional one over the stack's input."""
        gate = state.gate
        img, signal, combined1, img1 = self.probe_prelude(latents, timestep, self.embeds)
        if gate.probes_first_block:
            verdict = gate.decide(img1 - img)
        else:  # an observer: TeaCache's signal, and the probe's trace
            verdict = gate.decide(signal)
            gate.record_first_block(img1 - img)
        if verdict.decision.computes:
            v, *outs = self.probe_body(combined1, img, timestep, self.neg_embeds)
            if verdict.store_residual:
                bases = (img1 if gate.probes_first_block else img, img)
                for branch, out, base in zip((COND, UNCOND), outs, bases, strict=False):
                    gate.store_residual(out, base, branch)
            return v
        uncond = gate.reuse(img, UNCOND) if self.neg_embeds is not None else None
        return self.tail(timestep, gate.reuse(img1, COND), uncond)


def make_predict_factory(state: GateState) -> Callable[..., Callable[..., mx.array]]:
    def factory(
        transformer: Krea2Transformer,
        embeds: mx.array,
        neg_embeds: mx.array | None,
        guidance: float,
    ) -> Callable[..., mx.array]:
        own_factory: Any = state.own_factory
        own = own_factory(transformer, embeds, neg_embeds, guidance)
        split = _Krea2Step(
            transformer, embeds, neg_embeds, guidance, state.traces, compiled=is_compiled(own)
        )

        def predict(latents: mx.array, timestep: mx.array) -> mx.array:
            gate = state.gate
            if not state.gating or not gate.needs_signal:
                # Outside a generation, and at threshold 0: mflux's own predict, untouched.
                if state.gating:
                    gate.decide(None)
                v = own(latents=latents, timestep=timestep)
                if state.gating:
                    state.record(v)
                return v
            v = split.step(state, latents, timestep)
            state.record(v)
            return v

        return predict

    factory.teacache_state = state  # type: ignore[attr-defined]  # marks an installed gate
    return factory


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict_factory(pipeline, gate, family=FAMILY, make_factory=make_predict_factory)
