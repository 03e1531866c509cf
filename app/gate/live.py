"""The live TeaCache gate: MLX arrays in, one decision per denoising step out.

A model adapter drives it once per step::

    verdict = gate.decide(signal)           # signal is None when ``gate.needs_signal`` is False
    if verdict.decision.computes:
        out = body(x)
        gate.store_residual(out, x)         # no-op unless this step should seed the cache
    else:
        out = gate.reuse(x)
    ...
    gate.end_step()                         # from the loop callback, after the latents are evaluated

State lives in this plain object, never on an ``nn.Module`` (an array attribute there would become
a parameter). Under classifier-free guidance one decision serves both branches and each branch keeps
its own residual (``branch="uncond"``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx

from app.gate.decision import Decision, GateParams, GateScalars, Verdict, decide, predict_change

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class StepEvent:
    """Emitted as each step ends. ``accumulated`` is the value compared with ``threshold``;
    ``output_rel_l1`` (measured change of the transformer output) is filled only when captured."""

    index: int
    num_steps: int
    decision: Decision
    rel_l1: float | None
    predicted: float | None
    accumulated: float | None
    threshold: float
    seconds: float
    output_rel_l1: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "decision": self.decision.value,
            "rel_l1": self.rel_l1,
            "predicted": self.predicted,
            "accumulated": self.accumulated,
            "threshold": self.threshold,
            "seconds": self.seconds,
            "output_rel_l1": self.output_rel_l1,
        }


def rel_l1_pair(current: mx.array, previous: mx.array) -> mx.array:
    """``[mean|cur − prev|, mean|prev|]`` reduced in float32, as one array (one host sync)."""
    diff = mx.abs(current - previous).astype(mx.float32)
    return mx.stack([mx.mean(diff), mx.mean(mx.abs(previous).astype(mx.float32))])


def rel_l1(current: mx.array, previous: mx.array) -> float:
    num, den = rel_l1_pair(current, previous).tolist()
    value = num / max(den, _EPS)
    return value if math.isfinite(value) else math.nan


class TeaCacheGate:
    """One generation's gate. ``observe=True`` measures the signal (and, with
    ``capture_output``, the output change) on every step but never skips: the vanilla trace."""

    def __init__(
        self,
        params: GateParams,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        observe: bool = False,
        capture_output: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.params = params
        self.observe = observe
        self.capture_output = capture_output
        self._on_step = on_step
        self._clock = clock
        self.events: list[StepEvent] = []
        self.num_steps = 0
        self._scalars = GateScalars()
        self._anchor: mx.array | None = None
        self._previous_output: mx.array | None = None
        self._residuals: dict[str, mx.array] = {}
        self._pending: Verdict | None = None
        self._pending_output: float | None = None
        self._index = 0
        self._t_last = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    def begin(self, num_steps: int) -> None:
        self.release()
        self.events = []
        self.num_steps = num_steps
        self._scalars = GateScalars()
        self._index = 0
        self._pending = None
        self._pending_output = None
        self._t_last = self._clock()

    def release(self) -> None:
        """Drop every cached array (called after the loop, before the VAE decode)."""
        self._anchor = None
        self._previous_output = None
        self._residuals.clear()

    @property
    def needs_signal(self) -> bool:
        return self.params.enabled or self.observe

    @property
    def step_index(self) -> int:
        return self._index

    @property
    def cached_branches(self) -> tuple[str, ...]:
        return tuple(self._residuals)

    # -- per step -----------------------------------------------------------------------------
    def decide(self, signal: mx.array | None) -> Verdict:
        """Decide the current step. Call once per step, before the body."""
        if self._pending is not None:
            return self._pending  # a second transformer call in the same step (CFG pairing)
        measured: float | None = None
        if signal is not None and self.needs_signal:
            if self._anchor is not None:
                measured = rel_l1(signal, self._anchor)
            self._anchor = signal
        if self.observe:
            verdict = self._observe_verdict(measured)
        else:
            verdict = decide(self.params, self._scalars, self._index, self.num_steps, measured)
            if verdict.decision is Decision.numerical_miss:
                self._residuals.clear()
                self._anchor = None
            if not verdict.store_residual and verdict.decision.computes:
                self._residuals.clear()
        self._pending = verdict
        return verdict

    def _observe_verdict(self, measured: float | None) -> Verdict:
        if measured is None:
            return Verdict(self._index, Decision.computed)
        if not math.isfinite(measured):
            return Verdict(self._index, Decision.numerical_miss, measured)
        predicted, _ = predict_change(self.params, measured)
        if math.isnan(predicted):
            return Verdict(self._index, Decision.numerical_miss, measured)
        return Verdict(self._index, Decision.computed, measured, predicted, predicted)

    def store_residual(self, body_out: mx.array, body_in: mx.array, branch: str = "cond") -> None:
        verdict = self._pending
        if verdict is None or not verdict.store_residual:
            return
        residual = body_out - body_in
        mx.eval(residual)  # a lazy difference would pin both operands
        self._residuals[branch] = residual

    def reuse(self, body_in: mx.array, branch: str = "cond") -> mx.array:
        try:
            return body_in + self._residuals[branch]
        except KeyError:
            raise RuntimeError(f"gate skipped a step with no cached residual for {branch!r}") from None

    def record_output(self, output: mx.array) -> None:
        """Measure the transformer output's change against the previous step (calibration data)."""
        if not self.capture_output or self._pending_output is not None:
            return
        if self._previous_output is not None:
            self._pending_output = rel_l1(output, self._previous_output)
        mx.eval(output)
        self._previous_output = output

    def end_step(self) -> StepEvent:
        now = self._clock()
        verdict = self._pending or Verdict(self._index, Decision.computed)
        event = StepEvent(
            index=self._index,
            num_steps=self.num_steps,
            decision=verdict.decision,
            rel_l1=verdict.rel_l1,
            predicted=verdict.predicted,
            accumulated=verdict.accumulated,
            threshold=self.params.rel_l1_thresh,
            seconds=now - self._t_last,
            output_rel_l1=self._pending_output,
        )
        self._t_last = now
        self._pending = None
        self._pending_output = None
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
