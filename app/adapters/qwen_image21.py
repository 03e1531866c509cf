"""Qwen-Image 2.1 (base and Turbo): the gate inside the transformer call, split-compiled as mflux
compiles it.

mflux 0.24.0 ``QwenImage21.generate_image`` calls ``self.transformer(t=, config=, ...)`` once per
step, or twice under true CFG (guidance above 1 *and* a negative prompt: positive, then negative,
combined outside). ``Qwen21Transformer.__call__`` builds the caption's stream once per prompt
(text tokens are conditioned at t = 0, so their per-block keys and values never change over the
denoising; ``_build_text_cache``) and runs the image tokens through an ``mx.compile``'d
``_image_forward`` against those cached keys and values. The adapter swaps the transformer's class
(as for Qwen-Image) and keeps mflux's uncompiled part verbatim (timestep, geometry, text cache);
the image forward is split where the gate decides (app/adapters/compiled.py):

- prelude (compiled): the two time-embedding rows (the sampled t, and 0), the shared modulation
  broadcast over the image tokens, ``img_in``, and, last, TeaCache's signal: block 0's modulated
  image input ``img_norm1(x) · (1 + scale1)`` — caption-independent (the image's modulation row
  reads the time only), so the positive call's decision serves the negative call exactly. A gate
  that reads no signal (MagCache) gets the prelude without it;
- decision (eager), on a measurement already evaluated (below);
- body (compiled): the blocks against the cached text keys and values, and the tail; the residual
  is kept over the image tokens (the body's output minus ``img_in``), one per branch;
- tail (compiled): ``norm_out`` with the time row's scale, ``proj_out``, on input + residual.

One sync per step, mflux's own ``mx.eval(latents)`` (the look-ahead of app/adapters/compiled.py,
as for FLUX.2 and Z-Image): the conditional call of a gate that reads a signal takes its prelude
and the gate's measurement through the generation's ``_Split`` (a ``LookAhead``), which arms the
lifecycle's ``ahead`` hook with the call's compiled prelude and its arguments (the caption, the
geometry, block 0's cached text keys and values); at the step's end that hook builds the next
step's prelude and measurement from the next latents and the timestep the call will compute
(``Qwen21Transformer._compute_timestep``), evaluated with those latents. The next conditional call
takes them where they were built from its own latents (identity; a guard on the timestep is
evaluated with the step), else builds them itself (the first step, the first after a resumed
pass's replayed steps), and its decision reads a value already there. MagCache decides first,
from its table, and builds nothing ahead; the unconditional call reads the conditional call's
verdict and builds its own prelude (the joint path's carries its own caption).

A padded caption (or the text cache switched off) takes mflux's joint-sequence path instead
(``_forward``: text and image tokens together under a block-causal mask); the adapter splits that
one the same way, with the same signal and the residual over the image tokens. mflux's 2.1
tokenizer pads to the longest prompt, so a single caption takes the text-cache path.

The block-0 split (the first-block probe), on both paths and always compiled (mflux has no eager
2.1 forward): the probe prelude is the prelude plus block 0 (the image stream against the
caption's cached keys and values of block 0, or block 0 of the joint sequence), ending with the
signal its gate decides on (block 0's change of the image tokens; TeaCache's for an observer) and
built ahead as above; the probe body runs blocks 1.. and the tail. The conditional call decides
on block 0's change of the image tokens and keeps its residual over block 0's output; the
unconditional call of the same step reads that verdict through the plain split and keeps the
whole stack's residual, as under TeaCache. A vanilla (observing) pass runs its conditional call
through the same probe split and records block 0's change, so a probe pass resumed from vanilla
replays what it would compute.

The functions are built once per generation (mflux rebuilds its compiled forward per generation
too: parameters may change between them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
from mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer import Qwen21Transformer
from mlx import nn

from app.adapters.base import Installation
from app.adapters.common import COND, GateState, install_class_swap
from app.adapters.compiled import LookAhead, counted_compile
from app.families.qwen_image21 import FAMILY
from app.gate import LiveGate, Verdict


def _image_blocks(
    blocks: Sequence[Any],
    hidden_states: mx.array,
    text_kvs: list[tuple[mx.array, mx.array]],
    mod1: mx.array,
    mod2: mx.array,
    rope_cos: mx.array,
    rope_sin: mx.array,
) -> mx.array:
    """mflux's text-cache path over ``blocks``: each block's image stream against the cached keys
    and values of its text."""
    for block, (key_text, value_text) in zip(blocks, text_kvs, strict=True):
        hidden_states = block.image_forward(
            hidden_states, key_text, value_text, mod1, mod2, rope_cos, rope_sin
        )
    return hidden_states


def _joint_blocks_and_tail(
    tr: Qwen21Transformer,
    blocks: Sequence[Any],
    hidden_states: mx.array,
    temb: mx.array,
    mod1: mx.array,
    mod2: mx.array,
    rope_cos: mx.array,
    rope_sin: mx.array,
    attn_mask: mx.array | None,
    text_len: int,
) -> tuple[mx.array, mx.array]:
    """mflux's joint path over ``blocks`` and its tail: (noise, hidden states) of the image
    tokens."""
    for block in blocks:
        hidden_states = block(
            hidden_states,
            mod1,
            mod2,
            rope_cos,
            rope_sin,
            attn_mask,
            text_len if attn_mask is None else None,
        )
    num_image_tokens = hidden_states.shape[1] - text_len
    scale = tr.norm_out.linear(nn.silu(temb))
    scale = Qwen21Transformer._select_modulation_rows(scale, text_len, num_image_tokens)
    noise = tr.proj_out(tr.norm_out(hidden_states, scale))
    return noise[:, text_len:], hidden_states[:, text_len:]


def _image_signal(tr: Qwen21Transformer, x: mx.array, mod1: mx.array) -> mx.array:
    """TeaCache's signal: block 0's modulated image input ``img_norm1(x) · (1 + scale1)``, from
    the image tokens' modulation rows (``mod1`` over the image tokens)."""
    scale1, _ = mx.split(mod1, 2, axis=-1)
    return tr.transformer_blocks[0].img_norm1(x) * (1 + scale1)


