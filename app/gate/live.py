"""The live gates: MLX arrays in, one decision per denoising step out.

A model adapter drives it once per step::

    verdict = gate.decide(signal)           # signal is None when ``gate.needs_signal`` is False
                                            # (or ``gate.signal`` is ``Signal.none``)
    if verdict.decision.computes:
        out = body(x)
        gate.store_residual(out, x)         # no-op unless this step should seed the cache
    else:
        out = gate.reuse(x)
    ...
    gate.end_step()                         # from the loop callback, latents evaluated

A gate declares what the step hands it (``taps``): the tap it decides on, and for the vanilla
pass's recorder (``VanillaRecorder``) the taps every kind records (``record_tap``). Each kind's
record of a vanilla step is its own (a ``TapRecorder``, built by ``GateKind.recorder``), so one
vanilla pass serves every kind's simulator, plot and calibration.

State lives in this plain object, never on an ``nn.Module`` (an array attribute there would become
a parameter). Under classifier-free guidance one decision serves both branches and each branch keeps
its own residual (``branch="uncond"``).

A kind that reads a signal measures it against the previous step's (``anchor``) with
``measure``, a pure MLX function. ``decide`` computes that measurement itself and reads it (a host
sync), unless the adapter hands it one already evaluated: the split-compiled adapters build the
next step's signal and its measurement into the graph evaluated with this step's latents, so
``decide`` reads a value that is already there (app/adapters/compiled.py).
"""

from __future__ import annotations

import contextlib
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, cast

import mlx.core as mx

from app.gate.decision import GATE_NAME as TEACACHE_NAME
from app.gate.decision import (
    Decision,
    GateConfigError,
    GateScalars,
    TeaCacheParams,
    Verdict,
    decide,
    predict_change,
    teacache_figures,
)
from app.gate.events import VANILLA, Figure, Figures, StepEvent
from app.gate.fill import REUSE, Fill, even_positions
from app.gate.fill_memory import FillMemory
from app.gate.firstblock import GATE_NAME as FIRSTBLOCK_NAME
from app.gate.firstblock import (
    TRACE_DEPTH,
    FirstBlockParams,
    FirstBlockScalars,
    decide_firstblock,
    firstblock_figures,
    wants_change,
)
from app.gate.magcache import GATE_NAME as MAGCACHE_NAME
from app.gate.magcache import MagCacheParams, MagCacheScalars, decide_magcache, magcache_figures
from app.gate.signals import DECIDES_ON, Signal, Tap, Taps

__all__ = [
    "BlockChangeRecorder",
    "FirstBlockGate",
    "LiveGate",
    "MagCacheGate",
    "MagnitudeRecorder",
    "SignalRecorder",
    "StepEvent",
    "TapRecorder",
    "TeaCacheGate",
    "VanillaRecorder",
    "magnitude_ratio",
    "read_ratio",
    "rel_l1",
    "rel_l1_pair",
]

_EPS = 1e-12
# The blocks the first-block probe runs before deciding (and its recorder records after).
PROBE_DEPTH = 1
COND = "cond"  # the conditional branch: the one a kind's record follows


def rel_l1_pair(current: mx.array, previous: mx.array) -> mx.array:
    """``[mean|cur − prev|, mean|prev|]`` reduced in float32, as one array (one host sync)."""
    diff = mx.abs(current - previous).astype(mx.float32)
    return mx.stack([mx.mean(diff), mx.mean(mx.abs(previous).astype(mx.float32))])


def magnitude_ratio(current: mx.array, previous: mx.array) -> mx.array:
    """MagCache's calibration measure, lazily: the mean over tokens of ``‖current‖ / ‖previous‖``
    with the norms over the feature axis, in float32 (the reference's ``norm_ratio`` in
    ``magcache_calibration``, MagCache4FLUX/magcache_flux.py @ df81cb1)."""
    cur = mx.linalg.norm(current.astype(mx.float32), axis=-1)
    prev = mx.linalg.norm(previous.astype(mx.float32), axis=-1)
    return mx.mean(cur / mx.maximum(prev, _EPS))


def _ratio(num: float, den: float) -> float:
    value = num / max(den, _EPS)
    return value if math.isfinite(value) else math.nan


