"""A scriptable fake engine: the UI's test double and a development stand-in for the real engine.

It follows ``EngineProtocol`` to the letter (event order, one terminal event, never raises unless
told to) without MLX work. Each run either replays a scripted list of events or synthesises a
plausible one from a rel-L1 trace through the real gate rule (``app.gate.simulator``), so the
decisions, predictions and accumulations it reports are the ones the live gate would take on that
trace. It records every request and the thread each call ran on, caches vanilla results by
``GenerationRequest.vanilla_key()`` like the real engine, honours cancel within one step, and can
be held step by step by a test (``StepGate``) instead of sleeping. It runs one request per ``run``,
as the real engine does, so every kind of job (a Generate, a threshold comparison, a target-quality
search, a sweep, a calibration) runs on it through the one job runner (``app.engine.jobs.run_job``).
A calibration's vanilla pass (``capture_output``) records the output's change as
``FAKE_OUTPUT_POLYNOMIAL`` of the signal's and a magnitude ratio of ``fake_mag_ratio``, so a fit
on its data has a known answer.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from app.engine.events import (
    EngineEvent,
    LoadProgress,
    ModelReady,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
    StepDone,
)
from app.engine.notices import engagement_warning, schedule_warnings
from app.engine.protocol import Emit
from app.engine.report import PassResult, RunReport, measure_run
from app.engine.request import GenerationRequest, make_request
from app.gate import Decision, StepEvent, TeaCacheParams, predict_change
from app.gate.events import VANILLA
from app.gate.firstblock import TRACE_DEPTH
from app.gate.kinds import TEACACHE_KIND, kind_of
from app.variants import check_schedule

Trace = Sequence[float | None]
# The fake's output change for a signal change x on a calibration pass (high → low, through the
# origin): what a fit of its data must recover.
FAKE_OUTPUT_POLYNOMIAL = (3.0, -2.0, 0.5, 0.8, 0.0)


# What the real vanilla recorder prices a variant's signal with where TeaCache has no numbers for
# it: the identity (``app.gate.kinds.teacache``).
UNPRICED = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 1.0, 0.0), rel_l1_thresh=0.0)


def fake_output_change(x: float) -> float:
    return float(np.polyval(FAKE_OUTPUT_POLYNOMIAL, x))


def fake_mag_ratio(x: float) -> float:
    """The residual's magnitude ratio the fake records: smaller where the signal moved more."""
    return 1.0 - 0.25 * x


@dataclass(frozen=True)
class FakeFailure:
    """Fail the run: while loading (``which=None``) or when ``which`` reaches ``at_step``."""

    message: str = "scripted failure"
    which: Pass | None = None
    at_step: int = 0
    raise_instead: bool = False  # raise out of run() (breaks the protocol: tests the worker's net)


@dataclass(frozen=True)
class FakeScript:
    """How one run behaves. Every field has a harmless default."""

    trace: Trace | Callable[[GenerationRequest], Trace] | None = None
    events: Sequence[EngineEvent] | None = None  # replayed verbatim (run_id rewritten)
    step_seconds: float = 0.0
    skipped_step_fraction: float = 0.08  # a skipped step costs this share of a computed one
    vanilla_step_factor: float = 1.0  # vanilla's steps cost this many computed gated steps (load)
    load_seconds: float = 0.0
    # The loader's progress lines, emitted before the load's wait (the real loader's "checking
    # the files in <model folder>" can be a long path).
    load_messages: Sequence[str] = ()
    failure: FakeFailure | None = None
    warnings: Sequence[RunWarning] = ()
    # At this many skips or more the gated image loses a 32-px patch (one object gone): a large
    # local difference beside a small SSIM change, as the walk's lost red circle.
    spot_after_skips: int | None = None


