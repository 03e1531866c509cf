"""The one gated step: any gate on any family's anatomy, eager or compiled.

A family describes its transformer once, as an ``Anatomy`` over mflux's own classes (its module in
``app.adapters``): what runs before the stack (``embed``, ``context``, ``stream``), the ordered
``blocks`` (any range of them), the tokens the tail reads (``image``) and the ``tail``, plus its
TeaCache signal. A gate declares what it reads (``LiveGate.taps``: the modulated input, the first
blocks' residual, the body's residual, the output). ``GatedStep`` runs one over the other; no
family module holds a gate's forward, and no gate knows a family.

On the conditional branch of a step:

1. ``prelude``: the embedding, and where the gate asks for them, the context, the first
   ``split`` blocks and the taps (the signal ``decide`` reads last in the look-ahead's sense);
2. ``gate.decide`` (eager), on a value the look-ahead already evaluated where compiled;
3. ``body``: the remaining blocks and the tail, and the residual over the tokens the tail reads,
   from the stack's input or from the decision's split (``Taps.residual_from``); or
4. ``tail``: the tail of ``base + cached residual``.

The unconditional branch (classifier-free guidance) reads the conditional branch's verdict, shares
its embedding where the family says the two are equal (``Anatomy.head_key``) and keeps its own
whole-stack residual. Where the pipeline's own predict is ``mx.compile``'d (mflux on Linux/CUDA and
M3+), each part is compiled once per generation and the look-ahead of ``app.adapters.compiled``
builds the next step's prelude in this step's sync; eager otherwise (M1/M2, the demo, the families
mflux never compiles), op for op the family's mflux forward, so an observing pass is bit-exact to
it.

Values that cross between the parts are pytrees (dicts, tuples, lists) of arrays, as
``mx.compile`` takes and returns them; the family picks their shape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

import mlx.core as mx

from app.adapters.branch_streams import branch_stream
from app.adapters.common import COND, UNCOND, GateState
from app.adapters.compiled import LookAhead, counted_compile
from app.gate import Verdict
from app.gate.signals import Tap

Pre = dict[str, Any]


class Anatomy(ABC):
    """A family's transformer, for one generation: its parts as the gated step calls them.

    ``rest`` is a branch's step-independent inputs (caption embeddings, positions, ...), in the
    shape the family's entry gives them; ``head``, ``ctx`` and ``state`` are the family's pytrees
    of arrays. Every method is pure MLX over mflux's classes (it may be traced by ``mx.compile``):
    no Python branching on array values, no host reads.
    """

    # Blocks the family's TeaCache signal needs run first (0: it is read before the stack).
    signal_blocks: ClassVar[int] = 0

    def __init__(self, transformer: Any) -> None:
        self.tr = transformer

    @property
    @abstractmethod
    def num_blocks(self) -> int:
        """The stack's length: ``blocks`` takes any range of ``range(num_blocks)``."""

    @abstractmethod
    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> Any:
        """``head``: what a skipped step's tail reads, and the image stream entering the stack."""

    @abstractmethod
    def stream_tokens(self, head: Any, rest: Any) -> mx.array:
        """The tokens the tail reads, as they enter the stack: a whole-stack residual's base."""

    @abstractmethod
    def context(self, head: Any, rest: Any) -> Any:
        """``ctx``: what the blocks read (caption stream, rotary embeddings, modulation)."""

    @abstractmethod
    def stream(self, head: Any, ctx: Any) -> Any:
        """``state`` entering block 0."""

    @abstractmethod
    def blocks(self, ctx: Any, state: Any, start: int, stop: int) -> Any:
        """``state`` after blocks ``start .. stop - 1`` (a transition between streams included)."""

    @abstractmethod
    def tokens(self, ctx: Any, state: Any) -> mx.array:
        """The tokens of ``state`` the tail reads (the residual's space)."""

    def image(self, ctx: Any, state: Any) -> mx.array:
        """The image tokens of ``state`` (a block residual's space); by default the tail's."""
        return self.tokens(ctx, state)

    @abstractmethod
    def tail(self, head: Any, tokens: mx.array, rest: Any) -> mx.array:
        """The branch's output from the tokens the tail reads."""

    @abstractmethod
    def signal(self, head: Any, ctx: Any, before: Any, after: Any) -> mx.array:
        """TeaCache's signal. With ``signal_blocks`` 0, ``ctx``, ``before`` and ``after`` are
        None; else the context and the states before and after that many blocks."""

    def head_key(self, rest: Any) -> Hashable:
        """Two branches of a step whose keys are equal share one ``embed`` (by default all)."""
        return ()

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        """Step ``t``'s timestep exactly as the family's entry passes it to ``embed``: the
        compiled step builds the next step's prelude ahead from it. Families mflux never
        compiles need none."""
        raise NotImplementedError("only a compiled step looks ahead")

    def compile(self, part: Callable[[str, Any], Any]) -> None:  # noqa: B027  (optional hook)
        """Where the step is compiled: compile the anatomy's own once-per-generation parts with
        ``part(name, fn)`` (a caption's step-independent stream, say). By default none."""

    # -- the whole forward, ungated ----------------------------------------------------------------
    def forward(self, latents: mx.array, timestep: Any, rest: Any) -> mx.array:
        """The branch's output with every block run: the family's mflux forward, op for op."""
        head = self.embed(latents, timestep, rest)
        ctx = self.context(head, rest)
        state = self.blocks(ctx, self.stream(head, ctx), 0, self.num_blocks)
        return self.tail(head, self.tokens(ctx, state), rest)