def read_ratio(pair: mx.array) -> float:
    """``num / den`` of a ``rel_l1_pair``, read on the host: a sync unless ``pair`` was evaluated
    already (lab/bench/step_work.py counts it by that)."""
    num, den = cast(list[float], pair.tolist())
    return _ratio(num, den)


def rel_l1(current: mx.array, previous: mx.array) -> float:
    return read_ratio(rel_l1_pair(current, previous))


class LiveGate(ABC):
    """What every live gate shares, whatever decides: the residual cache (one per CFG branch),
    the per-step ``StepEvent``s, the step clock and the lifecycle. A kind's subclass sets
    ``gate_name`` and implements ``decide`` (and ``needs_signal``); the adapters drive any
    ``LiveGate`` the same way, through decide / store_residual / reuse / end_step."""

    gate_name = ""
    # What the step builds for ``decide`` each step: the kind's ``GateKind.signal``
    # (tests/gate/test_gate_kinds.py holds the two equal). ``Signal.none``: the step passes
    # None, and a skipped step runs only what its tail reads.
    signal: ClassVar[Signal] = Signal.none
    # The blocks run before the decision where the kind decides on their residual
    # (``Tap.block_residual``); a skipped step then adds only the rest's cached change.
    depth: ClassVar[int] = 0

    def __init__(
        self,
        params: Any,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        figures: Callable[[Verdict], Figures] | None = None,
    ) -> None:
        self.params = params
        self._figures = self.verdict_figures if figures is None else figures
        self._on_step = on_step
        self._clock = clock
        self.events: list[StepEvent] = []
        self.num_steps = 0
        # The kept residuals, per branch, and the fill that reads them (``app.gate.fill``).
        self._residuals = FillMemory(REUSE)
        self._unevaluated: list[mx.array] = []
        self._pending: Verdict | None = None
        self._index = 0
        self._t_last = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def fill(self) -> Fill:
        """What a skipped step adds (``app.gate.fill``; ``reuse`` unless set)."""
        return self._residuals.fill

    @fill.setter
    def fill(self, fill: Fill) -> None:
        self._residuals.fill = fill

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        """Start a generation of ``num_steps`` active steps: drop every cached array and reset.
        ``positions``: each active step's place on the schedule (its sigma), which a forecast
        spaces its differences by; None: evenly spaced."""
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 0:
            raise GateConfigError(
                f"num_steps must be a whole number of steps ≥ 0, got {num_steps!r}"
            )
        self.release()
        self._residuals.begin(even_positions(num_steps) if positions is None else positions)
        self.events = []
        self.num_steps = num_steps
        self._index = 0
        self._pending = None
        self._t_last = self._clock()

    def release(self) -> None:
        """Drop every cached array (called after the loop, before the VAE decode)."""
        self._residuals.release()
        self._unevaluated = []

    @property
    @abstractmethod
    def needs_signal(self) -> bool:
        """Whether the adapter must build this step's signal and take the gated path."""

    @property
    def taps(self) -> Taps:
        """What the gated step (``app.adapters.step``) builds for this gate on each step: the tap
        its kind decides on (none at threshold 0), the blocks run before it and where the cached
        residual starts."""
        decides_on = DECIDES_ON[self.signal] if self.needs_signal else None
        split = self.depth if decides_on is Tap.block_residual else 0
        return Taps(decides_on, split=split, residual_from=split)

    def record_tap(self, tap: Tap, value: mx.array) -> None:  # noqa: B027  (optional hook)
        """A tap this gate asked to record (``taps.records``); a deciding gate records none."""

    @property
    def records_output(self) -> bool:
        """Whether the step hands this gate its output (``Tap.output``) once per step."""
        return Tap.output in self.taps.records

    @property
    def step_index(self) -> int:
        return self._index

    @property
    def cached_branches(self) -> tuple[str, ...]:
        return tuple(self._residuals)

    # -- per step -----------------------------------------------------------------------------
    @abstractmethod
    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        """Decide the current step. Call once per step, before the body; a second call in the
        same step (CFG pairing) returns the same verdict. ``measured``: ``measure(signal,
        anchor)`` built (and best evaluated) by the adapter; None: computed here."""

    @property
    def anchor(self) -> mx.array | None:
        """What ``measure`` compares this step's signal with (the previous step's signal); None
        while there is nothing to compare with (the first step) or the kind reads no signal."""
        return None

    @staticmethod
    def measure(signal: mx.array, anchor: mx.array) -> mx.array:
        """The kind's measurement of ``signal`` against ``anchor``, lazily and in MLX alone (an
        adapter may trace it into a compiled function): the relative L1 change's two means."""
        return rel_l1_pair(signal, anchor)

    def residual(self, branch: str = COND) -> mx.array:
        """What this skipped step adds on ``branch``: the fill's answer from the residuals kept
        (the compiled step adds it inside its compiled tail; ``reuse`` adds it eagerly)."""
        try:
            return self._residuals.residual(branch, self._index)
        except KeyError:
            raise RuntimeError(
                f"gate skipped a step with no cached residual for {branch!r}"
            ) from None

    def store_residual(self, body_out: mx.array, body_in: mx.array, branch: str = COND) -> None:
        verdict = self._pending
        if verdict is None or not verdict.store_residual:
            return
        self.keep_residual(body_out - body_in, branch)

    def keep_residual(self, residual: mx.array, branch: str = COND) -> None:
        """``store_residual`` for an adapter that computed ``body_out - body_in`` itself (inside
        a compiled body): kept where this step's verdict stores, else dropped."""
        verdict = self._pending
        if verdict is None or not verdict.store_residual:
            return
        # Evaluated with the step's latents (see ``unevaluated``) rather than here: a separate
        # eval mid-step is an extra host sync. Both operands live until the step ends anyway.
        self._residuals.keep(branch, self._index, residual)
        self._unevaluated.append(residual)

    def unevaluated(self) -> list[mx.array]:
        """Arrays stored this step and not yet materialised: evaluate them together with the
        step's latents (``GateLifecycle`` does), so storing costs no extra synchronisation."""
        pending, self._unevaluated = self._unevaluated, []
        return pending + self._residuals.unevaluated()

    def reuse(self, body_in: mx.array, branch: str = COND) -> mx.array:
        return body_in + self.residual(branch)

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """Work inside the block is charged to no step (live previews): the step clock's origin
        moves forward by the block's duration, whether it runs before or after ``end_step``."""
        started = self._clock()
        try:
            yield
        finally:
            self._t_last += self._clock() - started

    @property
    def threshold(self) -> float:
        return float(self.params.threshold)

    @staticmethod
    def verdict_figures(verdict: Verdict) -> Figures:
        """This gate's kind's figures of a step it decided (``GateKind.verdict_figures``, the
        same as a simulated step's): a shipped gate class names its rule's; a kind's
        ``make_live`` hands its own to any gate (``figures``)."""
        return {}

    def step_signals(self, verdict: Verdict) -> dict[str, Figures]:
        """The step's figures by kind: this gate's kind's, from its verdict."""
        return {self.gate_name: dict(self._figures(verdict))}

    def end_step(self) -> StepEvent:
        if self._unevaluated:  # a driver that did not evaluate them with the latents
            mx.eval(*self.unevaluated())
        now = self._clock()
        verdict = self._pending or Verdict(self._index, Decision.computed)
        event = StepEvent(
            self._index,
            self.num_steps,
            verdict.decision,
            threshold=self.threshold,
            seconds=now - self._t_last,
            gate=self.gate_name,
            accumulated=verdict.accumulated,
            signals=self.step_signals(verdict),
            fill=self._residuals.record(),
        )
        self._t_last = now
        self._pending = None
        self._index += 1
        self.events.append(event)
        if self._on_step is not None:
            self._on_step(event)
        return event

    # -- summaries ----------------------------------------------------------------------------
    @property
    def pattern(self) -> str:
        return "".join(e.decision.letter for e in self.events)

    @property
    def skipped(self) -> int:
        return sum(e.decision is Decision.skipped for e in self.events)

    @property
    def computed(self) -> int:
        return sum(e.decision.computes for e in self.events)


