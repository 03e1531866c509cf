"""Anima (Turbo, Aesthetic, Base): its anatomy, compiled where mflux compiles its predict, and its
random-weight shell.

mflux 0.24.0 builds ``predict = Anima._predict(self.transformer, positive, negative, guidance)``
once per generation (the captions and the guidance are the closure's) and wraps it in
``mx.compile`` except on base/Pro M1/M2. The loop names the class, not ``self``, so the gate's
factory is reached through the class (``PredictAnatomy.factory_on_class``; the class's calls for
this pipeline's transformer are routed to the gated instance factory, any other pipeline's run
mflux's own). ``AnimaTransformer.__call__`` and ``Anima._predict``, in the step's parts:

- once per prompt, before the loop (mflux's ``_encode_prompt``, cached in ``prompt_cache``): the
  LLM adapter, from the Qwen3 states and the T5 ids to the caption (zero-padded to 512 tokens).
  It is part of the transformer's class but not of its forward: every step reads its output;
- embed: ``x_embedder`` over the latents in the caption's dtype (2×2 patches with a zero mask
  channel);
- signal (TeaCache's): block 0's modulated self-attention input ``norm(x) · (1 + scale) + shift``
  (``AnimaBlock.modulate`` of the time embedding and the shared AdaLN-LoRA term) — caption-
  independent, so one decision serves both CFG branches exactly;
- context (per branch): the time embedding ``emb`` (sinusoid, RMS-normed) and the shared
  AdaLN-LoRA term ``adaln_lora`` (each branch computes its own, as each of mflux's transformer
  calls does), the caption, and the rotary embedding of the latent grid (step-independent: built
  once per generation and grid);
- stream and blocks: the image tokens through the blocks (self-attention with the rotary
  embedding, cross-attention to the caption, the MLP; each with its own modulation);
- tail: ``final_layer`` over every token (all are image tokens), unpatchify, and the float32 cast
  mflux's predict applies to each branch; CFG combines ``u + g·(c − u)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import mlx.core as mx
from mflux.models.anima.model.anima_transformer.anima_block import AnimaBlock
from mflux.models.anima.model.anima_transformer.anima_transformer import AnimaTransformer

from app.adapters.base import Installation
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.adapters.shells import DEFAULT_PROMPT, _base_shell, _init_weights, _model_config, _random
from app.families.anima import ANIMA_TINY, FAMILY, AnimaDims
from app.gate import LiveGate


class AnimaAnatomy(PredictAnatomy):
    """Built from mflux's factory arguments ``(positive, negative, guidance)``; ``rest``: one
    branch's ``{"context", "rope"}`` (its caption, and the grid's rotary embedding)."""

    tr: AnimaTransformer
    factory_on_class = True

    def __init__(self, transformer: AnimaTransformer, *factory_args: Any) -> None:
        super().__init__(transformer, *factory_args)
        self.positive, self.negative, self.guidance = factory_args
        self._shape = (0, 0, 0)  # the latents' (channels, height, width): fixed in a generation
        self._ropes: dict[tuple[int, int], tuple[mx.array, mx.array]] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.tr.blocks)

    def _time(self, sigma: mx.array, dtype: mx.Dtype) -> tuple[mx.array, mx.array]:
        """``emb`` and ``adaln_lora``, verbatim from AnimaTransformer.__call__."""
        tr = self.tr
        emb = tr.t_embedder[0](sigma).astype(dtype)
        adaln_lora = tr.t_embedder[1](emb)[:, None]
        return tr.t_embedding_norm(emb)[:, None], adaln_lora

    def embed(self, latents: mx.array, timestep: Any, rest: dict[str, Any]) -> dict[str, Any]:
        dtype = rest["context"].dtype
        return {"x": self.tr.x_embedder(latents.astype(dtype)), "sigma": timestep}

    def head_key(self, rest: dict[str, Any]) -> Hashable:
        # The embedding reads the caption's dtype only (encode_text gives both the blocks' dtype).
        return rest["context"].dtype

    def stream_tokens(self, head: dict[str, Any], rest: dict[str, Any]) -> mx.array:
        return head["x"]

    def signal(self, head: dict[str, Any], ctx: Any, before: Any, after: Any) -> mx.array:
        x = head["x"]
        emb, adaln_lora = self._time(head["sigma"], x.dtype)
        block0 = self.tr.blocks[0]
        shift, scale, _ = AnimaBlock.modulate(block0.adaln_modulation_self_attn, emb, adaln_lora)
        return AnimaBlock.norm(x) * (1 + scale) + shift

    def context(self, head: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
        emb, adaln_lora = self._time(head["sigma"], rest["context"].dtype)
        return {"emb": emb, "adaln_lora": adaln_lora, **rest}

    def stream(self, head: dict[str, Any], ctx: dict[str, Any]) -> mx.array:
        return head["x"]

    def blocks(self, ctx: dict[str, Any], state: mx.array, start: int, stop: int) -> mx.array:
        emb, adaln_lora, context, rope = ctx["emb"], ctx["adaln_lora"], ctx["context"], ctx["rope"]
        for block in self.tr.blocks[start:stop]:
            state = block(state, emb, adaln_lora, context, rope)
        return state

    def tokens(self, ctx: dict[str, Any], state: mx.array) -> mx.array:
        return state

    def tail(self, head: dict[str, Any], tokens: mx.array, rest: dict[str, Any]) -> mx.array:
        tr = self.tr
        emb, adaln_lora = self._time(head["sigma"], rest["context"].dtype)
        x = tr.final_layer(tokens, emb, adaln_lora)
        return tr._unpatchify(x, *self._shape).astype(mx.float32)

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        # As Anima.generate_image passes it: ``mx.reshape(sampler.sigma(t), (1,))``, the
        # schedule's sigma for every step the look-ahead builds (ER-SDE moves only step 0's)
        return config.scheduler.sigmas[t].reshape(1)

    def _rope(self, height: int, width: int) -> tuple[mx.array, mx.array]:
        grid = (height // self.tr.patch_size, width // self.tr.patch_size)
        if grid not in self._ropes:
            self._ropes[grid] = self.tr.rope(*grid)
        return self._ropes[grid]

    def step_call(self, latents: mx.array, sigma: mx.array) -> StepCall:
        _, channels, height, width = latents.shape
        self._shape = (channels, height, width)  # constant within a generation: read while tracing
        rope = self._rope(height, width)
        cond = {"context": self.positive, "rope": rope}
        uncond = None if self.negative is None else {"context": self.negative, "rope": rope}
        return StepCall(latents, sigma, cond, uncond, self.guidance)

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        return uncond + guidance * (cond - uncond)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=FAMILY, anatomy=AnimaAnatomy)


# -- the random-weight shell ------------------------------------------------------------------


class _AnimaPrompts:
    """Instance override of ``Anima._encode_prompt``: mflux's, with the Qwen3 encoder and the two
    tokenizers stood in for by a table of random Qwen3 states and T5 ids per prompt; the LLM
    adapter (the transformer's ``encode_text``) runs as in mflux, once per prompt, on first use
    (after any LoRA). Cached here, not in the pipeline's ``prompt_cache`` (a module child: a
    generation would change the pipeline's parameter tree, which the installation tests hold)."""

    def __init__(self, pipeline: Any, table: dict[str, tuple[mx.array, mx.array]]) -> None:
        self.pipeline = pipeline
        self.table = table
        self.cache: dict[str, mx.array] = {}

    def __call__(self, prompt: str) -> mx.array:
        if prompt not in self.cache:
            hidden_states, t5_ids = self.table[prompt]
            context = self.pipeline.transformer.encode_text(hidden_states, t5_ids)
            mx.eval(context)
            self.cache[prompt] = context
        return self.cache[prompt]


def shell(
    model_name: str = "anima-turbo",
    *,
    dims: AnimaDims = ANIMA_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    qwen_tokens: int = 12,
    t5_tokens: int = 10,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's ``Anima`` with a random-weight transformer (the LLM adapter included) and random
    Qwen3 states (float32, as mflux's text encoder gives them) and T5 ids per prompt; the
    negative branch's prompt is mflux's default, the empty one."""
    from mflux.models.anima.variants.txt2img.anima import Anima
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision

    pipeline = _base_shell(Anima, _model_config(model_name))
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = AnimaTransformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    all_prompts = [*prompts, ""]
    keys = mx.random.split(mx.random.key(seed + 1), 2 * len(all_prompts))
    vocab = transformer.llm_adapter.embed.weight.shape[0]
    table = {}
    for i, prompt in enumerate(all_prompts):
        hidden_states = _random(keys[2 * i], (1, qwen_tokens, dims.context_dim), mx.float32)
        t5_ids = mx.random.randint(0, vocab, (1, t5_tokens), key=keys[2 * i + 1])
        table[prompt] = (hidden_states, t5_ids)
    pipeline._encode_prompt = _AnimaPrompts(pipeline, table)
    return pipeline