def _identity(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


Combine = Callable[[mx.array, mx.array, Any], mx.array]


class GatedStep(LookAhead):
    """One generation's gated step over ``anatomy`` for ``state.gate`` (its taps fixed for the
    generation), compiled where ``compiled``.

    ``step`` runs a whole step (a predict call: both branches and ``combine``); ``cond`` and
    ``uncond`` one branch each (a transformer call). Compiled, ``step`` is four functions for both
    branches together (prelude, measure, body, tail), traced once per generation; eager, each
    branch runs in its ``branch_stream`` (two CPU streams where the caller opened them)."""

    def __init__(
        self,
        anatomy: Anatomy,
        state: GateState,
        *,
        compiled: bool,
        combine: Combine | None = None,
    ) -> None:
        super().__init__(state, compiled=compiled)
        self.anatomy = anatomy
        self.combine = combine
        taps = state.gate.taps
        self.taps = taps
        signal_blocks = anatomy.signal_blocks if taps.wants(Tap.modulated_input) else 0
        self.split = max(taps.split, signal_blocks)
        self.signal_blocks = signal_blocks
        # The taps a recorder asks for that the prelude builds (the body's residual and the
        # output reach it through ``keep_residual`` and ``GateState.record``).
        self.records = tuple(
            tap
            for tap in (Tap.modulated_input, Tap.block_residual)
            if tap in taps.records and (tap is not Tap.block_residual or taps.split)
        )
        part = (lambda name, fn: counted_compile(name, fn, state.traces)) if compiled else _identity
        self.prelude = part("prelude", self._prelude)
        self.body = part("body", self._step_body)
        self.tail = part("tail", self._step_tail)
        # A transformer-call family runs its branches one call each (``cond``, ``uncond``).
        self.cond_body = part("body", self._forward)
        self.cond_tail = part("tail", self._tokens_tail)
        self.uncond_embed = part("uncond-embed", anatomy.embed)
        self.uncond_body = part("uncond-body", self._forward)
        self.uncond_tail = part("uncond-tail", self._tokens_tail)
        if compiled:
            anatomy.compile(part)
        self._head: tuple[mx.array | None, Hashable, Any] = (None, None, None)

    def next_timestep(self, config: Any, t: int) -> mx.array:  # type: ignore[override]
        return self.anatomy.next_timestep(config, t)

    # -- the parts (traced once per generation where compiled) ------------------------------------
    def _prelude(self, latents: mx.array, timestep: Any, rest: Any) -> Pre:
        """The conditional branch up to its decision: the embedding, and where the gate asks,
        the context, the first ``split`` blocks and the taps."""
        a, taps, split = self.anatomy, self.taps, self.split
        head = a.embed(latents, timestep, rest)
        pre: Pre = {"head": head}
        taken: dict[Tap, mx.array] = {}
        if split:
            ctx = a.context(head, rest)
            before = a.stream(head, ctx)
            after = a.blocks(ctx, before, 0, split)
            pre["ctx"], pre["state"] = ctx, after
            if taps.wants(Tap.modulated_input):
                if self.signal_blocks:
                    at = after
                    if self.signal_blocks != split:
                        at = a.blocks(ctx, before, 0, self.signal_blocks)
                    taken[Tap.modulated_input] = a.signal(head, ctx, before, at)
                else:
                    taken[Tap.modulated_input] = a.signal(head, None, None, None)
            if taps.residual_from:
                pre["base"] = a.tokens(ctx, after)
            if taps.wants(Tap.block_residual):
                taken[Tap.block_residual] = a.image(ctx, after) - a.image(ctx, before)
        elif taps.wants(Tap.modulated_input):
            taken[Tap.modulated_input] = a.signal(head, None, None, None)
        pre["records"] = {tap.value: taken[tap] for tap in self.records}
        if taps.decides_on is not None:
            pre["signal"] = taken[taps.decides_on]
        return pre

    def _base(self, pre: Pre, rest: Any) -> mx.array:
        """What the cached residual is added to: the stack's input, or the decision's split."""
        return pre["base"] if "base" in pre else self.anatomy.stream_tokens(pre["head"], rest)

    def _forward(self, pre: Pre, rest: Any) -> tuple[mx.array, mx.array]:
        """The rest of the stack and the tail: ``(out, tokens)``, the tokens the tail read."""
        a = self.anatomy
        head = pre["head"]
        if "state" in pre:
            ctx, state, start = pre["ctx"], pre["state"], self.split
        else:
            ctx = a.context(head, rest)
            state, start = a.stream(head, ctx), 0
        tokens = a.tokens(ctx, a.blocks(ctx, state, start, a.num_blocks))
        return a.tail(head, tokens, rest), tokens

    def _body(self, pre: Pre, rest: Any) -> tuple[mx.array, mx.array]:
        """One branch computed: ``(out, residual)``, the residual over the tokens the tail
        reads."""
        out, tokens = self._forward(pre, rest)
        return out, tokens - self._base(pre, rest)

    def _tail(self, pre: Pre, residual: mx.array, rest: Any) -> mx.array:
        """One branch skipped: the tail of ``base + residual``."""
        return self.anatomy.tail(pre["head"], self._base(pre, rest) + residual, rest)

    def _tokens_tail(self, pre: Pre, tokens: mx.array, rest: Any) -> mx.array:
        return self.anatomy.tail(pre["head"], tokens, rest)

    def _step_body(
        self, pre: Pre, rest: Any, upre: Pre | None, urest: Any, guidance: Any
    ) -> tuple[mx.array, ...]:
        out, residual = self._body(pre, rest)
        if upre is None:
            return out, residual
        negative, uresidual = self._body(upre, urest)
        assert self.combine is not None
        return self.combine(out, negative, guidance), residual, uresidual

    def _step_tail(
        self,
        pre: Pre,
        rest: Any,
        residual: mx.array,
        upre: Pre | None,
        urest: Any,
        uresidual: mx.array | None,
        guidance: Any,
    ) -> mx.array:
        out = self._tail(pre, residual, rest)
        if upre is None or uresidual is None:
            return out
        assert self.combine is not None
        return self.combine(out, self._tail(upre, uresidual, urest), guidance)

    # -- driving a step ----------------------------------------------------------------------------
    def _decide(self, latents: mx.array, timestep: Any, rest: Any) -> tuple[Pre, Verdict]:
        """The conditional branch's prelude and the step's verdict (a gate that decides on a tap
        or records one reads it from the prelude, built ahead where compiled, so the vanilla
        recorder's pass runs the path a gated pass runs; one that reads none decides first), its
        records handed to the gate."""
        gate = self.gate
        if self.taps.decides_on is not None or self.records:
            if self.compiled:
                pre, measured = self.prelude_ahead(self.prelude, latents, timestep, rest)
            else:
                pre, measured = self.prelude(latents, timestep, rest), None
            verdict = gate.decide(pre.get("signal"), measured)
        else:
            verdict = gate.decide(None)
            pre = self.prelude(latents, timestep, rest)
        for tap, value in pre["records"].items():
            gate.record_tap(Tap(tap), value)
        self._head = (latents, self.anatomy.head_key(rest), pre["head"])
        return pre, verdict

    def _uncond_pre(self, latents: mx.array, timestep: Any, rest: Any) -> Pre:
        shared_latents, key, head = self._head
        if shared_latents is not latents or key != self.anatomy.head_key(rest):
            head = self.uncond_embed(latents, timestep, rest)
        return {"head": head}

    def step(
        self, latents: mx.array, timestep: Any, rest: Any, urest: Any, guidance: Any
    ) -> mx.array:
        """A whole step: the conditional branch, and with ``urest`` the unconditional one and
        their combination."""
        if not self.compiled:
            with branch_stream(0):
                out = self.cond(latents, timestep, rest)
            if urest is None:
                return out
            with branch_stream(1):
                negative = self.uncond(latents, timestep, urest)
            assert self.combine is not None
            return self.combine(out, negative, guidance)
        gate = self.gate
        pre, verdict = self._decide(latents, timestep, rest)
        upre = None if urest is None else self._uncond_pre(latents, timestep, urest)
        if verdict.decision.computes:
            out, *residuals = self.body(pre, rest, upre, urest, guidance)
            if verdict.store_residual:
                for branch, residual in zip((COND, UNCOND), residuals, strict=False):
                    gate.keep_residual(residual, branch)
            return out
        uresidual = None if upre is None else gate.residual(UNCOND)
        return self.tail(pre, rest, gate.residual(COND), upre, urest, uresidual, guidance)

    def cond(self, latents: mx.array, timestep: Any, rest: Any) -> mx.array:
        """The conditional branch alone: the step's decision, then its body or its tail."""
        pre, verdict = self._decide(latents, timestep, rest)
        return self._branch(pre, rest, verdict, COND, self.cond_body, self.cond_tail)

    def uncond(self, latents: mx.array, timestep: Any, rest: Any) -> mx.array:
        """The unconditional branch alone: the conditional branch's verdict, its own
        whole-stack residual; the step's embedding where the family says the two share it."""
        verdict = self.gate.decide(None)  # the conditional branch's
        pre = self._uncond_pre(latents, timestep, rest)
        return self._branch(pre, rest, verdict, UNCOND, self.uncond_body, self.uncond_tail)

    def _branch(
        self,
        pre: Pre,
        rest: Any,
        verdict: Verdict,
        branch: str,
        body: Callable[..., tuple[mx.array, mx.array]],
        tail: Callable[..., mx.array],
    ) -> mx.array:
        """One branch after the verdict; the gate sees the residual's two ends and adds it itself
        (``store_residual``, ``reuse``: two element-wise ops outside any compiled part)."""
        gate = self.gate
        if not verdict.decision.computes:
            return tail(pre, gate.reuse(self._base(pre, rest), branch), rest)
        out, tokens = body(pre, rest)
        if verdict.store_residual:
            gate.store_residual(tokens, self._base(pre, rest), branch)
        return out
