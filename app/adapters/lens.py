"""Lens Turbo: its anatomy and its random-weight shell.

mflux 0.24.0 calls ``LensImage.transformer`` eagerly once per step (no predict factory, no
``mx.compile``, no CFG: the 4-step distillation internalizes guidance); the gated step enters
there (``app.adapters.entries.install_call``: the transformer's class is swapped for a
per-installation subclass, parameters and attributes untouched). ``LensTransformer.__call__``, in
the step's parts:

- embed: ``img_in`` over the packed latent tokens, and the time embedding ``temb``
  (``time_text_embed``, in the image stream's dtype);
- signal (TeaCache's): block 0's modulated image input, ``img_norm1(x) · (1 + scale) + shift``
  of its first image modulation (``img_mod``), as FLUX.1's TeaCache reads its block 0;
- context: the text stream (each GPT-OSS layer's ``txt_norm``, concatenated, ``txt_in``, cast to
  the image stream's dtype) and the rotary tables of the image grid and the text;
- stream and blocks: the two streams, image and text, through the dual-stream blocks;
- tail: the image stream through ``norm_out`` (``temb``-modulated) and ``proj_out``.

The text stream is not read by the tail: the residual is the image stream's (as FLUX.1's joint
blocks keep theirs), and the first block's residual for the probe is the image stream's too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mflux.models.lens.model.transformer.lens_transformer import LensTransformer

from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.adapters.shells import DEFAULT_PROMPT, StubVAE, _init_weights, _model_config, _random
from app.families.lens import FAMILY, LENS_TINY, LensDims
from app.gate import LiveGate


class LensAnatomy(CallAnatomy):
    """``rest``: the call's ``encoder_layers`` (1, S, layers, width); the latent grid is the
    anatomy's, set by each call (the same within a generation)."""

    tr: LensTransformer
    compiled = False  # mflux calls the transformer eagerly on every machine

    def __init__(self, transformer: LensTransformer) -> None:
        super().__init__(transformer)
        self._grid = (0, 0)

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        hidden = self.tr.img_in(latents)
        return {"img": hidden, "temb": self.tr.time_text_embed(timestep, hidden.dtype)}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["img"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        block = self.tr.transformer_blocks[0]
        img_mod1, _ = mx.split(block.img_mod[1](block.img_mod[0](head["temb"])), 2, axis=-1)
        modulated, _ = block._modulate(block.img_norm1(head["img"]), img_mod1)
        return modulated

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        tr, layers = self.tr, rest
        normed = [tr.txt_norm[i](layers[:, :, i]) for i in range(len(tr.txt_norm))]
        text = tr.txt_in(mx.concatenate(normed, axis=-1)).astype(head["img"].dtype)
        height, width = self._grid
        image_rope, text_rope = tr.pos_embed((1, height, width), [layers.shape[1]])
        return {"txt": text, "temb": head["temb"], "image_rope": image_rope, "text_rope": text_rope}

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"txt": ctx["txt"], "img": head["img"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        txt, img = state["txt"], state["img"]
        for block in self.tr.transformer_blocks[start:stop]:
            txt, img = block(
                hidden_states=img,
                encoder_hidden_states=txt,
                temb=ctx["temb"],
                image_rotary_emb=ctx["image_rope"],
                text_rotary_emb=ctx["text_rope"],
            )
        return {"txt": txt, "img": img}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        return state["img"]

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["temb"]))

    def branch_call(
        self,
        hidden_states: mx.array,
        encoder_layers: mx.array,
        timestep: mx.array,
        latent_height: int,
        latent_width: int,
    ) -> StepCall:
        self._grid = (latent_height, latent_width)
        return StepCall(hidden_states, timestep, encoder_layers)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=LensAnatomy, transformer_class=LensTransformer
    )


# ---------------------------------------------------------------------------------------------
# The random-weight shell: ``LensImage`` built without its constructor (a plain class, not an
# ``nn.Module``), its transformer at ``dims``, a stub encoder of the features' shape.


class _StubEncoder:
    """Stands in for ``LensGptOssEncoder``: the table's stacked layer features of the prompt,
    (1, tokens, layers, width), as its ``encode`` returns them."""

    def __init__(self, table: dict[str, mx.array]) -> None:
        self.table = table

    def encode(self, prompt: str) -> mx.array:
        return self.table[prompt]


def shell(
    model_name: str = "lens-turbo",
    *,
    dims: LensDims = LENS_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's loop casts the features and the latents to bfloat16 whatever the weights' dtype;
    the shell leaves that as it is."""
    from mflux.callbacks.callback_registry import CallbackRegistry
    from mflux.models.lens.variants.txt2img.lens_image import LensImage

    pipeline: Any = LensImage.__new__(LensImage)
    pipeline.model_config = _model_config(model_name)
    pipeline.bits = None
    pipeline.callbacks = CallbackRegistry()
    pipeline.tiling_config = None
    pipeline.vae = StubVAE()
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = LensTransformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    keys = mx.random.split(mx.random.key(seed + 1), len(prompts))
    shape = (1, text_tokens, dims.num_selected_layers, dims.enc_hidden_dim)
    table = {p: _random(key, shape, dtype) for key, p in zip(keys, prompts, strict=True)}
    pipeline.text_encoder = _StubEncoder(table)
    return pipeline
