"""FIBO 2: the anatomy, and the random-weight shell.

mflux 0.24.0 predicts through ``_Fibo2Core._predict(latents, sigma, embeds, negative, guidance,
context_latents)``, a method that calls ``self.transformer`` eagerly once for the caption and,
with classifier-free guidance, again for the negative caption (it never compiles FIBO 2); the
gated step enters at the transformer's call (``app.adapters.entries.install_call``: the first
call of a step is the conditional branch, the second the unconditional one).

``Fibo2Transformer.__call__`` (no context image), in the step's parts:

- once per generation (they read the shapes alone): the clean-token time embedding ``t_clean``
  (of σ = 0) and the image tokens' rotary table;
- once per generation and caption (they read the caption, never the step): the perceiver's gist
  tokens from the first text bundle, their rotary table, the stream's rotary table and its noise
  mask (gist tokens take ``t_clean``'s modulation, image tokens the step's). mflux rebuilds all
  of these at every call; the values are the same, op for op;
- embed: the time embedding ``t_noisy``, patchify, ``x_embedder`` and the two noise refiners over
  the image tokens. None of it reads the caption, so the two CFG branches of a step share one
  (mflux computes it in each call; the values are equal, bit for bit);
- signal (TeaCache's): block 0's modulated image input, ``attention_norm1(x) · (1 + scale_msa)``
  over the image tokens (their rows take the step's modulation; ``attention_norm1`` is per token);
- stream and blocks: ``[gist, image]`` through the 44 blocks, five of which cross-attend to their
  own text bundle;
- tail: the final layer over the image tokens, unpatchified (the residual is kept over the image
  tokens, which the tail reads).

A call with context images (FIBO 2 Edit, issue #41) runs mflux's own forward, ungated.

The shell: mflux's ``Fibo2`` without its constructor, a ``Fibo2Transformer`` with random weights,
its prompt cache filled with random text bundles per prompt (``_encode_prompt`` reads the cache
first: mflux's text encoder is never called), and ``StubVAE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.fibo2.model.fibo2_transformer.fibo2_transformer import Fibo2Transformer

from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.adapters.shells import DEFAULT_PROMPT, _base_shell, _init_weights, _model_config, _random
from app.families.fibo2 import FAMILY, FIBO2_TINY, Fibo2Dims
from app.gate import LiveGate


@dataclass(frozen=True, slots=True)
class _Caption:
    """A caption's step-independent part of the stream, for one generation."""

    embeds: mx.array  # mflux's encoder_hidden_states, the stacked bundles (looked up by identity)
    gist: mx.array  # the perceiver's gist tokens
    freqs_cis: mx.array  # the rotary table of [gist, image]
    noise_mask: mx.array  # True on the image tokens (they take the step's modulation)


