"""Krea 2 (Turbo): its anatomy, compiled where mflux compiles its predict.

mflux 0.24.0 builds ``predict = self._predict(self.transformer, embeds, neg_embeds, guidance)`` once
per generation (the captions' embeddings and the guidance are the closure's) and wraps it in
``mx.compile`` except on base/Pro M1/M2; the gated step enters there
(``app.adapters.entries.install_predict``). ``Krea2Transformer.__call__`` (no control image, no
attention mask) and ``Krea2._predict``, in the step's parts:

- once per generation and caption: the caption's text fusion and MLP (they read the caption
  alone, not the timestep);
- embed: pad and patchify the latents, ``first``;
- signal (TeaCache's): block 0's modulated input over the image tokens, ``(1 + prescale) ·
  prenorm(x) + preshift`` (``prenorm`` is per token) — caption-independent, so one decision
  serves both CFG branches exactly;
- context (per branch): the time embedding ``t`` (``tmlp``) and its projection ``tvec``
  (``tproj``), and the rotary embeddings of ``[text, image]``. Each branch computes its own, as
  each of mflux's transformer calls does: one pair shared by two branches inside one
  ``mx.compile`` trips MLX 0.32.2's compiler (``IndexError: _Map_base::at`` where one modulation
  split feeds two blocks);
- stream and blocks: the joint sequence ``[text, image]`` through the blocks;
- tail: ``last`` (a per-token modulated norm and linear) over the joint sequence, the image
  tokens, unpatchify and crop (so the residual is kept over the joint sequence, and a computed
  step's tail is mflux's op for op); CFG combines ``u + g·(c − u)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
from mflux.models.krea2.model.krea2_transformer.timestep_embedder import Krea2TimestepMLP
from mflux.models.krea2.model.krea2_transformer.transformer import Krea2Transformer

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.families.krea2 import FAMILY, KREA2_TINY, Krea2Dims
from app.gate import LiveGate


class Krea2Anatomy(PredictAnatomy):
    """Built from mflux's factory arguments ``(embeds, neg_embeds, guidance)``; ``rest``: one
    branch's ``(embeds, context)``, the context being the caption's fused stream (built once per
    generation and caption)."""

    tr: Krea2Transformer

    def __init__(self, transformer: Krea2Transformer, *factory_args: Any) -> None:
        super().__init__(transformer, *factory_args)
        self.embeds, self.neg_embeds, self.guidance = factory_args
        self._contexts: list[tuple[mx.array, mx.array]] = []
        self._context_fn: Callable[[mx.array], mx.array] = self._fuse
        self._size = (0, 0)
        self._grid = (0, 0)

    def compile(self, part: Callable[[str, Any], Any]) -> None:
        self._context_fn = part("caption", self._fuse)

    def _fuse(self, embeds: mx.array) -> mx.array:
        tr = self.tr
        return tr.txtmlp(tr.txtfusion(tr._unpack_context(embeds), mask=None))

    def _caption(self, embeds: mx.array) -> tuple[mx.array, mx.array]:
        for made in self._contexts:
            if made[0] is embeds:
                return made
        made = (embeds, self._context_fn(embeds))
        self._contexts.append(made)
        return made

    @property
    def num_blocks(self) -> int:
        return len(self.tr.blocks)

    def _time(self, timestep: mx.array, dtype: mx.Dtype) -> tuple[mx.array, mx.array]:
        """``t`` and ``tvec``, verbatim from Krea2Transformer.__call__."""
        tr = self.tr
        embedding = Krea2TimestepMLP.timestep_embedding(timestep, tr.tdim)
        t = tr.tmlp(embedding[:, None, :].astype(dtype))
        return t, tr.tproj(t)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        tr = self.tr
        x = Krea2Transformer._pad_to_multiple(latents, tr.patch)
        return {"img": tr.first(Krea2Transformer._patchify(x, tr.patch)), "timestep": timestep}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return mx.concatenate([rest[1], head["img"]], axis=1)

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        img = head["img"]
        _, tvec = self._time(head["timestep"], img.dtype)
        block0 = self.tr.blocks[0]
        prescale, preshift, *_ = block0.mod(tvec)
        return (1 + prescale) * block0.prenorm(img) + preshift

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

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, mx.array]:
        img, context = head["img"], rest[1]
        t, tvec = self._time(head["timestep"], img.dtype)
        freqs = self._freqs(img.shape[0], context.shape[1])
        return {"t": t, "tvec": tvec, "freqs": freqs, "caption": context}

    def stream(self, head: dict[str, mx.array], ctx: dict[str, mx.array]) -> mx.array:
        return mx.concatenate([ctx["caption"], head["img"]], axis=1)

    def blocks(self, ctx: dict[str, mx.array], state: mx.array, start: int, stop: int) -> mx.array:
        for block in self.tr.blocks[start:stop]:
            state = block(state, ctx["tvec"], ctx["freqs"], None)
        return state

    def tokens(self, ctx: dict[str, mx.array], state: mx.array) -> mx.array:
        return state

    def image(self, ctx: dict[str, mx.array], state: mx.array) -> mx.array:
        h_, w_ = self._grid
        return state[:, state.shape[1] - h_ * w_ :]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        tr = self.tr
        t, _ = self._time(head["timestep"], tokens.dtype)
        final = tr.last(tokens, t)[:, rest[1].shape[1] :, :]
        h_, w_ = self._grid
        bs, patch = final.shape[0], tr.patch
        out = final.reshape(bs, h_, w_, tr.channels, patch, patch).transpose(0, 3, 1, 4, 2, 5)
        out = out.reshape(bs, tr.channels, h_ * patch, w_ * patch)
        return out[:, :, : self._size[0], : self._size[1]]

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.sigmas[t].reshape(1)  # as Krea2.generate_image passes it

    def step_call(self, latents: mx.array, timestep: mx.array) -> StepCall:
        patch = self.tr.patch
        height, width = latents.shape[-2], latents.shape[-1]
        self._size = (height, width)  # constant within a generation: read while tracing
        self._grid = (-(-height // patch), -(-width // patch))
        cond = self._caption(self.embeds)
        uncond = None if self.neg_embeds is None else self._caption(self.neg_embeds)
        return StepCall(latents, timestep, cond, uncond, self.guidance)

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        return uncond + guidance * (cond - uncond)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=Krea2Anatomy)


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: Krea2Dims = KREA2_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.krea2.model.krea2_transformer.transformer import Krea2Transformer
    from mflux.models.krea2.variants.txt2img.krea2 import Krea2

    pipeline = shells._base_shell(Krea2, shells._model_config(model_name))
    pipeline.prompt_cache = {}
    pipeline.tokenizers = {"qwen3vl": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Krea2Transformer(**dims.kwargs())
    shells._init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    all_prompts = [*prompts, " "]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    table = {
        prompt: shells._random(key, (1, text_tokens, dims.context_dim), dtype)
        for key, prompt in zip(keys, all_prompts, strict=True)
    }
    pipeline._encode_prompts = shells._Krea2Prompts(table)
    return pipeline