class _CompiledImageForward:
    """mflux's ``_image_forward`` in three compiled parts (see the module's docstring). The
    prelude ends with TeaCache's signal where ``signal`` (the gate decides on it here), else it
    stops at what body and tail read."""

    def __init__(self, tr: Qwen21Transformer, traces: Counter[str], signal: bool) -> None:
        self.tr = tr
        self.signal = signal
        self.prelude = counted_compile("prelude", self._prelude, traces)
        self.body = counted_compile("body", self._body, traces)
        self.tail = counted_compile("tail", self._tail, traces)

    def _embed(self, hidden_states: mx.array, timestep: mx.array) -> tuple[mx.array, ...]:
        """``(x, temb, mod1, mod2)``: mflux's ``_image_forward`` before its blocks."""
        tr = self.tr
        num_image_tokens = hidden_states.shape[1]
        timestep_rows = mx.concatenate([timestep, mx.zeros((1,), dtype=timestep.dtype)])
        temb = tr.time_text_embed(timestep_rows)
        modulation = tr.modulation(temb)
        mod1, mod2 = mx.split(modulation, 2, axis=-1)
        mod1 = mx.broadcast_to(mod1[0][None, None, :], (1, num_image_tokens, mod1.shape[-1]))
        mod2 = mx.broadcast_to(mod2[0][None, None, :], (1, num_image_tokens, mod2.shape[-1]))
        return tr.img_in(hidden_states), temb, mod1, mod2

    def _prelude(self, hidden_states: mx.array, timestep: mx.array) -> tuple[mx.array, ...]:
        x, temb, mod1, mod2 = self._embed(hidden_states, timestep)
        if not self.signal:
            return x, temb, mod1, mod2
        return x, temb, mod1, mod2, _image_signal(self.tr, x, mod1)

    def _tail(self, hidden_states: mx.array, temb: mx.array) -> mx.array:
        tr = self.tr
        num_image_tokens = hidden_states.shape[1]
        scale = tr.norm_out.linear(nn.silu(temb))
        scale = mx.broadcast_to(scale[0][None, None, :], (1, num_image_tokens, scale.shape[-1]))
        return tr.proj_out(tr.norm_out(hidden_states, scale))

    def _body(
        self,
        x: mx.array,
        temb: mx.array,
        mod1: mx.array,
        mod2: mx.array,
        text_kvs: list[tuple[mx.array, mx.array]],
        rope_cos: mx.array,
        rope_sin: mx.array,
    ) -> tuple[mx.array, mx.array]:
        hidden_states = _image_blocks(
            self.tr.transformer_blocks, x, text_kvs, mod1, mod2, rope_cos, rope_sin
        )
        return self._tail(hidden_states, temb), hidden_states


