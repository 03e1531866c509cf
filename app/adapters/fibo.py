"""FIBO and FIBO Lite: the anatomy, and the random-weight shell.

mflux 0.24.0 calls ``FIBO.transformer`` eagerly once per step (it never compiles FIBO); the gated
step enters there (``app.adapters.entries.install_call``: the transformer's class is swapped for a
per-installation subclass, parameters untouched). With classifier-free guidance mflux runs both
branches in that one call, as a batch of two: the caption embeddings stack ``[negative,
positive]`` and ``FiboTransformer._handle_classifier_free_guidance`` doubles the latents; the loop
then splits the output's halves (``FIBO._apply_classifier_free_guidance``). So a step is one call
here: one decision, and the residual is kept over the whole batch, each row its own branch's
(a skipped step reuses each branch's own residual, row for row, without splitting the batch and
changing mflux's numerics). The decision reads the conditional rows (the second half), as every
other family decides on its conditional branch.

``FiboTransformer.__call__`` (no conditioning image), in the step's parts:

- embed: the CFG batch (the latents doubled where the caption is), ``x_embedder`` and the time
  embedding (``_compute_time_embeddings``: the scheduler's timestep of step ``t``);
- signal (TeaCache's): block 0's modulated image input, ``transformer_blocks[0].norm1(x,
  temb)[0]`` (AdaLN-Zero: ``layer_norm(x)·(1 + scale) + shift``), over the conditional rows;
- once per generation and caption (they read the caption and the image size, never the step):
  ``context_embedder``, the rotary embeddings of ``[text, image]``, the attention mask (all ones,
  as mflux builds it) and the caption projection of each block's text-encoder layer. mflux
  rebuilds them at every step; the values are the same, op for op;
- blocks: the joint blocks, then the single blocks, each over ``(text, image)`` with its own
  caption layer spliced into the text stream's second half, as ``_apply_joint_transformer_block``
  and ``_apply_single_transformer_block`` do (they are called here);
- tail: ``norm_out`` and ``proj_out`` over the image tokens (the text stream's end is never read).

A call with a conditioning image (FIBO Edit, issue #41) runs mflux's own forward, ungated.

The shell: mflux's ``FIBO`` without its constructor, a ``FiboTransformer`` with random weights,
a stub tokenizer and text encoder that hand mflux's own ``PromptEncoder`` random hidden states per
prompt (37, as SmolLM3-3B's embeddings and 36 layers), and ``StubVAE``. FIBO's width is hard-coded
(3072), so the tiny shell has one block of each kind at full width; mflux's prompt encoder always
hands the transformer 46 caption layers (``total_num_layers_transformer``) and its forward projects
every one (``caption_projection[i]`` for i < 46), so a shell with fewer blocks gets projections for
the rest 1 wide: built lazily by mflux's forward, read by no block, so never evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import mlx.core as mx
from mflux.models.fibo.model.fibo_transformer.transformer import FiboTransformer

from app.adapters.base import Installation
from app.adapters.entries import CallAnatomy, StepCall, install_call
from app.adapters.shells import DEFAULT_PROMPT, _base_shell, _init_weights, _model_config, _random
from app.families.fibo import CAPTION_LAYERS, FAMILY, FIBO_TINY, FiboDims
from app.fileio.jsonio import dumps_json
from app.gate import LiveGate

# The shells' prompt as FIBO reads it: a JSON caption (mflux's encoder parses every prompt)
CAPTION = dumps_json({"short_description": DEFAULT_PROMPT})
# mflux's negative prompt where none is given (``PromptEncoder.encode_prompt``)
MFLUX_NEGATIVE = "ugly, blurry, low quality"


@dataclass(frozen=True, slots=True)
class _Caption:
    """A caption's step-independent part of the forward, for one generation."""

    embeds: mx.array  # mflux's encoder_hidden_states (looked up by identity)
    text: mx.array  # context_embedder(embeds)
    rope: Any  # the rotary embeddings of [text, image]
    mask: mx.array  # the attention mask
    layers: tuple[mx.array, ...]  # each block's projected caption layer


