"""FLUX.2 Klein (4B, 9B, base 4B, base 9B, and the embedded demo): its anatomy.

mflux 0.24.0 builds ``predict = self._predict(self.transformer)`` once per ``generate_image`` and
wraps it in ``mx.compile`` except on base/Pro M1/M2; the gated step enters there
(``app.adapters.entries.install_predict``) and is compiled where mflux's is.

``Flux2Transformer.__call__`` (non-kv path) and ``Flux2Klein._predict``, in the step's parts:

- embed: timestep scaling, ``time_guidance_embed`` (guidance None for Klein), ``x_embedder``;
- signal (TeaCache's): ``(1 + scale_msa) · transformer_blocks[0].norm1(x) + shift_msa`` of the
  double-stream image modulation — caption-independent, so one decision serves both CFG branches;
- context (per branch): ``context_embedder``, the rotary embeddings of ``[text, image]``, the
  double-stream modulations and the single-stream one;
- blocks: the double blocks over (text, image), then the single blocks over ``concat([text,
  image])``; the tokens the tail reads are the image stream's (after the concat, its slice);
- tail: ``norm_out``, ``proj_out``; CFG combines ``neg + g·(pos − neg)``.

A residual over the image tokens equals mflux's over the concatenation where the tail reads it:
``(concat([txt, img]) + r)[:, text_len:]`` is ``img + r[:, text_len:]`` element for element.

A kv-cache call (edit pipelines) runs mflux's own predict, ungated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.model.flux2_transformer.transformer import Flux2Transformer

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.families.flux2 import FAMILY, FLUX2_TINY, Flux2Dims
from app.gate import LiveGate


class Flux2Anatomy(PredictAnatomy):
    """``rest``: ``(latent_ids, prompt_embeds, text_ids)`` of one branch."""

    tr: Flux2Transformer

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks) + len(self.tr.single_transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        # Verbatim from Flux2Transformer.__call__ (guidance is None on the Klein predict path).
        tr = self.tr
        if not isinstance(timestep, mx.array):
            timestep = mx.array(timestep, dtype=latents.dtype)
        if timestep.ndim == 0:
            timestep = mx.full((latents.shape[0],), timestep, dtype=latents.dtype)
        timestep = timestep.astype(latents.dtype)
        timestep_scale = mx.where(mx.max(timestep) <= 1.0, 1000.0, 1.0).astype(latents.dtype)
        timestep = timestep * timestep_scale
        temb = tr.time_guidance_embed(timestep, None)
        temb = temb.astype(ModelConfig.precision)
        return {"hs": tr.x_embedder(latents), "temb": temb}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["hs"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        shift_msa, scale_msa, _ = self.tr.double_stream_modulation_img(head["temb"])[0]
        return (1 + scale_msa) * self.tr.transformer_blocks[0].norm1(head["hs"]) + shift_msa

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        tr = self.tr
        latent_ids, prompt_embeds, text_ids = rest
        temb = head["temb"]
        img_ids = latent_ids[0] if latent_ids.ndim == 3 else latent_ids
        txt_ids = text_ids[0] if text_ids.ndim == 3 else text_ids
        image_rotary_emb = tr.pos_embed(img_ids)
        text_rotary_emb = tr.pos_embed(txt_ids)
        rope = (
            mx.concatenate([text_rotary_emb[0], image_rotary_emb[0]], axis=0),
            mx.concatenate([text_rotary_emb[1], image_rotary_emb[1]], axis=0),
        )
        return {
            "ehs": tr.context_embedder(prompt_embeds),
            "rope": rope,
            "mod_img": tr.double_stream_modulation_img(temb),
            "mod_txt": tr.double_stream_modulation_txt(temb),
            "mod_single": tr.single_stream_modulation(temb)[0],
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"txt": ctx["ehs"], "img": head["hs"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        tr = self.tr
        doubles = len(tr.transformer_blocks)
        for idx in range(start, min(stop, doubles)):
            txt, img = tr.transformer_blocks[idx](
                hidden_states=state["img"],
                encoder_hidden_states=state["txt"],
                temb_mod_params_img=ctx["mod_img"],
                temb_mod_params_txt=ctx["mod_txt"],
                image_rotary_emb=ctx["rope"],
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
            state = {"txt": txt, "img": img}
        if stop <= doubles:
            return state
        out = state.get("joint")
        if out is None:
            out = mx.concatenate([state["txt"], state["img"]], axis=1)
        for idx in range(max(start, doubles) - doubles, stop - doubles):
            out = tr.single_transformer_blocks[idx](
                hidden_states=out,
                temb_mod_params=ctx["mod_single"],
                image_rotary_emb=ctx["rope"],
                kv_cache=None,
                kv_cache_layer_idx=idx,
            )
        return {"joint": out}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        if "joint" in state:
            return state["joint"][:, ctx["ehs"].shape[1] :, ...]
        return state["img"]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["temb"]))

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.timesteps[t]  # as Flux2Klein.generate_image passes it

    def step_call(
        self,
        latents: mx.array,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
        negative_prompt_embeds: mx.array | None,
        negative_text_ids: mx.array | None,
        guidance: float,
        timestep: mx.array,
        **extra: Any,
    ) -> StepCall | None:
        if any(v is not None for k, v in extra.items() if "kv_cache" in k):
            return None  # an edit's kv-cache call: mflux's own predict
        uncond = None
        if negative_prompt_embeds is not None and negative_text_ids is not None:
            uncond = (latent_ids, negative_prompt_embeds, negative_text_ids)
        return StepCall(latents, timestep, (latent_ids, prompt_embeds, text_ids), uncond, guidance)

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        return uncond + guidance * (cond - uncond)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=Flux2Anatomy)


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: Flux2Dims = FLUX2_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    init_scale: float = 1.0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder
    from mflux.models.flux2.model.flux2_transformer.transformer import Flux2Transformer
    from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

    pipeline = shells._base_shell(Flux2Klein, shells._model_config(model_name))
    pipeline.vae = shells.StubVAE(latent_channels=32)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.small_decoder = False
    pipeline.small_text_encoder = False
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Flux2Transformer(**dims.kwargs())
    shells._init_weights(transformer, seed, dtype, init_scale)
    pipeline.transformer = transformer
    table: dict[str, tuple[mx.array, mx.array]] = {}
    all_prompts = [*prompts, " "]  # mflux's negative prompt for FLUX.2 CFG is a single space
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = shells._random(key, (1, text_tokens, dims.joint_attention_dim), dtype)
        table[prompt] = (embeds, Flux2PromptEncoder.prepare_text_ids(embeds))
    pipeline._encode_prompt_pair = shells._Flux2Prompts(table)
    return pipeline