class _CompiledJointForward:
    """mflux's ``_forward`` (the joint text + image sequence) in three compiled parts; the prelude
    as the image path's."""

    def __init__(self, tr: Qwen21Transformer, traces: Counter[str], signal: bool) -> None:
        self.tr = tr
        self.signal = signal
        self.prelude = counted_compile("joint-prelude", self._prelude, traces)
        self.body = counted_compile("joint-body", self._body, traces)
        self.tail = counted_compile("joint-tail", self._tail, traces)

    def _embed(
        self, hidden_states: mx.array, timestep: mx.array, encoder_hidden_states: mx.array
    ) -> tuple[mx.array, ...]:
        """``(x, joint, temb, mod1, mod2)``: mflux's ``_forward`` before its blocks, and the
        image tokens' embedding ``x``."""
        tr = self.tr
        text_len = encoder_hidden_states.shape[1]
        num_image_tokens = hidden_states.shape[1]
        timestep_rows = mx.concatenate([timestep, mx.zeros((1,), dtype=timestep.dtype)])
        temb = tr.time_text_embed(timestep_rows)
        modulation = tr.modulation(temb)
        mod1, mod2 = mx.split(modulation, 2, axis=-1)
        mod1 = Qwen21Transformer._select_modulation_rows(mod1, text_len, num_image_tokens)
        mod2 = Qwen21Transformer._select_modulation_rows(mod2, text_len, num_image_tokens)
        x = tr.img_in(hidden_states)
        joint = mx.concatenate([tr.txt_in(encoder_hidden_states), x], axis=1)
        return x, joint, temb, mod1, mod2

    def _prelude(
        self, hidden_states: mx.array, timestep: mx.array, encoder_hidden_states: mx.array
    ) -> tuple[mx.array, ...]:
        x, joint, temb, mod1, mod2 = self._embed(hidden_states, timestep, encoder_hidden_states)
        if not self.signal:
            return x, joint, temb, mod1, mod2
        text_len = encoder_hidden_states.shape[1]
        return x, joint, temb, mod1, mod2, _image_signal(self.tr, x, mod1[:, text_len:])

    def _body(
        self,
        joint: mx.array,
        temb: mx.array,
        mod1: mx.array,
        mod2: mx.array,
        rope_cos: mx.array,
        rope_sin: mx.array,
        attn_mask: mx.array | None,
        text_len: int,
    ) -> tuple[mx.array, mx.array]:
        tr = self.tr
        return _joint_blocks_and_tail(
            tr,
            tr.transformer_blocks,
            joint,
            temb,
            mod1,
            mod2,
            rope_cos,
            rope_sin,
            attn_mask,
            text_len,
        )

    def _tail(self, hidden_states: mx.array, temb: mx.array) -> mx.array:
        tr = self.tr
        scale = tr.norm_out.linear(nn.silu(temb))
        scale = mx.broadcast_to(scale[0][None, None, :], hidden_states.shape[:2] + scale.shape[-1:])
        return tr.proj_out(tr.norm_out(hidden_states, scale))