class FiboAnatomy(CallAnatomy):
    """``rest``: ``(config, encoder_hidden_states, text_encoder_layers)`` of the call; the
    timestep is the loop's step index ``t`` (the transformer reads the scheduler's)."""

    tr: FiboTransformer
    compiled = False  # mflux runs FIBO's forward eagerly

    def __init__(self, transformer: FiboTransformer) -> None:
        super().__init__(transformer)
        self._captions: list[_Caption] = []
        self._batch = 1  # the latents' batch before the CFG doubling

    @property
    def num_blocks(self) -> int:
        return len(self.tr.transformer_blocks) + len(self.tr.single_transformer_blocks)

    def _conditional(self, x: mx.array) -> mx.array:
        """The conditional branch's rows: all of them without CFG, the second half with it."""
        return x[x.shape[0] - self._batch :]

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        # Verbatim from FiboTransformer.__call__, step 1.
        tr = self.tr
        config, embeds, _ = rest
        hidden_states = FiboTransformer._handle_classifier_free_guidance(latents, embeds)
        hidden_states = tr.x_embedder(hidden_states)
        temb = FiboTransformer._compute_time_embeddings(
            timestep, config, hidden_states.shape[0], hidden_states.dtype, tr.time_embed
        )
        return {"hs": hidden_states, "temb": temb}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["hs"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        block = self.tr.transformer_blocks[0]
        modulated = block.norm1(hidden_states=head["hs"], text_embeddings=head["temb"])[0]
        return self._conditional(modulated)

    def _caption(self, dtype: mx.Dtype, rest: Any) -> _Caption:
        """The caption's part, built on its first step of the generation (FiboTransformer.__call__
        steps 1–3, in mflux's own calls)."""
        config, embeds, text_layers = rest
        for made in self._captions:
            if made.embeds is embeds:
                return made
        tr = self.tr
        text = tr.context_embedder(embeds)
        rope = FiboTransformer._compute_rotary_embeddings(
            encoder_hidden_states=text, pos_embed=tr.pos_embed, config=config, dtype=dtype
        )
        mask = FiboTransformer._compute_attention_mask(
            config=config,
            batch_size=embeds.shape[0],
            encoder_hidden_states=text,
            max_tokens=text.shape[1],
        )
        layers = tuple(
            tr.caption_projection[i](layer)
            for i, layer in zip(range(self.num_blocks), text_layers, strict=False)
        )
        made = _Caption(embeds, text, rope, mask, layers)
        self._captions.append(made)
        return made

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, Any]:
        caption = self._caption(head["hs"].dtype, rest)
        return {
            "text": caption.text,
            "rope": caption.rope,
            "mask": caption.mask,
            "layers": caption.layers,
            "temb": head["temb"],
        }

    def stream(self, head: dict[str, mx.array], ctx: dict[str, Any]) -> dict[str, mx.array]:
        return {"txt": ctx["text"], "img": head["hs"]}

    def blocks(
        self, ctx: dict[str, Any], state: dict[str, mx.array], start: int, stop: int
    ) -> dict[str, mx.array]:
        tr = self.tr
        joints = len(tr.transformer_blocks)
        txt, img = state["txt"], state["img"]
        shared = {
            "time_embeddings": ctx["temb"],
            "image_rotary_emb": ctx["rope"],
            "attention_mask": ctx["mask"],
        }
        for idx in range(start, min(stop, joints)):
            txt, img = FiboTransformer._apply_joint_transformer_block(
                block=tr.transformer_blocks[idx],
                hidden_states=img,
                encoder_hidden_states=txt,
                text_encoder_layer=ctx["layers"][idx],
                **shared,
            )
        for idx in range(max(start, joints), stop):
            txt, img = FiboTransformer._apply_single_transformer_block(
                block=tr.single_transformer_blocks[idx - joints],
                hidden_states=img,
                encoder_hidden_states=txt,
                text_encoder_layer=ctx["layers"][idx],
                **shared,
            )
        return {"txt": txt, "img": img}

    def tokens(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        return state["img"]

    def image(self, ctx: dict[str, Any], state: dict[str, mx.array]) -> mx.array:
        return self._conditional(state["img"])  # a block residual the decision reads

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.proj_out(self.tr.norm_out(tokens, head["temb"]))

    def branch_call(
        self,
        t: int,
        config: Any,
        hidden_states: mx.array,
        encoder_hidden_states: mx.array,
        text_encoder_layers: list[mx.array],
        conditioning_seq_len: int = 0,
        conditioning_image_ids: mx.array | None = None,
    ) -> StepCall | None:
        if conditioning_seq_len or conditioning_image_ids is not None:
            return None  # FIBO Edit's conditioning image: mflux's own forward
        self._batch = hidden_states.shape[0]
        return StepCall(hidden_states, t, (config, encoder_hidden_states, text_encoder_layers))


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_call(
        pipeline, gate, family=FAMILY, anatomy=FiboAnatomy, transformer_class=FiboTransformer
    )


# -- the random-weight shell -------------------------------------------------------------------

HIDDEN_STATES = 37  # SmolLM3-3B's embeddings and its 36 layers (output_hidden_states)
CAPTION_FEATURES = 2048  # SmolLM3-3B's hidden size, hard-coded in FiboTransformer's projections


@dataclass(frozen=True)
class _TokenizerOutput:
    input_ids: mx.array
    attention_mask: mx.array


class _PromptTable:
    """Stands in for the SmolLM3 tokenizer and text encoder that mflux's ``PromptEncoder``
    calls: the tokenizer marks a prompt by its row in the table (and gives it its token count),
    the encoder returns that row's hidden states."""

    def __init__(self, table: dict[str, list[mx.array]]) -> None:
        self.prompts = list(table)
        self.states = list(table.values())

    def tokenize(self, prompt: Sequence[str], max_length: int) -> _TokenizerOutput:
        (text,) = prompt
        if text not in self.prompts:
            raise KeyError(f"the FIBO shell has no caption {text!r}; known: {self.prompts}")
        row = self.prompts.index(text)
        tokens = self.states[row][0].shape[1]
        return _TokenizerOutput(mx.array([[row]]), mx.ones((1, tokens), dtype=mx.int32))

    def __call__(
        self, input_ids: mx.array, attention_mask: mx.array, output_hidden_states: bool = True
    ) -> list[mx.array]:
        return list(self.states[cast(int, input_ids[0, 0].item())])


def shell(
    model_name: str = "fibo",
    *,
    dims: FiboDims = FIBO_TINY,
    prompts: Sequence[str] = (CAPTION,),
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    text_tokens: int = 12,
) -> Any:
    """A FIBO (or FIBO Lite) shell. Each prompt gets ``text_tokens`` tokens of random hidden
    states; mflux's negative prompt gets fewer (so the CFG batch pads one, as mflux does)."""
    from mflux.models.fibo.model.fibo_transformer.text_projection import BriaFiboTextProjection
    from mflux.models.fibo.variants.txt2img.fibo import FIBO

    pipeline = _base_shell(FIBO, _model_config(model_name))
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = FiboTransformer(**dims.kwargs())
    unread = CAPTION_LAYERS - dims.blocks  # projected by mflux's forward, read by no block
    transformer.caption_projection = [
        *transformer.caption_projection,
        *(BriaFiboTextProjection(hidden_size=1) for _ in range(unread)),
    ]
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    lengths = {prompt: text_tokens for prompt in prompts}
    lengths.setdefault(MFLUX_NEGATIVE, max(1, text_tokens - 4))
    keys = mx.random.split(mx.random.key(seed + 1), len(lengths))
    table = {
        prompt: [
            _random(k, (1, tokens, CAPTION_FEATURES), dtype)
            for k in mx.random.split(key, HIDDEN_STATES)
        ]
        for key, (prompt, tokens) in zip(keys, lengths.items(), strict=True)
    }
    stub = _PromptTable(table)
    pipeline.tokenizers = {"fibo": stub}
    pipeline.text_encoder = stub
    return pipeline
