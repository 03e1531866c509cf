"""Qwen-Image: its anatomy.

mflux 0.24.0 ``QwenImage.generate_image`` calls the transformer twice per step with the same
``t`` — the positive caption, then the negative — and combines them outside (norm-rescaled CFG);
the gated step enters at the transformer's call (``app.adapters.entries.install_call``), the first
call of a step deciding for both. ``QwenTransformer.__call__`` (text-to-image path), in the step's
parts:

- embed: ``img_in``, the timestep, ``time_text_embed`` (timestep-only, so the signal is
  caption-independent and the shared decision exact for both branches);
- signal (TeaCache's "signal A"): block 0's modulated image input,
  ``_modulate(img_norm1(x), mod1)``;
- context: the caption embedding (``txt_norm``, ``txt_in``) and the rotary embeddings;
- blocks: the dual-stream blocks over (text, image); the tail reads the image stream;
- tail: ``norm_out``, ``proj_out``.

The edit paths (a conditioning image's ids or grid) run mflux's own call, ungated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.qwen.model.qwen_transformer.qwen_transformer import QwenTransformer
from mflux.models.qwen.model.qwen_transformer.qwen_transformer_block import QwenTransformerBlock

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.families.qwen_image import FAMILY, QWEN_TINY, QwenDims
from app.gate import LiveGate


class QwenAnatomy(CallAnatomy):
    """``rest``: ``(t, config, encoder_hidden_states, encoder_hidden_states_mask)``."""

    tr: QwenTransformer

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        t, config, _, _ = rest
        hs = self.tr.img_in(latents)
        step = QwenTransformer._compute_timestep(t, config)
        step = mx.broadcast_to(step, (hs.shape[0],)).astype(hs.dtype)
        return {"hs": hs, "temb": self.tr.time_text_embed(step, hs)}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["hs"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        block0 = self.tr.transformer_blocks[0]
        mod1, _ = mx.split(block0.img_mod_linear(block0.img_mod_silu(head["temb"])), 2, axis=-1)
        signal, _ = QwenTransformerBlock._modulate(block0.img_norm1(head["hs"]), mod1)
        return signal

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        _, config, encoder_hidden_states, mask = rest
        tr = self.tr
        return {
            "ehs": tr.txt_in(tr.txt_norm(encoder_hidden_states)),
            "rope": QwenTransformer._compute_rotary_embeddings(
                encoder_hidden_states_mask=mask,
                pos_embed=tr.pos_embed,
                config=config,
                cond_image_grid=None,
            ),
            "mask": mask,
            "temb": head["temb"],
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"txt": ctx["ehs"], "img": head["hs"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        txt, img = state["txt"], state["img"]
        for idx in range(start, stop):
            txt, img = QwenTransformer._apply_transformer_block(
                idx=idx,
                block=self.tr.transformer_blocks[idx],
                hidden_states=img,
                encoder_hidden_states=txt,
                encoder_hidden_states_mask=ctx["mask"],
                text_embeddings=ctx["temb"],
                image_rotary_embeddings=ctx["rope"],
                cond_embeddings=None,
                is_cond_token=None,
            )
        return {"txt": txt, "img": img}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        return state["img"]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["temb"]))

    def branch_call(
        self,
        t: int,
        config: Any,
        hidden_states: mx.array,
        encoder_hidden_states: mx.array,
        encoder_hidden_states_mask: mx.array,
        qwen_image_ids: mx.array | None = None,
        cond_image_grid: tuple[int, int, int] | None = None,
    ) -> StepCall | None:
        if qwen_image_ids is not None or cond_image_grid is not None:
            return None  # an edit's call: mflux's own
        rest = (t, config, encoder_hidden_states, encoder_hidden_states_mask)
        return StepCall(hidden_states, t, rest)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=QwenAnatomy, transformer_class=QwenTransformer
    )


# -- the random-weight shell (``Family.random_weights``; helpers in ``app.adapters.shells``) --


def shell(
    model_name: str,
    *,
    dims: QwenDims = QWEN_TINY,
    prompts: Sequence[str] = (shells.DEFAULT_PROMPT,),
    negative_prompt: str | None = None,
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.qwen.model.qwen_transformer.qwen_transformer import QwenTransformer
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage

    pipeline = shells._base_shell(QwenImage, shells._model_config(model_name))
    pipeline.tokenizers = {"qwen": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = QwenTransformer(**dims.kwargs())
    shells._init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    negative = negative_prompt if negative_prompt and negative_prompt.strip() else " "
    keys = mx.random.split(mx.random.key(seed + 1), 2 * len(prompts))
    cache = {}
    mask = mx.ones((1, text_tokens), dtype=mx.int32)
    for i, prompt in enumerate(prompts):
        pos = shells._random(keys[2 * i], (1, text_tokens, dims.joint_attention_dim), dtype)
        neg = shells._random(keys[2 * i + 1], (1, text_tokens, dims.joint_attention_dim), dtype)
        cache[f"{prompt}|NEG|{negative}"] = (pos, mask, neg, mask)
    pipeline.prompt_cache = cache
    return pipeline