def _probe_step(
    gate: LiveGate,
    verdict: Verdict,
    x: mx.array,
    x1: mx.array,
    rest: Callable[[], tuple[mx.array, mx.array]],
    tail: Callable[[mx.array], mx.array],
) -> mx.array:
    """The conditional call on the block-0 split, after its verdict (the probe's on block 0's
    change of the image tokens; an observer's on TeaCache's signal, recording that change): the
    remaining blocks and the tail (``rest``), or the tail of block 0's output + the cached
    residual. The probe's residual is over block 0's output, an observer's over the stack's
    input."""
    if not gate.probes_first_block:  # an observer: the probe's trace
        gate.record_first_block(x1 - x)
    if not verdict.decision.computes:
        return tail(gate.reuse(x1, COND))
    noise, out = rest()
    if verdict.store_residual:
        gate.store_residual(out, x1 if gate.probes_first_block else x, COND)
    return noise


class _ProbeSplit:
    """A path's block-0 split; ``rest`` runs its compiled remaining blocks and tail (called on
    computed steps only). Its prelude ends with the signal the gate decides on: block 0's change
    of the image tokens (``x1 − x``) for the probe, TeaCache's for an observer."""

    body: Callable[..., tuple[mx.array, mx.array]]

    def __init__(self, probes: bool) -> None:
        self.probes = probes

    def rest(self, *args: Any) -> tuple[mx.array, mx.array]:
        return self.body(*args)

    def _signal(self, tr: Qwen21Transformer, x: mx.array, x1: mx.array, mod1: mx.array) -> mx.array:
        return x1 - x if self.probes else _image_signal(tr, x, mod1)


class _CompiledProbeImageForward(_ProbeSplit):
    """The text-cache path split after block 0 (prelude + block 0, blocks 1.. + tail)."""

    def __init__(self, plain: _CompiledImageForward, traces: Counter[str], probes: bool) -> None:
        super().__init__(probes)
        self.plain = plain
        self.prelude = counted_compile("probe-prelude", self._prelude, traces)
        self.body = counted_compile("probe-body", self._body, traces)

    def _prelude(
        self,
        hidden_states: mx.array,
        timestep: mx.array,
        text_kv0: tuple[mx.array, mx.array],
        rope_cos: mx.array,
        rope_sin: mx.array,
    ) -> tuple[mx.array, ...]:
        tr = self.plain.tr
        x, temb, mod1, mod2 = self.plain._embed(hidden_states, timestep)
        x1 = tr.transformer_blocks[0].image_forward(
            x, text_kv0[0], text_kv0[1], mod1, mod2, rope_cos, rope_sin
        )
        return x, temb, mod1, mod2, x1, self._signal(tr, x, x1, mod1)

    def _body(
        self,
        x1: mx.array,
        temb: mx.array,
        mod1: mx.array,
        mod2: mx.array,
        text_kvs: list[tuple[mx.array, mx.array]],
        rope_cos: mx.array,
        rope_sin: mx.array,
    ) -> tuple[mx.array, mx.array]:
        hidden_states = _image_blocks(
            self.plain.tr.transformer_blocks[1:], x1, text_kvs, mod1, mod2, rope_cos, rope_sin
        )
        return self.plain._tail(hidden_states, temb), hidden_states


class _CompiledProbeJointForward(_ProbeSplit):
    """The joint path split after block 0 of the joint sequence."""

    def __init__(self, plain: _CompiledJointForward, traces: Counter[str], probes: bool) -> None:
        super().__init__(probes)
        self.plain = plain
        self.prelude = counted_compile("probe-joint-prelude", self._prelude, traces)
        self.body = counted_compile("probe-joint-body", self._body, traces)

    def _prelude(
        self,
        hidden_states: mx.array,
        timestep: mx.array,
        encoder_hidden_states: mx.array,
        rope_cos: mx.array,
        rope_sin: mx.array,
        attn_mask: mx.array | None,
        text_len: int,
    ) -> tuple[mx.array, ...]:
        tr = self.plain.tr
        x, joint, temb, mod1, mod2 = self.plain._embed(
            hidden_states, timestep, encoder_hidden_states
        )
        joint1 = tr.transformer_blocks[0](
            joint,
            mod1,
            mod2,
            rope_cos,
            rope_sin,
            attn_mask,
            text_len if attn_mask is None else None,
        )
        x1 = joint1[:, text_len:]
        return x, temb, mod1, mod2, joint1, x1, self._signal(tr, x, x1, mod1[:, text_len:])

    def _body(
        self,
        joint1: mx.array,
        temb: mx.array,
        mod1: mx.array,
        mod2: mx.array,
        rope_cos: mx.array,
        rope_sin: mx.array,
        attn_mask: mx.array | None,
        text_len: int,
    ) -> tuple[mx.array, mx.array]:
        tr = self.plain.tr
        return _joint_blocks_and_tail(
            tr,
            tr.transformer_blocks[1:],
            joint1,
            temb,
            mod1,
            mod2,
            rope_cos,
            rope_sin,
            attn_mask,
            text_len,
        )


