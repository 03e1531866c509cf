"""Qwen-Image 2.1 (base and Turbo): its anatomy, compiled as mflux compiles it.

mflux 0.24.0 ``QwenImage21.generate_image`` calls ``self.transformer(t=, config=, ...)`` once per
step, or twice under true CFG (guidance above 1 *and* a negative prompt: positive, then negative,
combined outside); the gated step enters there (``app.adapters.entries.install_call``).
``Qwen21Transformer.__call__`` builds the caption's stream once per prompt (text tokens are
conditioned at t = 0, so their per-block keys and values never change over the denoising;
``_build_text_cache``) and runs the image tokens through an ``mx.compile``'d ``_image_forward``
against those cached keys and values: mflux has no eager 2.1 forward, so the gated step is always
compiled. The anatomy keeps mflux's uncompiled part verbatim (timestep, geometry, text cache) in
``branch_call``; the step's parts are ``_image_forward``'s:

- embed: the two time-embedding rows (the sampled t, and 0), the shared modulation over the image
  tokens, ``img_in``;
- signal (TeaCache's): block 0's modulated image input ``img_norm1(x) · (1 + scale1)`` —
  caption-independent (the image's modulation row reads the time only), so the positive call's
  decision serves the negative call exactly;
- blocks: each block's image stream against its cached text keys and values;
- tail: ``norm_out`` with the time row's scale, ``proj_out``.

A padded caption (or the text cache switched off) takes mflux's joint-sequence path instead
(``_forward``: text and image tokens together under a block-causal mask): embed adds ``txt_in`` of
the caption and the joint sequence, the blocks run over it, and the tail is ``_forward``'s over
every token, its image tokens returned (so the residual is kept over every token, and a computed
step's tail is mflux's op for op). mflux's 2.1 tokenizer pads to the longest prompt, so a single
caption takes the text-cache path. The path is fixed by the call's ``rest`` (its keys), so each
compiled part traces once per generation and path.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import mlx.core as mx
from mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer import Qwen21Transformer
from mlx import nn

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.families.qwen_image21 import FAMILY, QWEN21_TINY, Qwen21Dims
from app.gate import LiveGate


def _text_kvs(
    tr: Qwen21Transformer,
    encoder_hidden_states: mx.array,
    rope_cos: mx.array,
    rope_sin: mx.array,
    geometry: tuple[int, int, int],
) -> list[tuple[mx.array, mx.array]]:
    """The caption's per-block keys and values, from mflux's cache (verbatim from
    ``Qwen21Transformer.__call__``)."""
    cache = tr._text_caches.get(id(encoder_hidden_states))
    if (
        cache is None
        or cache["geometry"] != geometry
        or cache["embedding"] is not encoder_hidden_states
    ):
        cache = tr._build_text_cache(encoder_hidden_states, rope_cos, rope_sin, geometry)
        while len(tr._text_caches) >= 2:
            tr._text_caches.pop(next(iter(tr._text_caches)))
        tr._text_caches[id(encoder_hidden_states)] = cache
    return cache["text_kvs"]


class Qwen21Anatomy(CallAnatomy):
    """``rest``: the text-cache path's ``{"text_kvs", "cos", "sin"}`` (the image tokens' rotary
    rows), or the joint path's ``{"caption", "cos", "sin", "mask"}`` (every token's rows)."""

    tr: Qwen21Transformer
    compiled = True

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: dict[str, Any]) -> dict[str, Any]:
        # mflux's ``_image_forward`` (and ``_forward``) before its blocks.
        tr = self.tr
        num_image_tokens = latents.shape[1]
        timestep_rows = mx.concatenate([timestep, mx.zeros((1,), dtype=timestep.dtype)])
        temb = tr.time_text_embed(timestep_rows)
        mod1, mod2 = mx.split(tr.modulation(temb), 2, axis=-1)
        x = tr.img_in(latents)
        if "text_kvs" in rest:
            mod1 = mx.broadcast_to(mod1[0][None, None, :], (1, num_image_tokens, mod1.shape[-1]))
            mod2 = mx.broadcast_to(mod2[0][None, None, :], (1, num_image_tokens, mod2.shape[-1]))
            return {"x": x, "temb": temb, "mod1": mod1, "mod2": mod2}
        caption = rest["caption"]
        text_len = caption.shape[1]
        mod1 = Qwen21Transformer._select_modulation_rows(mod1, text_len, num_image_tokens)
        mod2 = Qwen21Transformer._select_modulation_rows(mod2, text_len, num_image_tokens)
        joint = mx.concatenate([tr.txt_in(caption), x], axis=1)
        return {"x": x, "joint": joint, "temb": temb, "mod1": mod1, "mod2": mod2}

    def head_key(self, rest: dict[str, Any]) -> Hashable:
        # The joint path's embedding holds its caption's tokens: one per branch.
        return () if "text_kvs" in rest else id(rest["caption"])

    def stream_tokens(self, head: dict[str, Any], rest: dict[str, Any]) -> mx.array:
        return head["joint"] if "joint" in head else head["x"]

    def signal(self, head: dict[str, Any], ctx: Any, before: Any, after: Any) -> mx.array:
        mod1 = head["mod1"][:, -head["x"].shape[1] :]  # the image tokens' rows
        scale1, _ = mx.split(mod1, 2, axis=-1)
        return self.tr.transformer_blocks[0].img_norm1(head["x"]) * (1 + scale1)

    def context(self, head: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
        return {**rest, "mod1": head["mod1"], "mod2": head["mod2"]}

    def stream(self, head: dict[str, Any], ctx: dict[str, Any]) -> mx.array:
        return head["joint"] if "joint" in head else head["x"]

    def blocks(self, ctx: dict[str, Any], state: mx.array, start: int, stop: int) -> mx.array:
        blocks = self.tr.transformer_blocks[start:stop]
        mod1, mod2, cos, sin = ctx["mod1"], ctx["mod2"], ctx["cos"], ctx["sin"]
        if "text_kvs" in ctx:
            for block, (key, value) in zip(blocks, ctx["text_kvs"][start:stop], strict=True):
                state = block.image_forward(state, key, value, mod1, mod2, cos, sin)
            return state
        mask = ctx["mask"]
        text_len = ctx["caption"].shape[1]
        for block in blocks:
            state = block(state, mod1, mod2, cos, sin, mask, text_len if mask is None else None)
        return state

    def tokens(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        return state

    def image(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        return state if "text_kvs" in ctx else state[:, ctx["caption"].shape[1] :]

    def tail(self, head: dict[str, Any], tokens: mx.array, rest: dict[str, Any]) -> mx.array:
        tr = self.tr
        scale = tr.norm_out.linear(nn.silu(head["temb"]))
        if "text_kvs" in rest:
            scale = mx.broadcast_to(scale[0][None, None, :], (1, tokens.shape[1], scale.shape[-1]))
            return tr.proj_out(tr.norm_out(tokens, scale))
        text_len = rest["caption"].shape[1]
        scale = Qwen21Transformer._select_modulation_rows(
            scale, text_len, tokens.shape[1] - text_len
        )
        return tr.proj_out(tr.norm_out(tokens, scale))[:, text_len:]

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return Qwen21Transformer._compute_timestep(t, config)  # as the transformer's call does

    def branch_call(
        self,
        t: int | float,
        config: Any,
        hidden_states: mx.array,
        encoder_hidden_states: mx.array,
        encoder_hidden_states_mask: mx.array | None = None,
    ) -> StepCall:
        # mflux's uncompiled part, verbatim: the timestep, the geometry, the text path's choice
        tr = self.tr
        timestep = Qwen21Transformer._compute_timestep(t, config)
        text_len = encoder_hidden_states.shape[1]
        geometry = (text_len, config.height // 16, config.width // 16)
        rope_cos, rope_sin, attn_mask = tr._geometry(
            text_len=text_len,
            latent_height=geometry[1],
            latent_width=geometry[2],
            encoder_hidden_states_mask=encoder_hidden_states_mask,
        )
        if attn_mask is not None or not tr.use_text_cache:
            rest: dict[str, Any] = {
                "caption": encoder_hidden_states,
                "cos": rope_cos,
                "sin": rope_sin,
                "mask": attn_mask,
            }
        else:
            rest = {
                "text_kvs": _text_kvs(tr, encoder_hidden_states, rope_cos, rope_sin, geometry),
                "cos": rope_cos[text_len:],
                "sin": rope_sin[text_len:],
            }
        return StepCall(hidden_states, timestep, rest)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=Qwen21Anatomy, transformer_class=Qwen21Transformer
    )


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: Qwen21Dims = QWEN21_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    negative_prompt: str | None = None,
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's 2.1 samples without CFG unless ``generate_image`` gets a negative prompt and
    guidance above 1; ``negative_prompt`` gets embeddings of its own here for that case."""
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer import Qwen21Transformer
    from mflux.models.qwen21.variants.txt2img.qwen_image_21 import QwenImage21

    pipeline = shells._base_shell(QwenImage21, shells._model_config(model_name))
    pipeline.vae = shells.StubVAE(latent_channels=64, spatial_scale=16)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {"qwen21": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Qwen21Transformer(**dims.kwargs())
    shells._init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    all_prompts = [*prompts, *([negative_prompt] if negative_prompt else [])]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    mask = mx.ones((1, text_tokens), dtype=mx.int32)
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = shells._random(key, (1, text_tokens, dims.context_in_dim), dtype)
        pipeline.prompt_cache[prompt] = (embeds, mask)
    return pipeline
