"""FLUX.3 Image Klein (distilled and base): its anatomy, eager as mflux's own.

mflux 0.24.0 builds ``predict = self._predict(self.transformer)`` once per generation and does not
compile it (its RoPE angles are built on the host in float64, ``Flux3PosEmbed``); the gated step
enters there (``app.adapters.entries.install_predict``), on the text-to-image path (an edit's
reference images run mflux's own predict). ``Flux3Transformer.__call__`` and
``_Flux3KleinCore._predict``, in the step's parts:

- embed: the time embeddings (the image's at ``t``, the context's at 0; a flow map adds the
  target time's to both), the image stream's per-mode modulation, ``x_embedders["image"]``;
- signal (TeaCache's): block 0's modulated image input, ``(1 + scale) · norm(x) + shift`` of
  ``mode_blocks["image"][0]``. The per-mode stage attends within each stream, so the image stream
  never sees the caption before the single stream: the signal is caption-independent and one
  decision serves both CFG branches exactly;
- context: the caption embedding, the rotary embeddings, the text stream's and the single stream's
  modulations;
- blocks: the image stream's per-mode blocks (block ``d`` is depth ``d``; each stream's per-mode
  blocks depend on that stream alone, so the text stream's run where the stack leaves the per-mode
  stage, computing the same values), then the single stream over ``[image, text]`` with per-token
  modulation; the tail reads its image tokens;
- tail: ``norm_out`` with the image's time embedding, ``proj_out``; the base checkpoint's CFG
  combines ``u + g·(c − u)`` in float32, as mflux does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux3.model.flux3_transformer.flux3_transformer import Flux3Transformer

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.families.flux3 import FAMILY, FLUX3_TINY, Flux3Dims
from app.gate import LiveGate


class Flux3Anatomy(PredictAnatomy):
    """``rest``: ``(target_timestep, latent_ids, text_tokens, text_ids)`` of one branch."""

    tr: Flux3Transformer

    @property
    def num_blocks(self) -> int:
        return len(self.tr.txt_mode_blocks) + len(self.tr.single_transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, Any]:
        # Verbatim from Flux3Transformer.__call__ (text-to-image: no image_cond stream).
        tr = self.tr
        target = rest[0]
        if tr.flow_map != (target is not None):
            raise ValueError("target_timestep is required by, and only by, a flow-map transformer")
        vec_image = tr.timestep_embedder(timestep)
        vec_context = tr.timestep_embedder(mx.zeros_like(timestep))
        if tr.flow_map:
            assert tr.target_timestep_embedder is not None and target is not None
            target_vec = tr.target_timestep_embedder(target)
            vec_image, vec_context = vec_image + target_vec, vec_context + target_vec
        return {
            "x": tr.x_embedders["image"](latents.astype(ModelConfig.precision)),
            "vec_image": vec_image,
            "vec_context": vec_context,
            "mod_image": tr.early_stream_modulations["image"](vec_image),
        }

    def stream_tokens(self, head: dict[str, Any], rest: Any) -> mx.array:
        return head["x"]

    def signal(self, head: dict[str, Any], ctx: Any, before: Any, after: Any) -> mx.array:
        shift, scale, _ = head["mod_image"]
        return (1 + scale) * self.tr.mode_blocks["image"][0].norm(head["x"]) + shift

    def context(self, head: dict[str, Any], rest: Any) -> dict[str, Any]:
        tr = self.tr
        _, latent_ids, tokens, ids = rest
        return {
            "mod_image": head["mod_image"],
            "rotary_image": tr.pos_embed(latent_ids),
            "txt": tr.context_embedder(tokens.astype(ModelConfig.precision)),
            "rotary_txt": tr.pos_embed(ids),
            "mod_txt": tr.early_stream_modulations["txt"](head["vec_context"]),
            "single_image": tr.single_stream_modulations["image"](head["vec_image"]),
            "single_txt": tr.single_stream_modulations["txt"](head["vec_context"]),
            "single_rotary": tr.pos_embed(mx.concatenate([latent_ids, ids], axis=0)),
        }

    def stream(self, head: dict[str, Any], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"image": head["x"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        tr = self.tr
        depths = len(tr.txt_mode_blocks)
        for depth in range(start, min(stop, depths)):
            image = tr.mode_blocks["image"][depth](
                state["image"], ctx["rotary_image"], ctx["mod_image"]
            )
            state = {"image": image}
        if stop <= depths:
            return state
        if "joint" in state:
            x = state["joint"]
        else:
            txt = ctx["txt"]
            for depth in range(depths):
                txt = tr.txt_mode_blocks[depth](txt, ctx["rotary_txt"], ctx["mod_txt"])
            x = mx.concatenate([state["image"], txt], axis=1)
        text_len = ctx["txt"].shape[1]
        widths = ((ctx["single_image"], x.shape[1] - text_len), (ctx["single_txt"], text_len))

        def joined(i: int) -> mx.array:
            parts = [
                mx.broadcast_to(mod[i], (x.shape[0], length, x.shape[-1])) for mod, length in widths
            ]
            return mx.concatenate(parts, axis=1)

        single_mod = (joined(0), joined(1), joined(2))
        for block in tr.single_transformer_blocks[max(start, depths) - depths : stop - depths]:
            x = block(x, ctx["single_rotary"], single_mod)
        return {"joint": x}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        if "joint" in state:
            joint = state["joint"]
            return joint[:, : joint.shape[1] - ctx["txt"].shape[1]]
        return state["image"]

    def tail(self, head: dict[str, Any], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["vec_image"]))

    def step_call(self, **kw: Any) -> StepCall | None:
        cond = kw.get("cond_tokens")
        if cond is not None and cond.shape[1] > 0:
            return None  # an edit's reference images: mflux's own predict
        target, latent_ids = kw["target_timestep"], kw["latent_ids"]
        uncond = None
        if kw["uncond_tokens"] is not None:
            uncond = (target, latent_ids, kw["uncond_tokens"], kw["uncond_ids"])
        cond_rest = (target, latent_ids, kw["text_tokens"], kw["text_ids"])
        return StepCall(kw["latents"], kw["timestep"], cond_rest, uncond, kw["guidance"])

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        unconditional = uncond.astype(mx.float32)
        return unconditional + guidance * (cond.astype(mx.float32) - unconditional)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=Flux3Anatomy)


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: Flux3Dims = FLUX3_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.flux3.model.flux3_text_encoder.prompt_encoder import Flux3PromptEncoder
    from mflux.models.flux3.model.flux3_transformer.flux3_transformer import Flux3Transformer
    from mflux.models.flux3.variants.txt2img.flux3_klein import Flux3Klein

    model_config = shells._model_config(model_name)
    pipeline = shells._base_shell(Flux3Klein, model_config)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline._noise_override = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Flux3Transformer(**dims.kwargs(), **model_config.transformer_overrides)
    shells._init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    # ``_encode_prompt`` reads the cache first; the base's CFG branch is the empty prompt
    all_prompts = [*prompts, ""]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = shells._random(key, (1, text_tokens, dims.joint_attention_dim), dtype)
        pipeline.prompt_cache[prompt] = (embeds, Flux3PromptEncoder.prepare_text_ids(text_tokens))
    return pipeline