class TapRecorder(ABC):
    """What one gate kind records on a vanilla pass (``GateKind.recorder``): the taps it asks for
    and, per step, its figures (``StepEvent.signals[kind]``). The ``VanillaRecorder`` hands it
    each tap once per step, on the conditional branch; what ``record`` returns is evaluated with
    the step's latents (no host sync of its own), and ``figures`` reads it after that sync."""

    kind: str  # the kind's name: its section of the step
    taps: frozenset[Tap]
    depth: int = 0  # the blocks before its ``Tap.block_residual``

    def begin(self) -> None:  # noqa: B027  (optional hook)
        """A new generation: forget every step before."""

    def release(self) -> None:  # noqa: B027  (optional hook)
        """Drop every array kept between steps."""

    @abstractmethod
    def record(self, tap: Tap, value: mx.array) -> Sequence[mx.array]:
        """One tap of this step; returns the arrays to evaluate with the step's latents."""

    @abstractmethod
    def figures(self) -> dict[str, Figure]:
        """This step's figures (after the step's sync); the next step starts afresh."""


class VanillaRecorder(LiveGate):
    """The vanilla pass's gate: every step computes, and every registered kind records its own
    trace of the run (``app.gate.kinds.vanilla_recorder`` asks each kind for its ``TapRecorder``).
    Its taps are the union of theirs: the step builds each one once and hands it to the kinds
    that asked (the body's residual through ``keep_residual``, the output through
    ``record_tap``). It decides on nothing, so its step is the family's forward op for op."""

    gate_name = VANILLA

    def __init__(
        self,
        recorders: Sequence[TapRecorder],
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(None, on_step=on_step, clock=clock)
        self.recorders = tuple(recorders)
        wanted = frozenset(tap for r in self.recorders for tap in r.taps)
        depths = {r.depth for r in self.recorders if Tap.block_residual in r.taps}
        if len(depths) > 1:
            raise GateConfigError(
                f"the vanilla pass records one block residual, asked at depths {sorted(depths)}"
            )
        split = depths.pop() if depths else 0
        self._taps = Taps(None, wanted, split=split)
        self._recorded: set[Tap] = set()

    @property
    def needs_signal(self) -> bool:
        return True  # the gated step builds its taps on every step

    @property
    def taps(self) -> Taps:
        return self._taps

    @property
    def threshold(self) -> float:
        return 0.0

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self._recorded = set()
        for recorder in self.recorders:
            recorder.begin()

    def release(self) -> None:
        super().release()
        for recorder in self.recorders:
            recorder.release()

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if self._pending is None:  # a second call in the same step (CFG pairing) keeps it
            stores = Tap.body_residual in self._taps.records  # the residual reaches the recorders
            self._pending = Verdict(self._index, Decision.computed, store_residual=stores)
        return self._pending

    def record_tap(self, tap: Tap, value: mx.array) -> None:
        """Hands ``tap`` to the kinds that asked for it, once per step (the conditional branch:
        the first call of a step)."""
        if tap in self._recorded:
            return
        self._recorded.add(tap)
        for recorder in self.recorders:
            if tap in recorder.taps:
                self._unevaluated.extend(recorder.record(tap, value))

    def keep_residual(self, residual: mx.array, branch: str = COND) -> None:
        """The body's residual is recorded (conditional branch), never cached: nothing reuses
        it."""
        if branch == COND and self._pending is not None and self._pending.store_residual:
            self.record_tap(Tap.body_residual, residual)

    def reuse(self, body_in: mx.array, branch: str = COND) -> mx.array:
        raise RuntimeError("the vanilla pass computes every step")

    def step_signals(self, verdict: Verdict) -> dict[str, Figures]:
        return {recorder.kind: recorder.figures() for recorder in self.recorders}

    def end_step(self) -> StepEvent:
        event = super().end_step()
        self._recorded = set()
        return event


class SignalRecorder(TapRecorder):
    """TeaCache's record of a vanilla step: the signal's rel-L1 change against the previous
    step's (``rel_l1``) priced by the variant's polynomial (``predicted``, the plot's series),
    and where calibrating, the output's change against the previous step's (``output_rel_l1``,
    a host sync a step: the polynomial's y)."""

    taps = frozenset({Tap.modulated_input})

    def __init__(self, kind: str, params: TeaCacheParams, *, calibrating: bool = False) -> None:
        self.kind = kind
        self.params = params
        self.calibrating = calibrating
        if calibrating:
            self.taps = frozenset({Tap.modulated_input, Tap.output})
        self._anchor: mx.array | None = None
        self._pair: mx.array | None = None
        self._previous_output: mx.array | None = None
        self._output_change: float | None = None

    def begin(self) -> None:
        self.release()
        self._pair = None
        self._output_change = None

    def release(self) -> None:
        self._anchor = None
        self._previous_output = None

    def record(self, tap: Tap, value: mx.array) -> Sequence[mx.array]:
        if tap is Tap.output:
            if self._previous_output is not None:
                self._output_change = rel_l1(value, self._previous_output)
            mx.eval(value)
            self._previous_output = value
            return ()
        # Consecutive-delta anchoring: always against the previous step's signal, so the trace
        # is the vanilla trace the simulator replays.
        if self._anchor is not None:
            self._pair = rel_l1_pair(value, self._anchor)
        self._anchor = value
        return (value,) if self._pair is None else (value, self._pair)

    def figures(self) -> dict[str, Figure]:
        pair, self._pair = self._pair, None
        output, self._output_change = self._output_change, None
        measured: float | None = None if pair is None else read_ratio(pair)
        predicted: float | None = None
        if measured is not None and math.isfinite(measured):
            value, _ = predict_change(self.params, measured)
            predicted = None if math.isnan(value) else value
        found: dict[str, Figure] = {"rel_l1": measured, "predicted": predicted}
        if self.calibrating:
            found["output_rel_l1"] = output
        return found


class MagnitudeRecorder(TapRecorder):
    """MagCache's record of a vanilla step: the body residual's magnitude ratio against the
    previous step's (``ratio``; the reference's calibration measure)."""

    taps = frozenset({Tap.body_residual})

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._previous: mx.array | None = None
        self._ratio: mx.array | None = None

    def begin(self) -> None:
        self.release()
        self._ratio = None

    def release(self) -> None:
        self._previous = None

    def record(self, tap: Tap, value: mx.array) -> Sequence[mx.array]:
        if self._previous is not None:
            self._ratio = magnitude_ratio(value, self._previous)
        self._previous = value
        return (value,) if self._ratio is None else (value, self._ratio)

    def figures(self) -> dict[str, Figure]:
        ratio, self._ratio = self._ratio, None
        if ratio is None:
            return {"ratio": None}
        value = cast(float, ratio.item())  # evaluated with the latents
        return {"ratio": value if math.isfinite(value) else math.nan}


class BlockChangeRecorder(TapRecorder):
    """The first-block probe's record of a vanilla step: its first blocks' residual (image
    stream) against each of the last ``TRACE_DEPTH`` steps', nearest first (``changes``; the
    simulator reads the one its own last computed step needs), and the nearest (``change``)."""

    taps = frozenset({Tap.block_residual})

    def __init__(self, kind: str, depth: int = PROBE_DEPTH, history: int = TRACE_DEPTH) -> None:
        self.kind = kind
        self.depth = depth
        self.history = history
        self._past: list[mx.array] = []
        self._pairs: mx.array | None = None

    def begin(self) -> None:
        self.release()
        self._pairs = None

    def release(self) -> None:
        self._past = []

    def record(self, tap: Tap, value: mx.array) -> Sequence[mx.array]:
        if self._past:
            self._pairs = mx.stack([rel_l1_pair(value, past) for past in self._past])
        self._past = [value, *self._past][: self.history]
        return (value,) if self._pairs is None else (value, self._pairs)

    def figures(self) -> dict[str, Figure]:
        pairs, self._pairs = self._pairs, None
        if pairs is None:
            return {"change": None, "changes": None}
        rows = cast(list[list[float]], pairs.tolist())  # evaluated with the latents
        changes = tuple(_ratio(num, den) for num, den in rows)
        return {"change": changes[0], "changes": changes}


class TeaCacheGate(LiveGate):
    """TeaCache's live gate: the signal's rel-L1 change against the previous step, priced by the
    polynomial. Its vanilla record is ``SignalRecorder``'s."""

    gate_name = TEACACHE_NAME
    signal = Signal.modulated_input
    verdict_figures = staticmethod(teacache_figures)
    params: TeaCacheParams

    def __init__(
        self,
        params: TeaCacheParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        figures: Callable[[Verdict], Figures] | None = None,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock, figures=figures)
        self._scalars = GateScalars()
        self._anchor: mx.array | None = None

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self._scalars = GateScalars()

    def release(self) -> None:
        super().release()
        self._anchor = None

    @property
    def needs_signal(self) -> bool:
        return self.params.enabled

    @property
    def anchor(self) -> mx.array | None:
        return self._anchor

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if self._pending is not None:
            return self._pending  # a second transformer call in the same step (CFG pairing)
        change: float | None = None
        if signal is not None and self.needs_signal:
            if self._anchor is not None:
                if measured is None:
                    measured = self.measure(signal, self._anchor)
                change = read_ratio(measured)  # no sync where the adapter evaluated it already
            else:
                # Evaluated with the step's latents: a lazy anchor would pin its whole graph
                # until the next step, and an eval of its own here would be a sync.
                self._unevaluated.append(signal)
            # Consecutive-delta anchoring: the anchor is always the previous step's signal, also
            # after a numerical miss, so the measured trace is the vanilla trace and the
            # simulator replays this gate step for step.
            self._anchor = signal
        verdict = decide(self.params, self._scalars, self._index, self.num_steps, change)
        if not verdict.store_residual and verdict.decision.computes:
            # Forced trailing steps and numerical misses: nothing may reuse what is cached.
            self._residuals.clear()
        self._pending = verdict
        return verdict


class MagCacheGate(LiveGate):
    """MagCache's live gate: the residual cache, the lifecycle, ``reuse`` and the per-step events
    are every live gate's; only the decision differs. It reads no signal: ``decide`` ignores the
    array the adapter passes (MLX is lazy, so an unread signal is never computed on the eager
    paths). Its vanilla record (the magnitude ratios its table is made of) is
    ``MagnitudeRecorder``'s."""

    gate_name = MAGCACHE_NAME
    signal = Signal.none
    verdict_figures = staticmethod(magcache_figures)
    params: MagCacheParams

    def __init__(
        self,
        params: MagCacheParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        figures: Callable[[Verdict], Figures] | None = None,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock, figures=figures)
        self._mag = MagCacheScalars()
        self._table: tuple[float, ...] = ()

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self._mag = MagCacheScalars()
        self._table = self.params.ratios_for(num_steps) if num_steps else ()

    @property
    def needs_signal(self) -> bool:
        # "Needs the gated path": at threshold 0 the adapters run the plain forward.
        return self.params.enabled

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if self._pending is not None:
            return self._pending  # a second transformer call in the same step (CFG pairing)
        verdict = decide_magcache(self.params, self._mag, self._index, self.num_steps, self._table)
        self._pending = verdict
        return verdict


class FirstBlockGate(LiveGate):
    """The first-block probe's live gate (``app.gate.firstblock``): the adapter runs the first
    block and passes its residual on the image stream to ``decide``; the gate compares it with the
    last computed step's (only on steps where the rule reads it: one host sync, none where a
    split-compiled adapter evaluated the measurement with the previous step's latents), and on a
    skip the adapter adds the remaining blocks' cached residual to the first block's output
    (``reuse``). The reference is replaced only on computed steps that store. Its vanilla record
    is ``BlockChangeRecorder``'s."""

    gate_name = FIRSTBLOCK_NAME
    signal = Signal.first_block_residual
    verdict_figures = staticmethod(firstblock_figures)
    depth = PROBE_DEPTH
    params: FirstBlockParams

    def __init__(
        self,
        params: FirstBlockParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        figures: Callable[[Verdict], Figures] | None = None,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock, figures=figures)
        self._probe = FirstBlockScalars()
        self._reference: mx.array | None = None

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self._probe = FirstBlockScalars()

    def release(self) -> None:
        super().release()
        self._reference = None

    @property
    def needs_signal(self) -> bool:
        # "Needs the probe's path": at threshold 0 the adapters run the plain forward.
        return self.params.enabled

    @property
    def anchor(self) -> mx.array | None:
        return self._reference

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if self._pending is not None:
            return self._pending  # a second transformer call in the same step (CFG pairing)
        change: float | None = None
        wants = wants_change(self.params, self._probe, self._index, self.num_steps)
        if signal is not None and self._reference is not None and wants:
            if measured is None:
                measured = self.measure(signal, self._reference)
            # The step's one host sync, none where the adapter evaluated it already.
            change = read_ratio(measured)
        verdict = decide_firstblock(self.params, self._probe, self._index, self.num_steps, change)
        if verdict.store_residual and signal is not None:
            # Evaluated with the step's latents (``unevaluated``), not here: no extra sync.
            self._reference = signal
            self._unevaluated.append(signal)
        elif verdict.decision.computes and not verdict.store_residual:
            # The last steps and numerical misses: nothing may reuse what is cached.
            self._residuals.clear()
            self._reference = None
        self._pending = verdict
        return verdict
