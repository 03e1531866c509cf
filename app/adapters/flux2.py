"""FLUX.2 Klein (4B, 9B, base 4B, base 9B, and the embedded demo): a gated ``predict``.

mflux builds ``predict = self._predict(self.transformer)`` once per ``generate_image`` and wraps it
in ``mx.compile`` except on base/Pro M1/M2. A compiled function would trace the gate's Python
branch once, so the adapter sets an instance attribute ``_predict`` (a factory with mflux's
keyword signature) whose closure keeps the gate outside any compiled code:

- at threshold 0 (and outside a generation) it calls the pipeline's own predict, untouched;
- where the pipeline's own predict is compiled, the gated step is split-compiled
  (app/adapters/compiled.py): compiled prelude, eager decision, compiled body+tail or tail;
- where it is eager (base/Pro M1/M2, the embedded demo), the gated step is the eager re-walk below.

Re-walk of mflux 0.24.0 ``Flux2Transformer.__call__`` (non-kv path) and ``Flux2Klein._predict``:

- prelude: timestep scaling, ``time_guidance_embed`` (guidance None for Klein), ``x_embedder``,
  the double-stream image modulation (every step);
- signal: ``(1 + scale_msa) * transformer_blocks[0].norm1(x) + shift_msa`` — the modulated
  block-0 image input, caption-independent, so one decision serves both CFG branches exactly;
- body (per branch): ``context_embedder``, rotary embeddings, double blocks, concat ``[text,
  image]``, single blocks; residual over the concatenated sequence, one per branch
  (``"cond"``/``"uncond"``);
- tail: slice the image tokens, ``norm_out``, ``proj_out``; CFG combines ``neg + g·(pos − neg)``.

Each CFG branch is built inside ``branch_stream`` (two CPU streams when the caller opened
``concurrent_branches``, as the demo pipeline does on the CPU; otherwise the default stream).

A kv-cache call (edit pipelines) is passed to the plain transformer, ungated.

The block-0 split (the first-block probe, ``common.probe_stack``): ``_first_block`` embeds the
caption, builds the rotary embeddings and runs double block 0; its residual is taken on the image
stream; ``_rest_blocks`` runs double blocks 1.., the concat and the single blocks and returns the
image tokens the tail reads. Each CFG branch runs its own block 0 (it attends to its caption); the
conditional branch decides. Where mflux compiles, ``_CompiledProbeFlux2`` is the same split,
compiled: block 0 in the prelude, the rest in the body, the cached residual in the tail. A vanilla
(observing) pass records the conditional branch's block-0 residual, through the same split where
it is compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.model.flux2_transformer.transformer import Flux2Transformer

from app.adapters.base import Installation
from app.adapters.branch_streams import branch_stream
from app.adapters.common import (
    COND,
    UNCOND,
    GateState,
    install_predict_factory,
    probe_stack,
)
from app.adapters.compiled import SplitStep, counted_compile, is_compiled
from app.families.flux2 import FAMILY
from app.gate import LiveGate, Verdict


@dataclass(frozen=True, slots=True)
class _Prelude:
    hs: mx.array  # embedded image tokens
    temb: mx.array
    mod_img: Any


def _embed(tr: Flux2Transformer, latents: mx.array, timestep: Any) -> tuple[mx.array, mx.array]:
    """``(hs, temb)``: the embedded image tokens and the time embedding. Verbatim from
    Flux2Transformer.__call__ (guidance is None on the Klein predict path)."""
    if not isinstance(timestep, mx.array):
        timestep = mx.array(timestep, dtype=latents.dtype)
    if timestep.ndim == 0:
        timestep = mx.full((latents.shape[0],), timestep, dtype=latents.dtype)
    timestep = timestep.astype(latents.dtype)
    timestep_scale = mx.where(mx.max(timestep) <= 1.0, 1000.0, 1.0).astype(latents.dtype)
    timestep = timestep * timestep_scale
    temb = tr.time_guidance_embed(timestep, None)
    temb = temb.astype(ModelConfig.precision)
    hs = tr.x_embedder(latents)
    return hs, temb


def _prelude(tr: Flux2Transformer, latents: mx.array, timestep: Any) -> _Prelude:
    hs, temb = _embed(tr, latents, timestep)
    return _Prelude(hs=hs, temb=temb, mod_img=tr.double_stream_modulation_img(temb))


def _signal(tr: Flux2Transformer, pre: _Prelude) -> mx.array:
    shift_msa, scale_msa, _ = pre.mod_img[0]
    return (1 + scale_msa) * tr.transformer_blocks[0].norm1(pre.hs) + shift_msa


def _rotary_embeddings(
    tr: Flux2Transformer, latent_ids: mx.array, text_ids: mx.array
) -> tuple[mx.array, mx.array]:
    """mflux's FLUX.2 rotary embeddings for ``[text, image]`` (the eager and compiled bodies share
    it, op for op as mflux's forward computes them)."""
    img_ids = latent_ids[0] if latent_ids.ndim == 3 else latent_ids
    txt_ids = text_ids[0] if text_ids.ndim == 3 else text_ids
    image_rotary_emb = tr.pos_embed(img_ids)
    text_rotary_emb = tr.pos_embed(txt_ids)
    return (
        mx.concatenate([text_rotary_emb[0], image_rotary_emb[0]], axis=0),
        mx.concatenate([text_rotary_emb[1], image_rotary_emb[1]], axis=0),
    )


