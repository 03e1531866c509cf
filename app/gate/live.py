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
)
from app.gate.events import StepEvent
from app.gate.fill import REUSE, Fill, even_positions
from app.gate.fill_memory import FillMemory
from app.gate.firstblock import GATE_NAME as FIRSTBLOCK_NAME
from app.gate.firstblock import (
    TRACE_DEPTH,
    FirstBlockParams,
    FirstBlockScalars,
    decide_firstblock,
    wants_change,
)
from app.gate.magcache import GATE_NAME as MAGCACHE_NAME
from app.gate.magcache import MagCacheParams, MagCacheScalars, decide_magcache
from app.gate.signals import DECIDES_ON, Signal, Tap, Taps

__all__ = [
    "FirstBlockGate",
    "LiveGate",
    "MagCacheGate",
    "StepEvent",
    "TeaCacheGate",
    "magnitude_ratio",
    "read_ratio",
    "rel_l1",
    "rel_l1_pair",
]

_EPS = 1e-12
# The blocks the first-block probe runs before deciding (and the vanilla pass records after).
PROBE_DEPTH = 1


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
    # What the adapter builds for ``decide`` each step: the kind's ``GateKind.signal``
    # (tests/gate/test_gate_kinds.py holds the two equal). ``Signal.none``: the adapter passes
    # None, and a skipped step runs only what its tail reads.
    signal: ClassVar[Signal] = Signal.none
    observe = False  # an observing gate measures every step and never skips (vanilla passes)
    capture_output = False  # an observer that also records the output's change (calibration)
    # The adapter splits the stack at its first block and passes ``decide`` that block's residual
    # (the first-block probe) instead of a signal built before the stack.
    probes_first_block = False

    def __init__(
        self,
        params: Any,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.params = params
        self._on_step = on_step
        self._clock = clock
        self.events: list[StepEvent] = []
        self.num_steps = 0
        self._previous_output: mx.array | None = None
        # The kept residuals, per branch, and the fill that reads them (``app.gate.fill``).
        self._residuals = FillMemory(REUSE)
        self._unevaluated: list[mx.array] = []
        self._pending: Verdict | None = None
        self._pending_output: float | None = None
        self._output_recorded = False
        self._pending_magnitude: mx.array | None = None
        self._pending_block_change: float | None = None
        self._pending_block_changes: mx.array | None = None
        self._block_recorded = False
        self._block_history: list[mx.array] = []  # observers: recent first-block residuals
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
        self._pending_output = None
        self._output_recorded = False
        self._pending_magnitude = None
        self._pending_block_change = None
        self._pending_block_changes = None
        self._block_recorded = False
        self._t_last = self._clock()

    def release(self) -> None:
        """Drop every cached array (called after the loop, before the VAE decode)."""
        self._previous_output = None
        self._residuals.release()
        self._unevaluated = []
        self._block_history = []

    @property
    @abstractmethod
    def needs_signal(self) -> bool:
        """Whether the adapter must build this step's signal and take the gated path."""

    @property
    def records_first_block(self) -> bool:
        """Whether the step must hand this gate the first block's residual on every step
        (``record_first_block``): an observing gate records the probe's trace."""
        return self.observe

    @property
    def taps(self) -> Taps:
        """What the gated step (``app.adapters.step``) builds for this gate on each step. An
        observer (a vanilla pass) decides on TeaCache's signal and records the probe's block
        residual at the probe's depth (one layout for both, so a probe pass resumed from vanilla
        replays what it would compute), the body residual and, capturing, the output."""
        decides_on = DECIDES_ON[self.signal] if self.needs_signal else None
        if not self.observe:
            split = PROBE_DEPTH if decides_on is Tap.block_residual else 0
            return Taps(decides_on, split=split, residual_from=split)
        records = {Tap.block_residual, Tap.body_residual}
        if self.capture_output:
            records.add(Tap.output)
        return Taps(decides_on, frozenset(records), split=PROBE_DEPTH)

    def record_tap(self, tap: Tap, value: mx.array) -> None:
        """An observer's record of a tap it asked for (``taps.records``)."""
        if tap is Tap.block_residual:
            self.record_first_block(value)
        elif tap is Tap.output:
            self.record_output(value)

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

    def residual(self, branch: str = "cond") -> mx.array:
        """What this skipped step adds on ``branch``: the fill's answer from the residuals kept
        (the compiled step adds it inside its compiled tail; ``reuse`` adds it eagerly)."""
        try:
            return self._residuals.residual(branch, self._index)
        except KeyError:
            raise RuntimeError(
                f"gate skipped a step with no cached residual for {branch!r}"
            ) from None

    def store_residual(self, body_out: mx.array, body_in: mx.array, branch: str = "cond") -> None:
        verdict = self._pending
        if verdict is None or not verdict.store_residual:
            return
        self.keep_residual(body_out - body_in, branch)

    def keep_residual(self, residual: mx.array, branch: str = "cond") -> None:
        """``store_residual`` for an adapter that computed ``body_out - body_in`` itself (inside
        a compiled body): kept where this step's verdict stores, else dropped."""
        verdict = self._pending
        if verdict is None or not verdict.store_residual:
            return
        previous = self._residuals.get(branch)
        if self.observe and branch == "cond" and previous is not None:
            self._pending_magnitude = magnitude_ratio(residual, previous)
            self._unevaluated.append(self._pending_magnitude)
        # Evaluated with the step's latents (see ``unevaluated``) rather than here: a separate
        # eval mid-step is an extra host sync. Both operands live until the step ends anyway.
        self._residuals.keep(branch, self._index, residual)
        self._unevaluated.append(residual)

    def record_first_block(self, residual: mx.array) -> None:
        """An observer's record of the first block's residual on the image stream (conditional
        branch; once per step): ``d`` against each of the last ``TRACE_DEPTH`` steps, reduced
        lazily and evaluated with the step's latents (no extra host sync), read at ``end_step``.
        A gate that does not observe ignores it."""
        if not self.observe or self._block_recorded:
            return
        self._block_recorded = True
        if self._block_history:
            pairs = mx.stack([rel_l1_pair(residual, past) for past in self._block_history])
            self._pending_block_changes = pairs
            self._unevaluated.append(pairs)
        self._block_history = [residual, *self._block_history][:TRACE_DEPTH]
        self._unevaluated.append(residual)

    def unevaluated(self) -> list[mx.array]:
        """Residuals stored this step and not yet materialised: evaluate them together with the
        step's latents (``GateLifecycle`` does), so storing costs no extra synchronisation."""
        pending, self._unevaluated = self._unevaluated, []
        return pending + self._residuals.unevaluated()

    def reuse(self, body_in: mx.array, branch: str = "cond") -> mx.array:
        return body_in + self.residual(branch)

    def record_output(self, output: mx.array) -> None:
        """Measure the transformer output's change against the previous step (calibration data).
        Only the first call of a step counts (under CFG: the conditional branch)."""
        if not self.capture_output or self._output_recorded:
            return
        self._output_recorded = True
        if self._previous_output is not None:
            self._pending_output = rel_l1(output, self._previous_output)
        mx.eval(output)
        self._previous_output = output

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """Work inside the block is charged to no step (live previews): the step clock's origin
        moves forward by the block's duration, whether it runs before or after ``end_step``."""
        started = self._clock()
        try:
            yield
        finally:
            self._t_last += self._clock() - started

    def end_step(self) -> StepEvent:
        if self._unevaluated:  # a driver that did not evaluate them with the latents
            mx.eval(*self.unevaluated())
        now = self._clock()
        verdict = self._pending or Verdict(self._index, Decision.computed)
        magnitude = None
        if self._pending_magnitude is not None:
            value = cast(float, self._pending_magnitude.item())  # evaluated with the latents
            magnitude = value if math.isfinite(value) else math.nan
        block_change = self._pending_block_change
        block_changes = None
        if self._pending_block_changes is not None:  # evaluated with the latents
            pairs = cast(list[list[float]], self._pending_block_changes.tolist())
            block_changes = tuple(_ratio(num, den) for num, den in pairs)
            block_change = block_changes[0]
        event = StepEvent(
            index=self._index,
            num_steps=self.num_steps,
            decision=verdict.decision,
            rel_l1=verdict.rel_l1,
            predicted=verdict.predicted,
            accumulated=verdict.accumulated,
            threshold=self.params.threshold,
            seconds=now - self._t_last,
            output_rel_l1=self._pending_output,
            gate=self.gate_name,
            mag_ratio=magnitude,
            block_change=block_change,
            block_changes=block_changes,
            fill=self._residuals.record(),
        )
        self._t_last = now
        self._pending = None
        self._pending_output = None
        self._output_recorded = False
        self._pending_magnitude = None
        self._pending_block_change = None
        self._pending_block_changes = None
        self._block_recorded = False
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


class TeaCacheGate(LiveGate):
    """TeaCache's live gate: the signal's rel-L1 change against the previous step, priced by the
    polynomial. ``observe=True`` measures the signal (and, with ``capture_output``, the output
    change) on every step but never skips: the vanilla trace. An observing gate also measures the
    body residual's magnitude ratio (``StepEvent.mag_ratio``, conditional branch), so one vanilla
    pass serves every gate's simulator and calibration."""

    gate_name = TEACACHE_NAME
    signal = Signal.modulated_input
    params: TeaCacheParams

    def __init__(
        self,
        params: TeaCacheParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        observe: bool = False,
        capture_output: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock)
        self.observe = observe
        self.capture_output = capture_output
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
        return self.params.enabled or self.observe

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
        if self.observe:
            verdict = self._observe_verdict(change)
        else:
            verdict = decide(self.params, self._scalars, self._index, self.num_steps, change)
            if not verdict.store_residual and verdict.decision.computes:
                # Forced trailing steps and numerical misses: nothing may reuse what is cached.
                self._residuals.clear()
        self._pending = verdict
        return verdict

    def _observe_verdict(self, measured: float | None) -> Verdict:
        # store_residual: observing keeps the previous residual to measure the magnitude ratio.
        if measured is None:
            return Verdict(self._index, Decision.computed, store_residual=True)
        if not math.isfinite(measured):
            return Verdict(self._index, Decision.numerical_miss, measured, store_residual=True)
        predicted, _ = predict_change(self.params, measured)
        if math.isnan(predicted):
            return Verdict(self._index, Decision.numerical_miss, measured, store_residual=True)
        return Verdict(
            self._index, Decision.computed, measured, predicted, predicted, store_residual=True
        )


class MagCacheGate(LiveGate):
    """MagCache's live gate: the residual cache, the lifecycle, ``reuse`` and the per-step events
    are every live gate's; only the decision differs. It reads no signal: ``decide`` ignores the
    array the adapter passes (MLX is lazy, so an unread signal is never computed on the eager
    paths). Never observes: the vanilla pass's observer records every kind's trace."""

    gate_name = MAGCACHE_NAME
    signal = Signal.none
    params: MagCacheParams

    def __init__(
        self,
        params: MagCacheParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock)
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
    (``reuse``). The reference is replaced only on computed steps that store. Never observes: the
    vanilla pass's observer records the probe's trace (``record_first_block``)."""

    gate_name = FIRSTBLOCK_NAME
    signal = Signal.first_block_residual
    params: FirstBlockParams
    probes_first_block = True

    def __init__(
        self,
        params: FirstBlockParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(params, on_step=on_step, clock=clock)
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
        self._pending_block_change = change
        self._pending = verdict
        return verdict