class Fibo2Anatomy(CallAnatomy):
    """``rest``: ``(encoder_hidden_states,)`` of the call; the timestep is the call's ``sigma``."""

    tr: Fibo2Transformer
    compiled = False  # mflux runs FIBO 2's forward eagerly

    def __init__(self, transformer: Fibo2Transformer) -> None:
        super().__init__(transformer)
        self._captions: list[_Caption] = []
        self._shapes: dict[str, mx.array] = {}  # t_clean and the image rotary table
        self._latent_shape: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def num_blocks(self) -> int:
        return len(self.tr.layers)

    @property
    def _image_tokens(self) -> int:
        _, _, height, width = self._latent_shape
        patch = self.tr.patch_size
        return (height // patch) * (width // patch)

    def _per_generation(self, latents: mx.array, sigma: mx.array) -> tuple[mx.array, mx.array]:
        """``t_clean`` and the image tokens' rotary table (Fibo2Transformer.__call__)."""
        if not self._shapes:
            tr = self.tr
            t_clean = tr.t_embedder(mx.zeros_like(sigma)).astype(ModelConfig.precision)
            image_freqs = tr.rope_embedder(tr.image_position_ids(latents, None))
            self._shapes = {"t_clean": t_clean, "image_freqs": image_freqs}
        return self._shapes["t_clean"], self._shapes["image_freqs"]

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        # Verbatim from Fibo2Transformer.__call__ (no context latents: no refiner mask).
        tr = self.tr
        t_noisy = tr.t_embedder(timestep * tr.t_scale).astype(ModelConfig.precision)
        t_clean, image_freqs = self._per_generation(latents, timestep)
        tokens = [tr._patchify(latents)]
        hidden_states = tr.x_embedder(mx.concatenate(tokens, axis=1).astype(ModelConfig.precision))
        for block in tr.noise_refiner:
            hidden_states = block(hidden_states, image_freqs, t_noisy, t_clean, None)
        return {"img": hidden_states, "t_noisy": t_noisy, "t_clean": t_clean}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["img"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        block = self.tr.layers[0]
        scale_msa, *_ = block._modulation(head["t_noisy"], None, None)  # the image rows'
        return block.attention_norm1(head["img"]) * scale_msa

    def _caption(self, embeds: mx.array, image_freqs: mx.array) -> _Caption:
        for made in self._captions:
            if made.embeds is embeds:
                return made
        tr = self.tr
        batch = embeds.shape[0]
        num_gist_tokens = tr.perceiver.gist_count(embeds.shape[2])
        gist = tr.perceiver(embeds[:, 0], num_gist_tokens)
        gist_freqs = tr.rope_embedder(
            Fibo2Transformer._coordinate_grid((num_gist_tokens, 1, 1), (1, 0, 0))
        )
        freqs_cis = mx.concatenate([gist_freqs, image_freqs], axis=0)
        image_tokens = self._image_tokens
        noise_mask = Fibo2Transformer._noise_mask(
            batch, num_gist_tokens + image_tokens, num_gist_tokens, image_tokens
        )
        made = _Caption(embeds, gist, freqs_cis, noise_mask)
        self._captions.append(made)
        return made

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        (embeds,) = rest
        caption = self._caption(embeds, self._shapes["image_freqs"])
        return {
            "gist": caption.gist,
            "freqs_cis": caption.freqs_cis,
            "noise_mask": caption.noise_mask,
            "embeds": embeds,
            "t_noisy": head["t_noisy"],
            "t_clean": head["t_clean"],
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> mx.array:
        return mx.concatenate([ctx["gist"], head["img"]], axis=1)

    def blocks(self, ctx: dict[str, Any], state: mx.array, start: int, stop: int) -> mx.array:
        tr = self.tr
        bundle_index = {layer_id: i + 1 for i, layer_id in enumerate(tr.injection_layer_ids)}
        embeds = ctx["embeds"]
        for layer_id in range(start, stop):
            text = embeds[:, bundle_index[layer_id]] if layer_id in bundle_index else None
            state = tr.layers[layer_id](
                state,
                ctx["freqs_cis"],
                ctx["t_noisy"],
                ctx["t_clean"],
                ctx["noise_mask"],
                encoder_hidden_states=text,
            )
        return state

    def tokens(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        gist = ctx["gist"].shape[1]
        return state[:, gist : gist + self._image_tokens]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        tr = self.tr
        batch_size, channels, height, width = self._latent_shape
        patch = tr.patch_size
        out = tr.final_layer(tokens, head["t_noisy"])
        out = out.reshape(batch_size, height // patch, width // patch, channels, patch, patch)
        return out.transpose(0, 3, 1, 4, 2, 5).reshape(batch_size, channels, height, width)

    def branch_call(
        self,
        latents: mx.array,
        sigma: mx.array,
        encoder_hidden_states: mx.array,
        context_latents: list[mx.array] | None = None,
    ) -> StepCall | None:
        if context_latents:
            return None  # FIBO 2 Edit's images: mflux's own forward
        shape = latents.shape
        self._latent_shape = (shape[0], shape[1], shape[2], shape[3])
        return StepCall(latents, sigma, (encoder_hidden_states,))


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=Fibo2Anatomy, transformer_class=Fibo2Transformer
    )


# -- the random-weight shell -------------------------------------------------------------------

NEGATIVE_TOKENS = 400  # the shell's negative caption: past the perceiver's 256-token knee


def shell(
    model_name: str = "fibo2",
    *,
    dims: Fibo2Dims = FIBO2_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    text_tokens: int = 16,
) -> Any:
    """A FIBO 2 shell: each prompt (as mflux formats it) gets ``text_tokens`` tokens of random
    text bundles in the prompt cache, and mflux's default negative caption 400 (past the
    perceiver's 256-token knee: it gets more gist tokens than a short prompt, as a long JSON
    caption does)."""
    from mflux.models.fibo2.model.fibo2_text_encoder.prompt_encoder import Fibo2PromptEncoder
    from mflux.models.fibo2.variants.txt2img.fibo2 import Fibo2

    model_config = _model_config(model_name)
    pipeline = _base_shell(Fibo2, model_config)
    pipeline.prompt_cache = {}
    pipeline.processor = None
    pipeline.text_encoder = None
    pipeline.fonts_dir = None
    mx.random.seed(seed)  # the modules' own init (biases, the gates) draws from the global key
    transformer = Fibo2Transformer(**dims.kwargs(), **model_config.transformer_overrides)
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    # mflux caches a prompt under its formatted caption, and encodes the default negative as is
    lengths = {Fibo2PromptEncoder.format_prompt(p): text_tokens for p in prompts}
    lengths.setdefault(Fibo2PromptEncoder.TEXT_TO_IMAGE_NEGATIVE, NEGATIVE_TOKENS)
    randoms = mx.random.split(mx.random.key(seed + 1), len(lengths))
    for key, (prompt, tokens) in zip(randoms, lengths.items(), strict=True):
        shape = (1, dims.bundles, tokens, dims.cap_feat_dim)
        pipeline.prompt_cache[prompt] = _random(key, shape, dtype)
    return pipeline