def _branch(
    tr: Flux2Transformer,
    pre: _Prelude,
    prompt_embeds: mx.array,
    latent_ids: mx.array,
    text_ids: mx.array,
    gate: LiveGate,
    verdict: Verdict,
    branch: str,
) -> mx.array:
    ehs = tr.context_embedder(prompt_embeds)
    text_len = ehs.shape[1]
    if verdict.decision.computes:
        rope = _rotary_embeddings(tr, latent_ids, text_ids)
        mod_txt = tr.double_stream_modulation_txt(pre.temb)
        body_ehs, body_hs = ehs, pre.hs
        for idx, block in enumerate(tr.transformer_blocks):
            body_ehs, body_hs = block(
                hidden_states=body_hs,
                encoder_hidden_states=body_ehs,
                temb_mod_params_img=pre.mod_img,
                temb_mod_params_txt=mod_txt,
                image_rotary_emb=rope,
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
            if idx == 0 and branch == COND and gate.records_first_block:
                gate.record_first_block(body_hs - pre.hs)  # the probe's vanilla trace
        out = mx.concatenate([body_ehs, body_hs], axis=1)
        mod_single = tr.single_stream_modulation(pre.temb)[0]
        for idx, block in enumerate(tr.single_transformer_blocks):
            out = block(
                hidden_states=out,
                temb_mod_params=mod_single,
                image_rotary_emb=rope,
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
        if verdict.store_residual:
            gate.store_residual(out, mx.concatenate([ehs, pre.hs], axis=1), branch)
    else:
        out = gate.reuse(mx.concatenate([ehs, pre.hs], axis=1), branch)
    out = out[:, text_len:, ...]
    out = tr.norm_out(out, pre.temb)
    return tr.proj_out(out)


@dataclass(frozen=True, slots=True)
class _FirstBlock:
    """One branch after double block 0: what the remaining blocks continue from."""

    ehs: mx.array  # the caption stream after block 0
    hs: mx.array  # the image stream after block 0
    text_len: int
    rope: tuple[mx.array, mx.array]
    mod_txt: Any


def _first_block(
    tr: Flux2Transformer,
    hs: mx.array,
    mod_img: Any,
    temb: mx.array,
    prompt_embeds: mx.array,
    latent_ids: mx.array,
    text_ids: mx.array,
) -> _FirstBlock:
    """What must run before the first block (the caption embedding, the rotary embeddings, the
    caption's modulation), then double block 0 (as ``_branch`` runs it)."""
    ehs = tr.context_embedder(prompt_embeds)
    rope = _rotary_embeddings(tr, latent_ids, text_ids)
    mod_txt = tr.double_stream_modulation_txt(temb)
    ehs1, hs1 = tr.transformer_blocks[0](
        hidden_states=hs,
        encoder_hidden_states=ehs,
        temb_mod_params_img=mod_img,
        temb_mod_params_txt=mod_txt,
        image_rotary_emb=rope,
        kv_cache=None,
        kv_cache_layer_idx=0,
    )
    return _FirstBlock(ehs1, hs1, ehs.shape[1], rope, mod_txt)


def _rest_blocks(
    tr: Flux2Transformer, first: _FirstBlock, mod_img: Any, temb: mx.array
) -> mx.array:
    """Double blocks 1.., the concat, the single blocks: the image tokens the tail reads."""
    ehs, hs = first.ehs, first.hs
    for idx, block in enumerate(tr.transformer_blocks):
        if idx == 0:
            continue
        ehs, hs = block(
            hidden_states=hs,
            encoder_hidden_states=ehs,
            temb_mod_params_img=mod_img,
            temb_mod_params_txt=first.mod_txt,
            image_rotary_emb=first.rope,
            kv_cache=None,
            kv_cache_layer_idx=idx,
        )
    out = mx.concatenate([ehs, hs], axis=1)
    mod_single = tr.single_stream_modulation(temb)[0]
    for idx, block in enumerate(tr.single_transformer_blocks):
        out = block(
            hidden_states=out,
            temb_mod_params=mod_single,
            image_rotary_emb=first.rope,
            kv_cache=None,
            kv_cache_layer_idx=idx,
        )
    return out[:, first.text_len :, ...]


def _probe_branch(
    tr: Flux2Transformer,
    pre: _Prelude,
    prompt_embeds: mx.array,
    latent_ids: mx.array,
    text_ids: mx.array,
    gate: LiveGate,
) -> mx.array:
    """The conditional branch under the first-block probe (eager)."""
    first = _first_block(tr, pre.hs, pre.mod_img, pre.temb, prompt_embeds, latent_ids, text_ids)
    out = probe_stack(
        gate, pre.hs, first.hs, lambda: _rest_blocks(tr, first, pre.mod_img, pre.temb)
    )
    return tr.proj_out(tr.norm_out(out, pre.temb))


def _plain(
    transformer: Flux2Transformer, kwargs: dict[str, Any], extra: dict[str, Any]
) -> mx.array:
    """mflux's predict body, eager (no gate): used at threshold 0 and outside a generation."""
    with branch_stream(0):
        noise = transformer(
            hidden_states=kwargs["latents"],
            encoder_hidden_states=kwargs["prompt_embeds"],
            timestep=kwargs["timestep"],
            img_ids=kwargs["latent_ids"],
            txt_ids=kwargs["text_ids"],
            guidance=None,
            **({"kv_cache": extra["kv_cache"]} if extra.get("kv_cache") is not None else {}),
        )
    negative_embeds = kwargs["negative_prompt_embeds"]
    negative_ids = kwargs["negative_text_ids"]
    if negative_embeds is not None and negative_ids is not None:
        negative_kv = extra.get("negative_kv_cache") or extra.get("kv_cache")
        with branch_stream(1):
            negative_noise = transformer(
                hidden_states=kwargs["latents"],
                encoder_hidden_states=negative_embeds,
                timestep=kwargs["timestep"],
                img_ids=kwargs["latent_ids"],
                txt_ids=negative_ids,
                guidance=None,
                **({"kv_cache": negative_kv} if negative_kv is not None else {}),
            )
        noise = negative_noise + kwargs["guidance"] * (noise - negative_noise)
    return noise


class _CompiledFlux2(SplitStep):
    """The split-compiled gated step (app/adapters/compiled.py), built once per generation.

    The residual is kept over the image tokens only (``body_out[:, text_len:] - hs``): the tail
    reads nothing else, and ``(concat([ehs, hs]) + r)[:, text_len:]`` is ``hs + r[:, text_len:]``
    element for element, so a skipped step needs neither the caption embedding nor the concat.
    The residual is taken inside the compiled body and added inside the compiled tail.

    ``inputs``: ``(latent_ids, prompt_embeds, text_ids, negative_prompt_embeds,
    negative_text_ids, guidance)``, the negatives None without CFG. The prelude is ``(hs, temb,
    mod_img, signal)`` for a gate that reads the signal, ``(hs, temb)`` for one that does not
    (its body builds the image modulation itself).
    """

    def __init__(self, tr: Flux2Transformer, state: GateState) -> None:
        super().__init__(state)
        self.tr = tr
        self._prelude_fn = counted_compile("prelude", self._prelude_parts, state.traces)
        self.body = counted_compile("body", self._body, state.traces)
        self.tail = counted_compile("tail", self._tail, state.traces)

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.timesteps[t]  # as Flux2Klein.generate_image passes it

    def prelude(self, latents: mx.array, timestep: mx.array, inputs: tuple[Any, ...]) -> Any:
        return self._prelude_fn(latents, timestep)

    def _prelude_parts(self, latents: mx.array, timestep: mx.array) -> tuple[Any, ...]:
        if not self.reads_signal:
            hs, temb = _embed(self.tr, latents, timestep)
            return hs, temb
        pre = _prelude(self.tr, latents, timestep)
        return pre.hs, pre.temb, pre.mod_img, _signal(self.tr, pre)

    def _branch_body(
        self,
        hs: mx.array,
        temb: mx.array,
        mod_img: Any,
        prompt_embeds: mx.array,
        latent_ids: mx.array,
        text_ids: mx.array,
    ) -> mx.array:
        tr = self.tr
        ehs = tr.context_embedder(prompt_embeds)
        text_len = ehs.shape[1]
        rope = _rotary_embeddings(tr, latent_ids, text_ids)
        mod_txt = tr.double_stream_modulation_txt(temb)
        for idx, block in enumerate(tr.transformer_blocks):
            ehs, hs = block(
                hidden_states=hs,
                encoder_hidden_states=ehs,
                temb_mod_params_img=mod_img,
                temb_mod_params_txt=mod_txt,
                image_rotary_emb=rope,
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
        out = mx.concatenate([ehs, hs], axis=1)
        mod_single = tr.single_stream_modulation(temb)[0]
        for idx, block in enumerate(tr.single_transformer_blocks):
            out = block(
                hidden_states=out,
                temb_mod_params=mod_single,
                image_rotary_emb=rope,
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
        return out[:, text_len:, ...]

    def _head(self, out_img: mx.array, temb: mx.array) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(out_img, temb))

    def _body(
        self,
        hs: mx.array,
        temb: mx.array,
        mod_img: Any,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
        negative_prompt_embeds: mx.array | None,
        negative_text_ids: mx.array | None,
        guidance: float,
    ) -> tuple[mx.array, ...]:
        if mod_img is None:
            mod_img = self.tr.double_stream_modulation_img(temb)
        cond = self._branch_body(hs, temb, mod_img, prompt_embeds, latent_ids, text_ids)
        noise = self._head(cond, temb)
        if negative_prompt_embeds is None or negative_text_ids is None:
            return noise, cond - hs
        uncond = self._branch_body(
            hs, temb, mod_img, negative_prompt_embeds, latent_ids, negative_text_ids
        )
        negative_noise = self._head(uncond, temb)
        return negative_noise + guidance * (noise - negative_noise), cond - hs, uncond - hs

    def _tail(
        self,
        hs: mx.array,
        temb: mx.array,
        cond: mx.array,
        uncond: mx.array | None,
        guidance: float,
    ) -> mx.array:
        noise = self._head(hs + cond, temb)
        if uncond is None:
            return noise
        negative_noise = self._head(hs + uncond, temb)
        return negative_noise + guidance * (noise - negative_noise)

    def compute(self, pre: Any, inputs: tuple[Any, ...], store: bool) -> mx.array:
        mod_img = pre[2] if self.reads_signal else None
        noise, *residuals = self.body(pre[0], pre[1], mod_img, *inputs)
        if store:
            self.keep(residuals)
        return noise

    def skip(self, pre: Any, inputs: tuple[Any, ...]) -> mx.array:
        cond, uncond = self.residuals(cfg=inputs[3] is not None)
        return self.tail(pre[0], pre[1], cond, uncond, inputs[5])


def _has_kv_cache(extra: dict[str, Any]) -> bool:
    return any(v is not None for k, v in extra.items() if "kv_cache" in k)


class _CompiledProbeFlux2(_CompiledFlux2):
    """The split-compiled step with the stack split after the conditional branch's double block 0
    (app/adapters/compiled.py), built once per generation: the first-block probe's, and a vanilla
    (observing) pass's, which records that block's residual beside TeaCache's signal (one
    compiled layout for both, so a probe pass resumed from vanilla replays what it would have
    computed).

    1. ``prelude`` (compiled): ``_CompiledFlux2``'s, and the conditional branch's caption
       embedding, rotary embeddings and double block 0: ``(hs, temb, mod_img, ehs1, hs1,
       signal)``, the signal block 0's residual on the image stream (``hs1 - hs``) for the probe,
       TeaCache's for an observer. As for TeaCache, it and the gate's measurement are built at the
       previous step's end and evaluated in its sync: the decision costs no sync of its own;
    2. ``body`` (compiled): the conditional branch's remaining blocks, the unconditional branch's
       whole stack, the heads and CFG; the probe's conditional residual over block 0's output,
       an observer's and every unconditional one over the stack's input; or
    3. ``tail`` (compiled): the heads of block 0's output + the cached residual (the
       unconditional branch: its input + its cached residual), and CFG. A skipped step runs only
       what the decision reads (the prelude and block 0) and this tail.
    """

    def __init__(self, tr: Flux2Transformer, state: GateState) -> None:
        SplitStep.__init__(self, state)
        self.tr = tr
        self.probes = state.gate.probes_first_block
        self.records = state.gate.records_first_block
        self._prelude_fn = counted_compile("probe_prelude", self._probe_prelude, state.traces)
        self.body = counted_compile("probe_body", self._probe_body, state.traces)
        self.tail = counted_compile("tail", self._probe_tail, state.traces)

    def prelude(self, latents: mx.array, timestep: mx.array, inputs: tuple[Any, ...]) -> Any:
        return self._prelude_fn(latents, timestep, inputs[0], inputs[1], inputs[2])

    def _probe_prelude(
        self,
        latents: mx.array,
        timestep: mx.array,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
    ) -> tuple[Any, ...]:
        tr = self.tr
        pre = _prelude(tr, latents, timestep)
        first = _first_block(tr, pre.hs, pre.mod_img, pre.temb, prompt_embeds, latent_ids, text_ids)
        signal = first.hs - pre.hs if self.probes else _signal(tr, pre)
        return pre.hs, pre.temb, pre.mod_img, first.ehs, first.hs, signal

    def _probe_body(
        self,
        hs: mx.array,
        temb: mx.array,
        mod_img: Any,
        ehs1: mx.array,
        hs1: mx.array,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
        negative_prompt_embeds: mx.array | None,
        negative_text_ids: mx.array | None,
        guidance: float,
    ) -> tuple[mx.array, ...]:
        tr = self.tr
        # Recomputed here as ``_first_block`` computes them (cheap, and no arrays across calls).
        rope = _rotary_embeddings(tr, latent_ids, text_ids)
        first = _FirstBlock(ehs1, hs1, ehs1.shape[1], rope, tr.double_stream_modulation_txt(temb))
        cond = _rest_blocks(tr, first, mod_img, temb)
        noise = self._head(cond, temb)
        residual = cond - (hs1 if self.probes else hs)
        if negative_prompt_embeds is None or negative_text_ids is None:
            return noise, residual
        uncond = self._branch_body(
            hs, temb, mod_img, negative_prompt_embeds, latent_ids, negative_text_ids
        )
        negative_noise = self._head(uncond, temb)
        return negative_noise + guidance * (noise - negative_noise), residual, uncond - hs

    def _probe_tail(
        self,
        hs: mx.array,
        hs1: mx.array,
        temb: mx.array,
        cond: mx.array,
        uncond: mx.array | None,
        guidance: float,
    ) -> mx.array:
        noise = self._head(hs1 + cond, temb)
        if uncond is None:
            return noise
        negative_noise = self._head(hs + uncond, temb)
        return negative_noise + guidance * (noise - negative_noise)

    def compute(self, pre: Any, inputs: tuple[Any, ...], store: bool) -> mx.array:
        if self.records:  # an observer: the probe's trace (it never skips)
            self.gate.record_first_block(pre[4] - pre[0])
        noise, *residuals = self.body(*pre[:5], *inputs)
        if store:
            self.keep(residuals)
        return noise

    def skip(self, pre: Any, inputs: tuple[Any, ...]) -> mx.array:
        cond, uncond = self.residuals(cfg=inputs[3] is not None)
        return self.tail(pre[0], pre[4], pre[1], cond, uncond, inputs[5])


def make_predict_factory(state: GateState) -> Callable[[Flux2Transformer], Callable[..., mx.array]]:
    def factory(transformer: Flux2Transformer) -> Callable[..., mx.array]:
        own = state.own_factory(transformer) if state.own_factory is not None else None
        gate = state.gate
        split: _CompiledFlux2 | None = None
        if is_compiled(own):
            # The stack split after block 0 where the gate reads that block (the probe) or
            # records it (a vanilla pass): one compiled layout for both, so a probe pass resumed
            # from vanilla replays what it would have computed.
            probed = gate.probes_first_block or gate.records_first_block
            split = (_CompiledProbeFlux2 if probed else _CompiledFlux2)(transformer, state)

        def predict(
            latents: mx.array,
            latent_ids: mx.array,
            prompt_embeds: mx.array,
            text_ids: mx.array,
            negative_prompt_embeds: mx.array | None,
            negative_text_ids: mx.array | None,
            guidance: float,
            timestep: mx.array,
            **extra: Any,
        ) -> mx.array:
            cfg = negative_prompt_embeds is not None and negative_text_ids is not None
            kv_cache = bool(extra) and _has_kv_cache(extra)
            if split is not None and state.lifecycle.active and gate.needs_signal and not kv_cache:
                # The split-compiled gated step (its Python kept short: it runs every step).
                noise = split.step(
                    latents,
                    timestep,
                    (
                        latent_ids,
                        prompt_embeds,
                        text_ids,
                        negative_prompt_embeds if cfg else None,
                        negative_text_ids if cfg else None,
                        guidance,
                    ),
                )
                if gate.capture_output:
                    state.record(noise)
                return noise
            kwargs = {
                "latents": latents,
                "latent_ids": latent_ids,
                "prompt_embeds": prompt_embeds,
                "text_ids": text_ids,
                "negative_prompt_embeds": negative_prompt_embeds,
                "negative_text_ids": negative_text_ids,
                "guidance": guidance,
                "timestep": timestep,
            }
            if kv_cache:
                return _plain(transformer, kwargs, extra)
            if not state.gating or not gate.needs_signal:
                # Outside a generation, and at threshold 0: the pipeline's own predict, untouched
                # (mflux's compiled one where mflux compiles, the demo's eager one for the demo).
                if state.gating:
                    gate.decide(None)
                noise = own(**kwargs) if own is not None else _plain(transformer, kwargs, extra)
                if state.gating:
                    state.record(noise)
                return noise
            pre = _prelude(transformer, latents, timestep)
            if gate.probes_first_block:  # the first-block probe: split after block 0
                with branch_stream(0):
                    noise = _probe_branch(
                        transformer, pre, prompt_embeds, latent_ids, text_ids, gate
                    )
                verdict = gate.decide(None)  # the conditional branch's, for the other branch
            else:
                verdict = gate.decide(_signal(transformer, pre))
                with branch_stream(0):
                    noise = _branch(
                        transformer, pre, prompt_embeds, latent_ids, text_ids, gate, verdict, COND
                    )
            if negative_prompt_embeds is not None and negative_text_ids is not None:
                with branch_stream(1):
                    negative_noise = _branch(
                        transformer,
                        pre,
                        negative_prompt_embeds,
                        latent_ids,
                        negative_text_ids,
                        gate,
                        verdict,
                        UNCOND,
                    )
                noise = negative_noise + guidance * (noise - negative_noise)
            state.record(noise)
            return noise

        return predict

    factory.teacache_state = state  # type: ignore[attr-defined]  # marks an installed gate
    return factory


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict_factory(pipeline, gate, family=FAMILY, make_factory=make_predict_factory)
