"""Z-Image (base and Turbo): its anatomy.

mflux 0.24.0 builds ``predict = self._predict(self.transformer)`` once per generation, compiled
except on base/Pro M1/M2; the gated step enters there (``app.adapters.entries.install_predict``).

``ZImageTransformer.__call__`` and ``ZImage._predict``, in the step's parts:

- once per generation and caption (``_Caption``, built by the entry): the caption embedder and
  the context refiner (``ZImageContextBlock`` takes no timestep: its output is the same at every
  step, bit for bit against mflux's every-step walk in tests/adapters/test_adapter_z_image.py),
  and the rotary tables of the image and caption positions (they depend on the shapes alone);
- embed: the time embedding, patchify, the image embedder and the noise refiner. The image
  tokens' positions start after the padded caption, so the two CFG branches' embeddings are the
  same, bit for bit, where their captions pad to the same length: they share one
  (``head_key``);
- context and stream: ``unified = concat([x, caption])`` and its rotary table;
- blocks: the main layers;
- signal (TeaCache's "signal B", as mlx-teacache ships for Z-Image): the residual of the first
  main layer, ``layers[0](unified) − unified`` (``signal_blocks`` 1). The adaLN modulation
  depends on the timestep only, so a modulated-input signal would not see the latents move;
- tail: the final layer over every token, the image tokens, unpatchify, negate (the residual is
  kept over every token, so a skipped step's tail is mflux's, op for op). CFG combines
  ``pos + g·(pos − neg)`` as mflux does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mflux.models.z_image.model.z_image_transformer.transformer import ZImageTransformer

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.families.z_image import FAMILY, Z_IMAGE_TINY, ZImageDims
from app.gate import LiveGate


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


class _Captions:
    """The generation's ``_Caption`` per caption, built on first use."""

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


class ZImageAnatomy(PredictAnatomy):
    """``rest``: ``(sigmas, caption features, (cap_emb, x_freqs_cis, freqs_cis))`` of one
    branch; the caption's part comes from ``_Caption``, built once per generation."""

    tr: ZImageTransformer
    signal_blocks = 1

    def __init__(self, transformer: ZImageTransformer, *factory_args: Any) -> None:
        super().__init__(transformer, *factory_args)
        self.captions = _Captions(self._caption)
        self._size = (0, 0, 0)
        self._caption_fn: Callable[..., tuple[mx.array, ...]] = self._caption_eager

    def compile(self, part: Callable[[str, Any], Any]) -> None:
        self._caption_fn = part("caption", self._caption_eager)

    def _caption_eager(self, latents: mx.array, feats: mx.array) -> tuple[mx.array, ...]:
        return _caption(self.tr, latents, feats)

    def _caption(self, latents: mx.array, feats: mx.array) -> tuple[mx.array, ...]:
        return self._caption_fn(latents, feats)

    @property
    def num_blocks(self) -> int:
        return len(self.tr.layers)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        # Verbatim from ZImageTransformer.__call__: the time embedding, the image embedding and
        # the noise refiner (``cap_feats`` only places the padding, as in mflux's _patchify).
        tr = self.tr
        sigmas, feats, (_, x_freqs_cis, _) = rest
        t_emb = _time_embedding(tr, timestep, sigmas)
        key = f"{tr.patch_size}-{tr.f_patch_size}"
        x_emb, _, _, _, _, x_pad_mask, _ = _patchify(tr, latents, feats)
        x_emb = tr.all_x_embedder[key](x_emb)
        x_emb = mx.where(x_pad_mask[:, None], tr.x_pad_token, x_emb)
        x_attn_mask = mx.ones((1, x_emb.shape[0]), dtype=mx.bool_)
        x_emb = mx.expand_dims(x_emb, axis=0)
        for layer in tr.noise_refiner:
            x_emb = layer(x=x_emb, attn_mask=x_attn_mask, freqs_cis=x_freqs_cis, t_emb=t_emb)
        return {"t_emb": t_emb, "x": x_emb}

    def head_key(self, rest: Any) -> Hashable:
        return rest[2][0].shape[1]  # the padded caption length places the image tokens

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return mx.concatenate([head["x"], rest[2][0]], axis=1)

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, mx.array]:
        _, _, (cap_emb, _, freqs_cis) = rest
        return {"cap_emb": cap_emb, "freqs_cis": freqs_cis, "t_emb": head["t_emb"]}

    def stream(self, head: dict[str, mx.array], ctx: dict[str, mx.array]) -> mx.array:
        return mx.concatenate([head["x"], ctx["cap_emb"]], axis=1)

    def blocks(self, ctx: dict[str, mx.array], state: mx.array, start: int, stop: int) -> mx.array:
        attn_mask = mx.ones((1, state.shape[1]), dtype=mx.bool_)
        for layer in self.tr.layers[start:stop]:
            state = layer(
                x=state, attn_mask=attn_mask, freqs_cis=ctx["freqs_cis"], t_emb=ctx["t_emb"]
            )
        return state

    def tokens(self, ctx: dict[str, mx.array], state: mx.array) -> mx.array:
        return state  # the final layer reads every token (mflux slices after it)

    def image(self, ctx: dict[str, mx.array], state: mx.array) -> mx.array:
        return state[:, : state.shape[1] - ctx["cap_emb"].shape[1]]

    def signal(self, head: Any, ctx: Any, before: mx.array, after: mx.array) -> mx.array:
        return after - before

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        tr = self.tr
        out = tr.all_final_layer[f"{tr.patch_size}-{tr.f_patch_size}"](tokens, head["t_emb"])
        output = ZImageTransformer._unpatchify(
            x=out[0, : head["x"].shape[1]],
            size=self._size,
            patch_size=tr.patch_size,
            f_patch_size=tr.f_patch_size,
            out_channels=tr.out_channels,
        )
        return -output

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        sigma_t = config.scheduler.sigmas[t].reshape((1,))  # as ZImage.generate_image passes it
        return mx.ones_like(sigma_t) - sigma_t

    def _rest(self, latents: mx.array, sigmas: mx.array, feats: mx.array) -> Any:
        caption = self.captions.of(latents, feats)
        return (sigmas, feats, (caption.cap_emb, caption.x_freqs_cis, caption.freqs_cis))

    def step_call(
        self,
        latents: mx.array,
        timestep: mx.array,
        sigmas: mx.array,
        text_encodings: mx.array,
        negative_encodings: mx.array | None,
        guidance: float,
    ) -> StepCall:
        _, f, h, w = latents.shape
        self._size = (f, h, w)  # the same for every step of the generation
        cond = self._rest(latents, sigmas, text_encodings)
        uncond = None
        if negative_encodings is not None:
            uncond = self._rest(latents, sigmas, negative_encodings)
        return StepCall(latents, timestep, cond, uncond, guidance)

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        return cond + guidance * (cond - uncond)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=ZImageAnatomy)


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: ZImageDims = Z_IMAGE_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    init_scale: float = 1.0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.z_image.model.z_image_transformer.transformer import ZImageTransformer
    from mflux.models.z_image.variants.z_image import ZImage

    pipeline = shells._base_shell(ZImage, shells._model_config(model_name))
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.float32 = False
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = ZImageTransformer(**dims.kwargs())
    shells._init_weights(transformer, seed, dtype, init_scale)
    pipeline.transformer = transformer
    all_prompts = [*prompts, " "]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    table = {
        prompt: shells._random(key, (text_tokens, dims.cap_feat_dim), dtype)
        for key, prompt in zip(keys, all_prompts, strict=True)
    }
    pipeline._encode_prompts = shells._ZImagePrompts(table)
    return pipeline
