"""A stand-in engine for measuring the window alone (``gui_responsiveness --engine fake``).

It keeps ``EngineProtocol``'s event order and timing shape without MLX work: a load that takes
``load_seconds``, steps that take ``step_seconds`` (a skipped one a small share of that), the real
gate rule's decisions on a demo-like trace, a vanilla pass cached per ``vanilla_key`` as the real
engine caches it, and a typed ``RunReport`` at the end. The tests' ``FakeEngine``
(``tests/fakes/engine.py``) is the scriptable double; ``lab`` never imports ``tests``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from app.engine.events import (
    LoadProgress,
    ModelReady,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFinished,
    StepDone,
)
from app.engine.protocol import Emit
from app.engine.report import PassResult, measure_run
from app.engine.request import GenerationRequest
from app.gate import Decision, StepEvent, TeaCacheParams, Verdict
from app.gate.events import VANILLA
from app.gate.kinds import gate_kind
from app.gate.simulator import simulate


def demo_like_trace(steps: int) -> tuple[float | None, ...]:
    """A big first change, a calm middle, a rising end (the demo's shape); no signal at step 0."""
    trace: list[float | None] = [None]
    for i in range(1, steps):
        if i == 1:
            trace.append(0.22)
        elif i >= steps - 2:
            trace.append(0.10 + 0.03 * (i - (steps - 3)))
        else:
            trace.append(0.035 + 0.03 * ((i * 7) % 5) / 4)
    return tuple(trace[:steps])


class _Cancelled(Exception):
    def __init__(self, step: int | None) -> None:
        super().__init__(step)
        self.step = step


@dataclass
class PacedEngine:
    step_seconds: float = 0.03
    load_seconds: float = 0.5
    skipped_step_fraction: float = 0.08  # a skipped step's share of a computed one
    loaded_variant: str | None = None
    _vanilla: dict[tuple[object, ...], PassResult] = field(default_factory=dict)

    def run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        try:
            self._run(run_id, request, emit, cancel)
        except _Cancelled as stop:
            emit(RunCancelled(run_id, stop.step))

    def close(self) -> None:
        self._vanilla.clear()

    def _run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        if self.loaded_variant != request.variant_id:
            emit(LoadProgress(request.variant_id, f"Loading {request.variant.display_name}…"))
            if cancel.wait(self.load_seconds):
                raise _Cancelled(None)
            self.loaded_variant = request.variant_id
            emit(ModelReady(request.variant_id, self.load_seconds))
        params = request.variant.params_for("teacache", request.threshold)
        assert isinstance(params, TeaCacheParams)  # it paces TeaCache's decisions
        verdicts = simulate(params, demo_like_trace(request.steps))
        image = np.full((request.height, request.width, 3), 128, np.uint8)

        vanilla: PassResult | None = None
        if request.compare_vanilla:
            vanilla = self._vanilla.get(request.vanilla_key())
            if vanilla is None:
                vanilla = self._pass(run_id, request, Pass.vanilla, verdicts, image, emit, cancel)
                self._vanilla[request.vanilla_key()] = vanilla
            else:
                vanilla = PassResult(image, vanilla.steps, vanilla.loop_seconds, cached=True)
                emit(PassStarted(run_id, Pass.vanilla, request.steps, cached=True))
                emit(PassFinished(run_id, Pass.vanilla, image, vanilla.loop_seconds, vanilla.steps))
        gated = self._pass(run_id, request, Pass.gated, verdicts, image, emit, cancel)
        emit(RunFinished(run_id, measure_run(request, gated, vanilla, engine="paced")))

    def _pass(
        self,
        run_id: int,
        request: GenerationRequest,
        which: Pass,
        verdicts: Sequence[Verdict],
        image: np.ndarray,
        emit: Emit,
        cancel: threading.Event,
    ) -> PassResult:
        emit(PassStarted(run_id, which, request.steps))
        steps = []
        for verdict in verdicts:
            skipped = which is Pass.gated and verdict.decision is Decision.skipped
            seconds = self.step_seconds * (self.skipped_step_fraction if skipped else 1.0)
            if cancel.wait(seconds):
                raise _Cancelled(verdict.index)
            if which is Pass.gated:
                step = gate_kind(request.gate).step_event(
                    verdict, num_steps=request.steps, threshold=request.threshold, seconds=seconds
                )
            else:  # TeaCache's record of the step, as the vanilla recorder's
                figures = {"rel_l1": verdict.rel_l1, "predicted": verdict.predicted}
                step = StepEvent(
                    verdict.index,
                    request.steps,
                    Decision.computed,
                    threshold=0.0,
                    seconds=seconds,
                    gate=VANILLA,
                    signals={request.gate: figures},
                )
            steps.append(step)
            emit(StepDone(run_id, which, step))
        total = sum(s.seconds for s in steps)
        emit(PassFinished(run_id, which, image, total, tuple(steps)))
        return PassResult(image, tuple(steps), total)