class _Split(LookAhead):
    """One generation's compiled functions (the plain split of each path and its block-0 split)
    and its look-ahead (app/adapters/compiled.py): the conditional call of a gate that reads a
    signal takes its prelude and measurement from the previous step's end, where they were
    built."""

    def __init__(self, tr: Qwen21Transformer, state: GateState, generation: int) -> None:
        super().__init__(state)
        gate, traces = state.gate, state.traces
        self.generation = generation
        # The conditional call splits after block 0 where the gate reads that block (the probe)
        # or records it (a vanilla pass): one layout for both, its prelude ends with the signal.
        self.probed = gate.probes_first_block or gate.records_first_block
        # The plain split's prelude ends with TeaCache's signal where the conditional call
        # decides on it; MagCache and the probe's unconditional call read none.
        signal = self.reads_signal and not self.probed
        self.image = _CompiledImageForward(tr, traces, signal)
        self.joint = _CompiledJointForward(tr, traces, signal)
        self.probe_image = _CompiledProbeImageForward(self.image, traces, gate.probes_first_block)
        self.probe_joint = _CompiledProbeJointForward(self.joint, traces, gate.probes_first_block)

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return Qwen21Transformer._compute_timestep(t, config)  # as the transformer's call does

    def decided(
        self,
        branch: str,
        build: Callable[..., tuple[mx.array, ...]],
        latents: mx.array,
        timestep: mx.array,
        *args: Any,
    ) -> tuple[tuple[mx.array, ...], Verdict]:
        """A call's prelude ``build(latents, timestep, *args)`` and the step's verdict. The
        conditional call of a gate that reads a signal decides on its prelude's (built at the
        previous step's end where it was); every other call reads the verdict first (MagCache
        decides from its table, the unconditional call reads the conditional's) and builds only
        what that needs."""
        if branch == COND and self.reads_signal:
            pre, measured = self.prelude_ahead(build, latents, timestep, *args)
            return pre, self.gate.decide(pre[-1], measured)
        verdict = self.gate.decide(None)
        return build(latents, timestep, *args), verdict


def _text_kvs(
    tr: Qwen21Transformer,
    encoder_hidden_states: mx.array,
    rope_cos: mx.array,
    rope_sin: mx.array,
    geometry: tuple[int, int, int],
) -> list[tuple[mx.array, mx.array]]:
    """The caption's per-block keys and values, from mflux's cache (verbatim from
    ``Qwen21Transformer.__call__``)."""
    cache = tr._text_caches.get(id(encoder_hidden_states))
    if (
        cache is None
        or cache["geometry"] != geometry
        or cache["embedding"] is not encoder_hidden_states
    ):
        cache = tr._build_text_cache(encoder_hidden_states, rope_cos, rope_sin, geometry)
        while len(tr._text_caches) >= 2:
            tr._text_caches.pop(next(iter(tr._text_caches)))
        tr._text_caches[id(encoder_hidden_states)] = cache
    return cache["text_kvs"]


