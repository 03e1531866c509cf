"""MOSS-Image (SFT and Base): its anatomy (eager, as mflux runs it) and its random-weight shell.

mflux 0.24.0 ``MOSSImage.generate_image`` calls ``self._predict(...)`` once per step, which calls
``self.transformer(latents, timestep, positive)`` and, under CFG (guidance not 1), again with the
negative caption and ``skip_layers`` (layer 22 by default: the unconditional branch skips it);
nothing is ``mx.compile``'d. The gated step enters at the transformer's call
(``app.adapters.entries.install_call``: the first call of a step is the conditional branch, the
repeat the unconditional one). ``MOSSImageTransformer.__call__``, in the step's parts:

- the call's own prelude, verbatim (``branch_call``): the shared block modulation and the head's
  from the timestep (a host float: mflux computes its sinusoid in float64 with numpy);
- embed: the latents as tokens, ``video_embedder``;
- signal (TeaCache's): block 0's modulated input over the image tokens, ``norm1(x) · (1 +
  scale) + shift`` (``norm1`` is per token; the modulation reads the time only) —
  caption-independent, so the conditional call's decision serves the unconditional one exactly;
- context (per branch): the rotary embedding of the image grid and the caption, and the
  caption's stream through ``text_embedder`` (its projection and two text blocks read the caption
  and the rotary embedding only, no timestep: built once per generation and caption, where mflux
  rebuilds the same values every call);
- stream and blocks: ``[image, caption]`` through the layers, the branch's ``skip_layers``
  skipped;
- tail: the image tokens, ``final_norm_video``, the head's shift and scale, ``final_linear_video``,
  back to the latent grid. The residual is kept over the image tokens the tail reads (the
  caption's tokens after the last layer are never read).

mflux's own step reuse (``step_cache_ratio``, a fixed schedule chosen before the loop) is not the
studio's: the studio passes none, and with it mflux skips the transformer call itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.moss_image.model.moss_image_transformer.moss_image_transformer import (
    MOSSImageTransformer,
)

from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.adapters.shells import DEFAULT_PROMPT, _base_shell, _init_weights, _model_config, _random
from app.families.moss_image import FAMILY, MOSS_IMAGE_TINY, MOSSImageDims
from app.gate import LiveGate


class MOSSImageAnatomy(CallAnatomy):
    """``rest``: one branch's ``{"caption", "skip"}`` (its caption, the layers it skips); the
    timestep as ``embed`` takes it: ``(modulation, head)``, mflux's ``_modulation``."""

    tr: MOSSImageTransformer
    compiled = False  # mflux never compiles MOSS-Image

    def __init__(self, transformer: MOSSImageTransformer) -> None:
        super().__init__(transformer)
        self._grid = (0, 0)  # the latent grid: fixed in a generation
        self._ropes: dict[tuple[int, int, int, mx.Dtype], mx.array] = {}
        self._texts: list[tuple[mx.array, mx.array, mx.array]] = []  # (caption, rope, stream)

    @property
    def num_blocks(self) -> int:
        return len(self.tr.layers)

    def embed(self, latents: mx.array, timestep: Any, rest: dict[str, Any]) -> dict[str, Any]:
        modulation, head = timestep
        batch, channels, height, width = latents.shape
        video = latents.reshape(batch, channels, height * width).transpose(0, 2, 1)
        video = self.tr.video_embedder(video.astype(modulation.dtype))
        return {"video": video, "modulation": modulation, "head": head}

    def stream_tokens(self, head: dict[str, Any], rest: dict[str, Any]) -> mx.array:
        return head["video"]

    def signal(self, head: dict[str, Any], ctx: Any, before: Any, after: Any) -> mx.array:
        modulation = head["modulation"]
        shift, scale = modulation[:, 0:1], modulation[:, 1:2]
        return self.tr.layers[0].norm1(head["video"]) * (1 + scale) + shift

    def _rope(self, text_length: int, dtype: mx.Dtype) -> mx.array:
        height, width = self._grid
        key = (height, width, text_length, dtype)
        if key not in self._ropes:
            self._ropes[key] = self.tr.rope(height, width, text_length, dtype=dtype)
        return self._ropes[key]

    def _text(self, caption: mx.array, rope: mx.array) -> mx.array:
        """The caption's stream, as ``text_embedder`` builds it: once per caption."""
        for made, made_rope, stream in self._texts:
            if made is caption and made_rope is rope:
                return stream
        tokens = self._grid[0] * self._grid[1]
        stream = self.tr.text_embedder(caption, rope[:, tokens:])
        self._texts.append((caption, rope, stream))
        return stream

    def context(self, head: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
        caption = rest["caption"]
        rope = self._rope(caption.shape[1], head["video"].dtype)
        return {
            "rope": rope,
            "text": self._text(caption, rope),
            "modulation": head["modulation"],
            "skip": rest["skip"],
        }

    def stream(self, head: dict[str, Any], ctx: dict[str, Any]) -> mx.array:
        return mx.concatenate([head["video"], ctx["text"]], axis=1)

    def blocks(self, ctx: dict[str, Any], state: mx.array, start: int, stop: int) -> mx.array:
        rope, modulation, skip = ctx["rope"], ctx["modulation"], ctx["skip"]
        for index in range(start, stop):
            if index not in skip:
                state = self.tr.layers[index](state, rope, modulation)
        return state

    def tokens(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        return state[:, : self._grid[0] * self._grid[1]]

    def tail(self, head: dict[str, Any], tokens: mx.array, rest: dict[str, Any]) -> mx.array:
        tr = self.tr
        shift_scale = head["head"]
        x = tr.final_norm_video(tokens)
        x = x * (1 + shift_scale[:, 1:2]) + shift_scale[:, 0:1]
        x = tr.final_linear_video(x)
        batch = x.shape[0]
        height, width = self._grid
        return x.transpose(0, 2, 1).reshape(batch, tr.latent_channels, height, width)

    def branch_call(
        self,
        hidden_states: mx.array,
        timestep: float,
        encoder_hidden_states: mx.array,
        skip_layers: frozenset[int] = frozenset(),
    ) -> StepCall:
        batch, _, height, width = hidden_states.shape
        self._grid = (height, width)  # constant within a generation
        modulation = self.tr._modulation(timestep, batch)  # verbatim: mflux's host sinusoid
        rest = {"caption": encoder_hidden_states, "skip": frozenset(skip_layers)}
        return StepCall(hidden_states, modulation, rest)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline,
        gate,
        family=FAMILY,
        anatomy=MOSSImageAnatomy,
        transformer_class=MOSSImageTransformer,
    )


# -- the random-weight shell ------------------------------------------------------------------


def shell(
    model_name: str = "moss-image-sft",
    *,
    dims: MOSSImageDims = MOSS_IMAGE_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's ``MOSSImage`` with a random-weight transformer and random Qwen3.5 states per
    prompt in its prompt cache (mflux reads the cache first); the negative branch's caption is
    mflux's default, the empty prompt, half as long (mflux pads no caption: the two branches'
    text lengths differ)."""
    from mflux.models.moss_image.variants.txt2img.moss_image import MOSSImage

    pipeline = _base_shell(MOSSImage, _model_config(model_name))
    pipeline.prompt_cache = {}
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.bake_lora = MOSSImage.DEFAULT_BAKE_LORA
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = MOSSImageTransformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    keys = mx.random.split(mx.random.key(seed + 1), len(prompts) + 1)
    for key, prompt in zip(keys, prompts, strict=False):
        pipeline.prompt_cache[prompt] = _random(key, (1, text_tokens, dims.text_dim), dtype)
    negative = (1, max(1, text_tokens // 2), dims.text_dim)
    pipeline.prompt_cache.setdefault("", _random(keys[-1], negative, dtype))
    return pipeline
