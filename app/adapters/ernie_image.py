"""ERNIE-Image (base and Turbo): its anatomy, compiled where mflux compiles its predict, and its
random-weight shell.

mflux 0.24.0 builds ``predict = self._predict(self.transformer, text_bth, text_lens, latents)``
once per generation (the rotary tables and the attention mask, ``get_pos_encoding``, are the
closure's) and wraps it in ``mx.compile`` except on base/Pro M1/M2; the gated step enters there
(``app.adapters.entries.install_predict``). With classifier-free guidance (guidance above 1)
mflux runs **one** transformer call of batch 2, ``[negative, prompt]`` (the captions padded to
the longer one, each row masked and positioned by its own length), and splits its output. The
anatomy keeps that batch: the two branches are the batch's rows, one call as in mflux, so an
observing pass is op for op mflux's forward. A step is then one branch in the gated step's
terms, and each CFG branch's residual is its own row of the batch's.

``ErnieTransformer.__call__`` and ``ErnieImage._predict``, in the step's parts:

- embed: ``timestep = sigma · 1000`` broadcast over the batch, the latents repeated for the batch
  (CFG), ``x_embedder`` over the image (patch 1: one token per latent pixel);
- signal (TeaCache's): block 0's modulated image input, ``adaLN_sa_ln(x) · (1 + scale_msa) +
  shift_msa`` over the image tokens of the prompt's row (the conditional branch decides for
  both, as in every family); ``adaLN_sa_ln`` is per token, so this is mflux's block-0 input
  over those tokens;
- context: ``text_proj`` of the captions, the time embedding ``c`` and its six modulations;
- stream and blocks: ``[image, text]`` through the blocks, with mflux's rotary tables and mask;
- tail: the image tokens (the first ``H·W``) through ``final_norm`` (``c``-modulated), cast to the
  latents' dtype, ``final_linear``, unpatchify; with CFG, ``u + g·(c − u)`` over the rows.

The first block's residual (the first-block probe) is read on the prompt's row too (``image``).

The residual stream runs float32 at any weight dtype: ``c`` comes from a float32 timestep
embedding, so block 0's ``x·(1 + scale) + shift`` promotes it (families-probe: 2.7× FIBO's
forward at the same size). That is mflux's numerics, kept by default. ``STREAM_DTYPE_ATTR`` on
the transformer (say ``mx.bfloat16``) casts the six modulations to that dtype instead, so the
stream stays in the weights' dtype: an opt-in, off by default, not offered in the window (its
distance from mflux's output on random weights is measured by ``lab/bench/ernie_stream.py``; no
real-weight tolerance exists yet). It applies to every gated pass, the vanilla observer's
included; at threshold 0 mflux's own predict runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.ernie_image.model.ernie_transformer.timestep_embedder import (
    get_timestep_embedding,
)
from mflux.models.ernie_image.model.ernie_transformer.transformer import ErnieTransformer
from mlx import nn

from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.adapters.shells import (
    DEFAULT_PROMPT,
    _base_shell,
    _init_weights,
    _model_config,
    _random,
)
from app.families.ernie_image import ERNIE_TINY, FAMILY, ErnieDims
from app.gate import LiveGate

# The transformer attribute that opts into a residual stream of that dtype (None or absent:
# mflux's float32 stream).
STREAM_DTYPE_ATTR = "teacache_stream_dtype"


class ErnieAnatomy(PredictAnatomy):
    """Built from mflux's factory arguments ``(text_bth, text_lens, latents)``; ``rest``: the
    step's ``(text_bth, text_lens)``, one row per branch (``[negative, prompt]`` with CFG)."""

    tr: ErnieTransformer

    def __init__(self, transformer: ErnieTransformer, *factory_args: Any) -> None:
        super().__init__(transformer, *factory_args)
        text_bth, text_lens, latents = factory_args
        height, width = latents.shape[-2:]
        # mflux's own factory ran first and cached these for the generation: the same arrays
        self.cos, self.sin, self.mask = transformer.get_pos_encoding(
            B=text_bth.shape[0], H=height, W=width, T=text_bth.shape[1], text_lens=text_lens
        )
        self.stream_dtype: mx.Dtype | None = getattr(transformer, STREAM_DTYPE_ATTR, None)
        self._grid = (height, width)
        self._dtype = latents.dtype
        self._guidance = 1.0

    @property
    def num_blocks(self) -> int:
        return len(self.tr.layers)

    def _time(self, timestep: mx.array) -> mx.array:
        """``c``, verbatim from ErnieTransformer.__call__."""
        t_emb = get_timestep_embedding(timestep.astype(mx.float32), self.tr.hidden_size)
        return self.tr.time_embedding(t_emb)

    def _modulations(self, timestep: mx.array) -> tuple[mx.array, ...]:
        """``temb``: shift, scale, gate (attention), shift, scale, gate (MLP), each (B, 1, D)."""
        adaln_out = self.tr.adaln_modulation(nn.silu(self._time(timestep)))
        pieces = [p[:, None, :] for p in mx.split(adaln_out, 6, axis=-1)]
        if self.stream_dtype is not None:
            pieces = [p.astype(self.stream_dtype) for p in pieces]
        return tuple(pieces)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        batch = rest[0].shape[0]
        hidden = latents if batch == 1 else mx.concatenate([latents, latents], axis=0)
        return {
            "img": self.tr.x_embedder(hidden.transpose(0, 2, 3, 1)),
            "timestep": mx.broadcast_to(timestep * 1000, (batch,)),
        }

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["img"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        shift_msa, scale_msa, *_ = self._modulations(head["timestep"][-1:])
        return self.tr.layers[0].adaLN_sa_ln(head["img"][-1:]) * (1 + scale_msa) + shift_msa

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        return {
            "text": self.tr.text_proj(rest[0]),
            "temb": self._modulations(head["timestep"]),
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> mx.array:
        return mx.concatenate([head["img"], ctx["text"]], axis=1)

    def blocks(self, ctx: dict[str, Any], state: mx.array, start: int, stop: int) -> mx.array:
        for layer in self.tr.layers[start:stop]:
            state = layer(state, self.cos, self.sin, ctx["temb"], self.mask)
        return state

    def tokens(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        height, width = self._grid
        return state[:, : height * width, :]

    def image(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        return self.tokens(ctx, state)[-1:]  # the prompt's row

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        tr = self.tr
        img = tr.final_norm(tokens, self._time(head["timestep"])).astype(self._dtype)
        patches = tr.final_linear(img)
        batch, (height, width), patch = patches.shape[0], self._grid, tr.patch_size
        out = patches.reshape(batch, height, width, patch, patch, tr.out_channels)
        out = out.transpose(0, 5, 1, 3, 2, 4)
        out = out.reshape(batch, tr.out_channels, height * patch, width * patch)
        if batch == 1:
            return out
        uncond, cond = out[:1], out[1:]
        return uncond + self._guidance * (cond - uncond)

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.sigmas[t].reshape((1,))  # as ErnieImage.generate_image passes it

    def step_call(
        self,
        latents: mx.array,
        sigma: mx.array,
        text_bth: mx.array,
        text_lens: mx.array,
        guidance: float,
    ) -> StepCall:
        self._guidance = guidance  # constant within a generation: read while tracing
        return StepCall(latents, sigma, (text_bth, text_lens))


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=ErnieAnatomy)


# ---------------------------------------------------------------------------------------------
# The random-weight shell: ``ErnieImage`` built without its constructor, its transformer at
# ``dims``, mflux's own prompt batching over a stub tokenizer and text encoder.


class _StubTokens:
    def __init__(self, input_ids: mx.array) -> None:
        self.input_ids = input_ids
        self.attention_mask = mx.ones(input_ids.shape, dtype=mx.int32)


class _StubTokenizer:
    """Stands in for mflux's tokenizer: a prompt becomes its row in the table, as many tokens
    as the table gives it."""

    def __init__(self, lengths: dict[str, int]) -> None:
        self.index = {prompt: i for i, prompt in enumerate(lengths)}
        self.lengths = lengths

    def tokenize(self, prompt: str, max_length: int | None = None) -> _StubTokens:
        return _StubTokens(mx.full((1, self.lengths[prompt]), self.index[prompt], dtype=mx.int32))


class _StubTextEncoder:
    """Stands in for ``ErnieMistralTextEncoder``: the table's hidden states of the prompt."""

    def __init__(self, table: list[mx.array]) -> None:
        self.table = table

    def __call__(self, input_ids: mx.array, attention_mask: mx.array) -> mx.array:
        row: int = input_ids[0, 0].tolist()  # type: ignore[assignment]
        return self.table[row]


def shell(
    model_name: str = "ernie-image-turbo",
    *,
    dims: ErnieDims = ERNIE_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's real ``_encode_prompts`` runs (its cache, its CFG pair ``[negative, prompt]`` with
    " " for no negative, its padding to the longer caption) over stub tokens: each prompt
    ``text_tokens`` long, the blank negative 2 (a BOS and a space, as a real tokenizer gives), so
    the CFG pair pads and masks one row as mflux's does."""
    from mflux.models.ernie_image.variants.txt2img.ernie_image import ErnieImage

    model_config = _model_config(model_name)
    pipeline = _base_shell(ErnieImage, model_config)
    pipeline.prompt_cache = {}
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = ErnieTransformer(**{**model_config.transformer_overrides, **dims.kwargs()})
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    lengths = {prompt: text_tokens for prompt in prompts}
    lengths[" "] = 2
    keys = mx.random.split(mx.random.key(seed + 1), len(lengths))
    table = [
        _random(key, (1, length, dims.text_in_dim), dtype)
        for key, length in zip(keys, lengths.values(), strict=True)
    ]
    pipeline.tokenizers = {"ernie": _StubTokenizer(lengths)}
    pipeline.text_encoder = _StubTextEncoder(table)
    return pipeline