class StepGate:
    """Lets a test hold the engine before each step and release steps one at a time.

    ``release(n)`` lets ``n`` more steps through, ``open()`` lets everything through. The engine
    waits in short slices so that a cancel still takes effect while it is held.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._allowance = 0
        self._open = False
        self.waiting_at: tuple[Pass, int] | None = None
        self.passed = 0

    def release(self, steps: int = 1) -> None:
        with self._cond:
            self._allowance += steps
            self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def hold(self) -> None:
        """Back to holding before every step (after ``open``)."""
        with self._cond:
            self._open = False
            self._allowance = 0

    def wait(self, which: Pass, index: int, cancel: threading.Event) -> bool:
        """Returns False if cancel was set while waiting."""
        with self._cond:
            self.waiting_at = (which, index)
            try:
                while not (self._open or self._allowance > 0):
                    if cancel.is_set():
                        return False
                    self._cond.wait(0.005)
                if not self._open:
                    self._allowance -= 1
                self.passed += 1
                return True
            finally:
                self.waiting_at = None


@dataclass
class _VanillaResult:
    image: np.ndarray
    seconds: float
    steps: tuple[StepEvent, ...]
    trace: tuple[float | None, ...]
    measured_at: datetime = field(default_factory=lambda: datetime.now().astimezone())

    def summary(self, *, cached: bool) -> PassResult:
        return PassResult(
            self.image, self.steps, self.seconds, measured_at=self.measured_at, cached=cached
        )


@dataclass
class FakeEngine:
    """See the module docstring. ``scripts`` are used one per run, then ``script`` for the rest."""

    script: FakeScript = field(default_factory=FakeScript)
    scripts: list[FakeScript] = field(default_factory=list)
    step_gate: StepGate | None = None
    cache_vanilla: bool = True

    def __post_init__(self) -> None:
        self.requests: list[GenerationRequest] = []
        self.run_threads: list[int] = []
        self.created_thread = threading.get_ident()
        self.closed = False
        self.loaded_variant: str | None = None
        self.emitted: list[EngineEvent] = []
        self._vanilla: dict[tuple[object, ...], _VanillaResult] = {}
        self._lock = threading.Lock()

    # -- EngineProtocol ------------------------------------------------------------------------
    def run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        with self._lock:
            self.requests.append(request)
            self.run_threads.append(threading.get_ident())
            script = self.scripts.pop(0) if self.scripts else self.script

        def send(event: EngineEvent) -> None:
            self.emitted.append(event)
            emit(event)

        failure = script.failure
        if failure is not None and failure.raise_instead:
            raise RuntimeError(failure.message)
        try:
            if script.events is not None:
                self._replay(run_id, script.events, send, cancel, script)
            else:
                self._synthesise(run_id, request, send, cancel, script)
        except _Stop:
            return
        except Exception as exc:  # the protocol says run() never raises
            send(RunFailed(run_id, f"fake engine error: {exc}", repr(exc)))

    def close(self) -> None:
        self.closed = True
        self._vanilla.clear()

    # -- behaviour -----------------------------------------------------------------------------
    def _replay(
        self,
        run_id: int,
        events: Sequence[EngineEvent],
        emit: Emit,
        cancel: threading.Event,
        script: FakeScript,
    ) -> None:
        for event in events:
            if isinstance(event, StepDone):
                self._before_step(run_id, event.which, event.step.index, emit, cancel, script)
            if hasattr(event, "run_id"):
                event = replace(event, run_id=run_id)  # type: ignore[type-var]
            emit(event)

    def _synthesise(
        self,
        run_id: int,
        request: GenerationRequest,
        emit: Emit,
        cancel: threading.Event,
        script: FakeScript,
    ) -> None:
        variant = request.variant
        failure = script.failure
        if self.loaded_variant != request.variant_id:
            emit(LoadProgress(request.variant_id, f"Loading {variant.display_name}…"))
            for message in script.load_messages:
                emit(LoadProgress(request.variant_id, message))
            if failure is not None and failure.which is None:
                emit(RunFailed(run_id, failure.message, f"FakeFailure: {failure.message}"))
                raise _Stop
            if script.load_seconds and cancel.wait(script.load_seconds):
                emit(RunCancelled(run_id, None))
                raise _Stop
            self.loaded_variant = request.variant_id
            emit(ModelReady(request.variant_id, script.load_seconds))

        trace_source = script.trace
        trace = tuple(
            trace_source(request)
            if callable(trace_source)
            else trace_source
            if trace_source is not None
            else default_trace(request)
        )
        if len(trace) != request.active_steps:
            raise ValueError(
                f"scripted trace has {len(trace)} steps, the request {request.active_steps}"
            )
        # The run's gate decides; the vanilla pass records every kind's trace, TeaCache's priced
        # by the variant's polynomial (the identity without one), as the real engine's does.
        params = request.gate_params()
        calibration = TEACACHE_KIND.calibration_of(variant)
        observe = UNPRICED if calibration is None else TEACACHE_KIND.params(calibration, 0.0)
        kind = kind_of(params)

        for warning in script.warnings:
            emit(replace(warning, run_id=run_id))
        notice = schedule_warning(run_id, request)
        if notice is not None:
            emit(notice)

        key = request.vanilla_key()
        cacheable = self.cache_vanilla  # a calibration's under its own key, as the real engine
        vanilla = self._vanilla.get(key) if cacheable and request.compare_vanilla else None
        cached = vanilla is not None
        if request.compare_vanilla:
            if vanilla is not None:
                emit(PassStarted(run_id, Pass.vanilla, request.active_steps, cached=True))
                emit(
                    PassFinished(
                        run_id, Pass.vanilla, vanilla.image, vanilla.seconds, vanilla.steps
                    )
                )
            else:
                vanilla = self._vanilla_pass(run_id, request, observe, trace, emit, cancel, script)
                if cacheable:
                    self._vanilla[key] = vanilla
        # As the real engine: where skipping begins, measured once for the warning and report.
        found = kind.engagement(params, kind.trace(vanilla.steps)) if vanilla is not None else None
        if found is not None and (
            variant.distilled
            or not check_schedule(
                variant,
                request.steps,
                gate=request.gate,
                strength=request.strength if request.images else None,
            ).can_skip
        ):
            emit(engagement_warning(run_id, params, found))

        # The gate's own trace of what a vanilla pass records (the probe's changes included).
        observed = observed_steps(request, observe, trace, 0.0)
        verdicts = kind.simulate(params, kind.trace(observed))
        # As the real engine: replay vanilla up to the last computed step before the first skip;
        # replayed steps are emitted at once and keep vanilla's step times.
        until: int | None = None
        if vanilla is not None and request.resume:
            first_skip = next((v.index for v in verdicts if v.decision is Decision.skipped), None)
            until = request.active_steps if first_skip is None else first_skip - 1
        emit(PassStarted(run_id, Pass.gated, request.active_steps, resumed_from=until))
        steps: list[StepEvent] = []
        for verdict in verdicts:
            seconds = script.step_seconds * (
                script.skipped_step_fraction if verdict.decision is Decision.skipped else 1.0
            )
            step = kind.step_event(
                verdict, num_steps=request.active_steps, threshold=params.threshold, seconds=seconds
            )
            if vanilla is not None and until is not None and verdict.index < until:
                step = replace(step, seconds=vanilla.steps[verdict.index].seconds)
            else:
                self._before_step(run_id, Pass.gated, verdict.index, emit, cancel, script)
                if seconds:
                    cancel.wait(seconds)
            steps.append(step)
            emit(StepDone(run_id, Pass.gated, step))
        skips = sum(s.decision is Decision.skipped for s in steps)
        base = vanilla.image if vanilla is not None else synthetic_image(request)
        image = perturb(base, request.seed, skips)
        if script.spot_after_skips is not None and skips >= script.spot_after_skips:
            image[:32, :32] = 255 - image[:32, :32]
        gated_seconds = sum(s.seconds for s in steps)
        emit(PassFinished(run_id, Pass.gated, image, gated_seconds, tuple(steps)))
        gated = PassResult(image, tuple(steps), gated_seconds, resumed_from=until)
        summary = vanilla.summary(cached=cached) if vanilla is not None else None
        report = measure_run(request, gated, summary, engagement=found, engine="fake")
        emit(RunFinished(run_id, report))

    def _vanilla_pass(
        self,
        run_id: int,
        request: GenerationRequest,
        params: TeaCacheParams,
        trace: Trace,
        emit: Emit,
        cancel: threading.Event,
        script: FakeScript,
    ) -> _VanillaResult:
        emit(PassStarted(run_id, Pass.vanilla, request.active_steps))
        steps = []
        seconds = script.step_seconds * script.vanilla_step_factor
        for step in observed_steps(request, params, trace, seconds):
            self._before_step(run_id, Pass.vanilla, step.index, emit, cancel, script)
            if script.step_seconds:
                cancel.wait(script.step_seconds)
            steps.append(step)
            emit(StepDone(run_id, Pass.vanilla, step))
        seconds = sum(s.seconds for s in steps)
        image = synthetic_image(request)
        emit(PassFinished(run_id, Pass.vanilla, image, seconds, tuple(steps)))
        return _VanillaResult(image, seconds, tuple(steps), tuple(trace))

    def _before_step(
        self,
        run_id: int,
        which: Pass,
        index: int,
        emit: Emit,
        cancel: threading.Event,
        script: FakeScript,
    ) -> None:
        failure = script.failure
        if failure is not None and failure.which == which and failure.at_step == index:
            emit(RunFailed(run_id, failure.message, f"FakeFailure at {which} step {index}"))
            raise _Stop
        if cancel.is_set():
            emit(RunCancelled(run_id, index))
            raise _Stop
        if self.step_gate is not None and not self.step_gate.wait(which, index, cancel):
            emit(RunCancelled(run_id, index))
            raise _Stop


def minimal_report(
    request: GenerationRequest | None = None,
    *,
    gated_seconds: float = 0.2,
    vanilla_seconds: float | None = 0.3,
    resumed_from: int | None = None,
    vanilla_cached: bool = False,
    vanilla_measured_at: datetime | None = None,
) -> RunReport:
    """A small typed report for scripted runs and view-model tests: flat grey images, the given
    timings. The gated pass skips every other step between its forced first and last (FSF, FSCF,
    FSCSCF, …); its computed steps share ``gated_seconds`` and its skips cost nothing, so its
    ideal is steps / computed, and a vanilla time at most the ideal × ``gated_seconds`` reads as
    measured."""
    request = request or make_request("demo", "a red star", steps=3)
    n = request.active_steps
    pattern = "F" + "".join("S" if i % 2 else "C" for i in range(1, n - 1)) + "F"
    computed = sum(c != "S" for c in pattern)

    def step(i: int, letter: str, seconds: float, gate: str = request.gate) -> StepEvent:
        decision = {"F": Decision.forced, "C": Decision.computed, "S": Decision.skipped}[letter]
        return StepEvent(i, n, decision, threshold=request.threshold, seconds=seconds, gate=gate)

    steps = tuple(
        step(i, c, 0.0 if c == "S" else gated_seconds / computed) for i, c in enumerate(pattern)
    )
    image = np.full((request.height, request.width, 3), 128, np.uint8)
    gated = PassResult(image, steps, gated_seconds, resumed_from=resumed_from)
    vanilla = None
    if vanilla_seconds is not None:
        vanilla_steps = tuple(step(i, "C", vanilla_seconds / n, VANILLA) for i in range(n))
        vanilla = PassResult(image, vanilla_steps, vanilla_seconds, cached=vanilla_cached)
        if vanilla_measured_at is not None:
            vanilla = replace(vanilla, measured_at=vanilla_measured_at)
    return RunReport(request, gated, vanilla, ssim=1.0 if vanilla else None, engine="fake")


class _Stop(Exception):
    """A terminal event was emitted; unwind the run."""


def schedule_warning(run_id: int, request: GenerationRequest) -> RunWarning | None:
    """The pre-run notice, in the real engine's words (``app.engine.notices``)."""
    found = schedule_warnings(request.variant, request)
    return replace(found[0], run_id=run_id) if found else None