class GatedQwen21Transformer(Qwen21Transformer):
    """Base of the per-installation subclasses; never instantiated."""

    _teacache: GateState
    _split: _Split | None = None  # one generation's functions: built on its first call

    def __call__(  # type: ignore[override]
        self,
        t: int | float,
        config: Any,
        hidden_states: mx.array,
        encoder_hidden_states: mx.array,
        encoder_hidden_states_mask: mx.array | None = None,
    ) -> mx.array:
        cls = type(self)
        state = cls._teacache
        call = (t, config, hidden_states, encoder_hidden_states, encoder_hidden_states_mask)
        if not state.gating:
            return Qwen21Transformer.__call__(self, *call)
        gate = state.gate
        branch = state.branch_of_call()
        if not gate.needs_signal:
            gate.decide(None)  # threshold 0: mflux's own call, untouched
            noise = Qwen21Transformer.__call__(self, *call)
            if branch == COND:
                state.record(noise)
            return noise
        generation = state.lifecycle.generation
        if cls._split is None or cls._split.generation != generation:
            cls._split = _Split(self, state, generation)
        split = cls._split
        probed = branch == COND and split.probed
        # mflux's uncompiled part, verbatim: the timestep, the geometry, the text path's choice
        timestep = Qwen21Transformer._compute_timestep(t, config)
        text_len = encoder_hidden_states.shape[1]
        geometry = (text_len, config.height // 16, config.width // 16)
        rope_cos, rope_sin, attn_mask = self._geometry(
            text_len=text_len,
            latent_height=geometry[1],
            latent_width=geometry[2],
            encoder_hidden_states_mask=encoder_hidden_states_mask,
        )
        if (attn_mask is not None or not self.use_text_cache) and probed:
            pj = split.probe_joint
            (x, temb, mod1, mod2, joint1, x1, _), verdict = split.decided(
                branch, pj.prelude, hidden_states, timestep, encoder_hidden_states, rope_cos,
                rope_sin, attn_mask, text_len,
            )  # fmt: skip
            noise = _probe_step(
                gate, verdict, x, x1,
                lambda: pj.rest(joint1, temb, mod1, mod2, rope_cos, rope_sin, attn_mask, text_len),
                lambda hidden: split.joint.tail(hidden, temb),
            )  # fmt: skip
        elif attn_mask is not None or not self.use_text_cache:
            joint = split.joint
            pre, verdict = split.decided(
                branch, joint.prelude, hidden_states, timestep, encoder_hidden_states
            )
            x, hidden, temb, mod1, mod2 = pre[:5]
            if verdict.decision.computes:
                noise, out = joint.body(
                    hidden, temb, mod1, mod2, rope_cos, rope_sin, attn_mask, text_len
                )
                if verdict.store_residual:
                    gate.store_residual(out, x, branch)
            else:
                noise = joint.tail(gate.reuse(x, branch), temb)
        else:
            text_kvs = _text_kvs(self, encoder_hidden_states, rope_cos, rope_sin, geometry)
            image_cos, image_sin = rope_cos[text_len:], rope_sin[text_len:]
            if probed:
                pi = split.probe_image
                (x, temb, mod1, mod2, x1, _), verdict = split.decided(
                    branch, pi.prelude, hidden_states, timestep, text_kvs[0], image_cos, image_sin
                )
                noise = _probe_step(
                    gate, verdict, x, x1,
                    lambda: pi.rest(x1, temb, mod1, mod2, text_kvs[1:], image_cos, image_sin),
                    lambda hidden: split.image.tail(hidden, temb),
                )  # fmt: skip
            else:
                image = split.image
                pre, verdict = split.decided(branch, image.prelude, hidden_states, timestep)
                x, temb, mod1, mod2 = pre[:4]
                if verdict.decision.computes:
                    noise, out = image.body(x, temb, mod1, mod2, text_kvs, image_cos, image_sin)
                    if verdict.store_residual:
                        gate.store_residual(out, x, branch)
                else:
                    noise = image.tail(gate.reuse(x, branch), temb)
        if branch == COND:
            state.record(noise)  # calibration pairs follow the conditional branch
        return noise


def install(pipeline: Any, gate: LiveGate) -> Installation:
    installation = install_class_swap(
        pipeline,
        gate,
        family=FAMILY,
        expected=Qwen21Transformer,
        gated_base=GatedQwen21Transformer,
    )
    return installation
