"""FLUX.1 (dev, schnell, Krea dev): its anatomy.

mflux 0.24.0 calls ``Flux1.transformer`` eagerly once per step; the gated step enters there
(``app.adapters.entries.install_call``: the transformer's class is swapped for a per-installation
subclass, parameters and attributes untouched). ``Transformer.__call__`` (fingerprinted in
tests/adapters/test_mflux_fingerprint.py), in the step's parts:

- embed: ``x_embedder``, ``compute_text_embeddings`` (the time and pooled-text embedding);
- signal (TeaCache's): ``transformer_blocks[0].norm1(x, temb)[0]``, the AdaLN-Zero modulated
  block-0 image input (upstream TeaCache4FLUX's signal);
- context: ``context_embedder``, the rotary embeddings (Kontext's image ids included);
- blocks: the joint blocks over (text, image), then the single blocks over ``concat([text,
  image])`` (ControlNet's samples added where mflux adds them);
- tail: the image tokens, ``norm_out``, ``proj_out``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.flux.model.flux_transformer.transformer import Transformer

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.families.flux1 import FAMILY, FLUX1_TINY, Flux1Dims
from app.gate import LiveGate


class Flux1Anatomy(CallAnatomy):
    """``rest``: ``(t, config, prompt_embeds, pooled_prompt_embeds, controlnet_block_samples,
    controlnet_single_block_samples, kontext_image_ids)`` of the call (eager: any values)."""

    tr: Transformer

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks) + len(self.tr.single_transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        t, config, _, pooled, *_ = rest
        temb = Transformer.compute_text_embeddings(t, pooled, self.tr.time_text_embed, config)
        return {"hs": self.tr.x_embedder(latents), "temb": temb}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["hs"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        block = self.tr.transformer_blocks[0]
        return block.norm1(hidden_states=head["hs"], text_embeddings=head["temb"])[0]

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        _, config, prompt_embeds, _, block_samples, single_samples, kontext_ids = rest
        tr = self.tr
        return {
            "ehs": tr.context_embedder(prompt_embeds),
            "temb": head["temb"],
            "rope": Transformer.compute_rotary_embeddings(
                prompt_embeds, tr.pos_embed, config, kontext_ids
            ),
            "block_samples": block_samples,
            "single_samples": single_samples,
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"txt": ctx["ehs"], "img": head["hs"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        tr = self.tr
        joints = len(tr.transformer_blocks)
        for idx in range(start, min(stop, joints)):
            txt, img = tr._apply_joint_transformer_block(
                idx=idx,
                block=tr.transformer_blocks[idx],
                hidden_states=state["img"],
                encoder_hidden_states=state["txt"],
                text_embeddings=ctx["temb"],
                image_rotary_embeddings=ctx["rope"],
                controlnet_block_samples=ctx["block_samples"],
            )
            state = {"txt": txt, "img": img}
        if stop <= joints:
            return state
        out = state.get("joint")
        if out is None:
            out = mx.concatenate([state["txt"], state["img"]], axis=1)
        for idx in range(max(start, joints) - joints, stop - joints):
            out = tr._apply_single_transformer_block(
                idx=idx,
                block=tr.single_transformer_blocks[idx],
                hidden_states=out,
                encoder_hidden_states=state["txt"],
                text_embeddings=ctx["temb"],
                image_rotary_embeddings=ctx["rope"],
                controlnet_single_block_samples=ctx["single_samples"],
            )
        return {"joint": out, "txt": state["txt"]}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        if "joint" in state:
            return state["joint"][:, state["txt"].shape[1] :, ...]
        return state["img"]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["temb"]))

    def branch_call(
        self,
        t: int,
        config: Any,
        hidden_states: mx.array,
        prompt_embeds: mx.array,
        pooled_prompt_embeds: mx.array,
        controlnet_block_samples: list[mx.array] | None = None,
        controlnet_single_block_samples: list[mx.array] | None = None,
        kontext_image_ids: mx.array | None = None,
    ) -> StepCall:
        rest = (
            t,
            config,
            prompt_embeds,
            pooled_prompt_embeds,
            controlnet_block_samples,
            controlnet_single_block_samples,
            kontext_image_ids,
        )
        return StepCall(hidden_states, t, rest)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=Flux1Anatomy, transformer_class=Transformer
    )


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: Flux1Dims = FLUX1_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.flux.model.flux_transformer.transformer import Transformer
    from mflux.models.flux.variants.txt2img.flux import Flux1

    model_config = shells._model_config(model_name)
    pipeline = shells._base_shell(Flux1, model_config)
    pipeline.tokenizers = {"t5": None, "clip": None}
    pipeline.t5_text_encoder = None
    pipeline.clip_text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Transformer(model_config=model_config, **dims.kwargs())
    shells._init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    keys = mx.random.split(mx.random.key(seed + 1), 2 * len(prompts))
    cache = {}
    for i, prompt in enumerate(prompts):
        t5 = shells._random(keys[2 * i], (1, text_tokens, 4096), dtype)
        clip = shells._random(keys[2 * i + 1], (1, 768), dtype)
        cache[prompt] = (t5, clip)
    pipeline.prompt_cache = cache
    return pipeline