def observed_steps(
    request: GenerationRequest, params: TeaCacheParams, trace: Trace, seconds: float
) -> tuple[StepEvent, ...]:
    """What a vanilla pass records on the scripted rel-L1 trace, each kind its own: TeaCache each
    step's change and prediction (with a capture's output change), MagCache a capture's
    magnitude ratio, and the first-block probe its changes against each previous step (made up
    from the trace: the sum of the consecutive changes between the two steps)."""
    steps = []
    for index, measured in enumerate(trace):
        predicted: float | None = None
        if measured is not None and math.isfinite(measured):
            value, _ = predict_change(params, measured)
            predicted = None if math.isnan(value) else value
        captured = request.capture_output and measured is not None
        back = [trace[index - k] for k in range(min(index, TRACE_DEPTH))]
        changes = (
            tuple(sum(abs(x or 0.0) for x in back[: k + 1]) for k in range(len(back)))
            if back
            else None
        )
        teacache: dict[str, float | None] = {"rel_l1": measured, "predicted": predicted}
        if request.capture_output:
            teacache["output_rel_l1"] = fake_output_change(measured) if captured else None  # type: ignore[arg-type]
        steps.append(
            StepEvent(
                index,
                request.active_steps,
                Decision.computed,
                threshold=0.0,
                seconds=seconds,
                gate=VANILLA,
                signals={
                    "teacache": teacache,
                    "magcache": {"ratio": fake_mag_ratio(measured) if captured else None},  # type: ignore[arg-type]
                    "firstblock": {"change": changes[0] if changes else None, "changes": changes},
                },
            )
        )
    return tuple(steps)


def default_trace(request: GenerationRequest) -> tuple[float | None, ...]:
    """A demo-like gate-signal trace: a big first change, a calm middle, a rising end. Short
    (distilled-like) schedules change a lot on every step, as measured on the demo prototype."""
    rng = np.random.default_rng(_stable_seed(request.prompt, request.seed))
    n = request.active_steps
    trace: list[float | None] = [None]
    for i in range(1, n):
        if n <= 8 or request.variant.distilled:
            value = 0.38 + 0.09 * rng.random()
        elif i == 1:
            value = 0.22
        elif i >= n - 2:
            value = 0.10 + 0.03 * (i - (n - 3))
        else:
            value = 0.035 + 0.03 * rng.random()
        trace.append(round(float(value), 4))
    return tuple(trace[:n])


def synthetic_image(request: GenerationRequest) -> np.ndarray:
    """A deterministic little scene (gradient background, a few discs) for the prompt and seed."""
    rng = np.random.default_rng(_stable_seed(request.prompt, request.seed))
    h, w = request.height, request.width
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    top, bottom = rng.integers(40, 230, size=3), rng.integers(40, 230, size=3)
    t = (yy / max(1, h - 1))[..., None]
    image = (1 - t) * top + t * bottom
    for _ in range(3):
        cx, cy = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
        radius = rng.uniform(0.08, 0.2) * min(w, h)
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2
        image[mask] = rng.integers(0, 256, size=3)
    return np.ascontiguousarray(image.clip(0, 255).astype(np.uint8))


def perturb(image: np.ndarray, seed: int, skips: int) -> np.ndarray:
    """The gated image: the vanilla one plus noise that grows with the skip count."""
    if skips == 0:
        return image.copy()
    rng = np.random.default_rng(seed + 7919 * skips)
    noise = rng.normal(0.0, 0.5 * skips, size=image.shape)
    return np.ascontiguousarray((image.astype(np.float32) + noise).clip(0, 255).astype(np.uint8))


def _stable_seed(prompt: str, seed: int) -> int:
    digest = hashlib.sha256(f"{prompt}\x00{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little")
