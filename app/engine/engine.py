"""The real engine: loads mflux pipelines, runs the vanilla and the gated pass, reports.

Runs on whichever thread calls it (the UI's long-lived worker, or the CLI's main thread) and must
stay on that thread: MLX streams are thread-local. Qt-free.

The vanilla pass runs the adapter with the vanilla recorder (``app.gate.kinds.vanilla_recorder``):
every step computes, and every gate kind records its own trace of the run (for its simulator, its
plot and its calibration), so one vanilla pass serves whichever gate runs. Where mflux's own path
is eager (FLUX.1, Qwen-Image, the demo) that pass is bit-identical to untouched mflux — the
adapter tests assert it.

Fast exploration: vanilla results are cached per ``GenerationRequest.vanilla_key()``. A gated pass
can *resume* from the vanilla trajectory: up to the first step the gate skips, the gated trajectory
is the vanilla one, so the engine replays vanilla's saved noise predictions for those steps (the
scheduler then rebuilds vanilla's latents bit for bit) and runs the transformer again only from the
last computed step before the first skip, which re-seeds the gate's anchor and residual.

Timing: both passes of one Generate are timed under the same conditions. Before the first timed
pass of a (model, size, guidance) the engine runs a discarded warm-up generation of
``WARMUP_STEPS`` steps with a forced computed/skipped/computed pattern, so one-time costs (kernel
JIT, allocator growth, stream creation, lazy imports) land on neither pass; the vanilla pass does
not capture outputs (only calibration asks for that). The report's speedup is never above the
ideal by more than the run's own measured spread: a cached vanilla is re-timed to this run's
computed steps, and so is a measured ratio the load pushed above the ideal (``app.engine.timing``).
"""

from __future__ import annotations

import logging
import platform
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import mlx.core as mx
import numpy as np

from app.adapters.replay import Replay, record_and_replay
from app.engine import report as reports
from app.engine.events import (
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
    StepPreview,
)
from app.engine.loader import MEMORY_WARNING, load_pipeline, memory_warning
from app.engine.notices import engagement_warning, schedule_warnings
from app.engine.protocol import Cancelled, Emit, UserFacingError
from app.engine.report import RunReport
from app.engine.request import GenerationRequest, generate_kwargs
from app.engine.timing import WARMUP_STEPS
from app.families import load
from app.gate import Decision, Engagement, LiveGate, StepEvent
from app.gate.fill import get_fill
from app.gate.kinds import GateParamsLike, kind_of, make_gate, vanilla_recorder, warmup_gate
from app.variants import Variant, check_schedule

log = logging.getLogger(__name__)

# variant id, quantization, model folder, LoRAs
PipelineKey = tuple[str, int | None, str | None, tuple[object, ...]]
Loader = Callable[[Variant, GenerationRequest, Emit, threading.Event], Any]


@dataclass(slots=True)
class PassOutcome:
    """One pass as the engine ran it, MLX arrays included (final latents, recorded outputs for a
    resumed pass); ``app.engine.report.PassResult`` is its plain-data summary in the report."""

    image: np.ndarray
    final_latents: mx.array
    events: list[StepEvent]
    loop_seconds: float
    wall_seconds: float
    outputs: list[mx.array]  # recorded transformer/predict outputs, for resume
    resumed_from: int | None = None
    peak_memory_bytes: int | None = None
    # one uint8 thumbnail per step where the request asked for previews (kept with a cached
    # vanilla, so its steps still show; a resumed pass reuses them for its replayed steps)
    previews: list[np.ndarray] = field(default_factory=list)
    finished_at: datetime = field(default_factory=lambda: datetime.now().astimezone())

    @property
    def pattern(self) -> str:
        return "".join(e.decision.letter for e in self.events)

    @property
    def skipped(self) -> int:
        return sum(e.decision is Decision.skipped for e in self.events)


class _LoopObserver:
    """Registered after the gate's lifecycle callback: captures latents, honours cancel."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.final_latents: mx.array | None = None

    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any = None,
        **kwargs: Any,
    ) -> None:
        if self.cancel.is_set():
            raise Cancelled

    def call_after_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        self.final_latents = latents


OUT_OF_MEMORY = "out of memory: try a smaller size or a lower quantization (3 to 8 bits)"
# A calibration's vanilla runs kept for its threshold trials: the 10 suggested prompts and a few
# more (each keeps its steps' transformer outputs: 28 × 4096 × 64 values for FLUX at 1024²).
CALIBRATION_CACHE_SIZE = 16
# How MLX reports a failed allocation: a RuntimeError from its Metal/CUDA/CPU allocator.
_ALLOCATION_FAILURES = ("malloc", "out of memory", "outofmemory", "failed to allocate")


def is_allocation_failure(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(marker in text for marker in _ALLOCATION_FAILURES)


def _unregister(pipeline: Any, callback: object) -> None:
    registry = pipeline.callbacks
    for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
        items = getattr(registry, name, None)
        if isinstance(items, list):
            items[:] = [c for c in items if c is not callback]


def to_uint8_rgb(image: Any) -> np.ndarray:
    array = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
    return np.ascontiguousarray(array, dtype=np.uint8)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("teacache-studio", "mflux", "mlx"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    out["mlx_device"] = str(mx.default_device())
    return out


def quiet_mflux_progress() -> None:
    """mflux draws a tqdm bar on stderr for every loop; the engine reports steps itself."""
    import functools

    import mflux.models.common.config.config as mflux_config
    from tqdm import tqdm

    mflux_config.tqdm = functools.partial(tqdm, disable=True)  # type: ignore[attr-defined]


class Engine:
    """The production ``EngineProtocol``. Keeps one real model (they are large) and both demos."""

    def __init__(
        self,
        loader: Loader | None = None,
        vanilla_cache_size: int = 6,
        *,
        clock: Callable[[], float] = time.perf_counter,
        warmup_steps: int = WARMUP_STEPS,
        calibration_cache_size: int = CALIBRATION_CACHE_SIZE,
    ) -> None:
        quiet_mflux_progress()
        self._loader = loader or default_loader
        self._pipelines: OrderedDict[PipelineKey, Any] = OrderedDict()
        # Pipelines whose weights ship with the app: tiny, they stay loaded.
        self._shipped: set[PipelineKey] = set()
        self._vanilla: OrderedDict[tuple[object, ...], PassOutcome] = OrderedDict()
        self._vanilla_cache_size = vanilla_cache_size
        # A calibration's vanilla runs (``capture_output``) are kept apart, so its threshold
        # trials find every prompt's and a calibration evicts no Generate's.
        self._captured: OrderedDict[tuple[object, ...], PassOutcome] = OrderedDict()
        self._captured_cache_size = calibration_cache_size
        self._clock = clock  # every step time and pass time is read from it (tests fake it)
        self._warmup_steps = warmup_steps
        self._warm: set[tuple[object, ...]] = set()  # (pipeline, size, guidance) warmed up

    # -- protocol ------------------------------------------------------------------------------
    def run(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> None:
        try:
            report = self.generate(run_id, request, emit, cancel)
        except Cancelled:
            emit(RunCancelled(run_id, None))
        except UserFacingError as exc:
            emit(RunFailed(run_id, str(exc), traceback.format_exc()))
        except MemoryError:
            emit(RunFailed(run_id, OUT_OF_MEMORY, traceback.format_exc()))
        except Exception as exc:  # the worker must never die: report and stay usable
            if is_allocation_failure(exc):
                self._vanilla.clear()  # give the next try every byte the cache can spare
                self._captured.clear()
                mx.clear_cache()
                emit(RunFailed(run_id, OUT_OF_MEMORY, traceback.format_exc()))
                return
            log.exception("generation failed")
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            emit(RunFailed(run_id, f"generation failed: {message}", traceback.format_exc()))
        else:
            emit(RunFinished(run_id, report))

    def close(self) -> None:
        self._pipelines.clear()
        self._shipped.clear()
        self._vanilla.clear()
        self._captured.clear()
        self._warm.clear()
        mx.clear_cache()

    # -- the run -------------------------------------------------------------------------------
    def generate(
        self, run_id: int, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> RunReport:
        variant = request.variant
        for warning in schedule_warnings(variant, request):
            emit(replace(warning, run_id=run_id))
        if self._loader is default_loader:  # real weights: where the peak estimate is over
            size = (request.width, request.height)
            if (memory := memory_warning(variant, request.quantize, size=size)) is not None:
                emit(RunWarning(run_id, MEMORY_WARNING, memory))
        pipeline = self.pipeline(variant, request, emit, cancel)
        if cancel.is_set():
            raise Cancelled
        params = request.gate_params()
        warmup_seconds = self.warm_up(pipeline, request, cancel, emit)

        vanilla: PassOutcome | None = None
        vanilla_cached = False
        if request.compare_vanilla:
            # A calibration's vanilla records the output's change too (a host sync a step): its
            # key is its own (``capture_output``), so a Generate never times against it, and a
            # calibration's threshold trials resume from it.
            key = request.vanilla_key()
            cache, size = (
                (self._captured, self._captured_cache_size)
                if request.capture_output
                else (self._vanilla, self._vanilla_cache_size)
            )
            vanilla = cache.get(key)
            if vanilla is not None and request.previews and not vanilla.previews:
                vanilla = None  # cached without previews: run it again to show its steps
            vanilla_cached = vanilla is not None
            if vanilla is not None:
                cache.move_to_end(key)
                emit(PassStarted(run_id, Pass.vanilla, request.active_steps, cached=True))
                if request.previews:
                    for index, image in enumerate(vanilla.previews):
                        decision = vanilla.events[index].decision
                        emit(StepPreview(run_id, Pass.vanilla, index, image, decision))
                emit(
                    PassFinished(
                        run_id,
                        Pass.vanilla,
                        vanilla.image,
                        vanilla.loop_seconds,
                        tuple(vanilla.events),
                    )
                )
            else:
                # Every kind records its own trace on it whichever gate runs, so its cache stays
                # valid across a gate switch.
                vanilla = self.run_pass(
                    run_id,
                    Pass.vanilla,
                    pipeline,
                    request,
                    None,
                    emit,
                    cancel,
                    capture_output=request.capture_output,
                )
                cache[key] = vanilla
                while len(cache) > size:
                    cache.popitem(last=False)
        # Where skipping begins on this vanilla trace: measured once, for the warning and the
        # report alike.
        kind = kind_of(params)
        found = kind.engagement(params, kind.trace(vanilla.events)) if vanilla else None
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

        resume = (
            vanilla is not None
            and request.resume
            and len(vanilla.events) == request.active_steps
            and len(vanilla.outputs) > 0
            and len(vanilla.outputs) % request.active_steps == 0
        )
        gated = self.run_pass(
            run_id,
            Pass.gated,
            pipeline,
            request,
            params,
            emit,
            cancel,
            resume_from=vanilla if resume else None,
        )
        return build_report(
            request,
            params,
            vanilla,
            gated,
            vanilla_cached=vanilla_cached,
            warmup_seconds=warmup_seconds,
            engagement=found,
        )

    def warm_up(
        self,
        pipeline: Any,
        request: GenerationRequest,
        cancel: threading.Event,
        emit: Emit | None = None,
    ) -> float | None:
        """One discarded generation of ``warmup_steps`` steps (computed, skipped, computed) at the
        request's size and guidance, before the first timed pass on this pipeline and shape: MLX's
        one-time costs (kernel JIT, allocator growth, CFG streams, lazy imports) are then charged
        to neither pass. Returns its seconds, or None where it was already warm (or is off)."""
        from app.adapters import install_gate

        key = (*pipeline_key(request.variant, request), request.width, request.height)
        key += (request.guidance,)
        if self._warmup_steps <= 0 or key in self._warm:
            return None
        if emit is not None:
            emit(LoadProgress(request.variant.id, "warming up (not timed)…"))
        gate = warmup_gate(clock=self._clock)
        observer = _LoopObserver(cancel)
        # Without the picture: the loop's kernels are the same at this size, and encoding it
        # happens before the loop (never in a step's time).
        warm_request = replace(request, steps=self._warmup_steps, images=(), strength=None)
        started = self._clock()
        with install_gate(pipeline, gate):
            pipeline.callbacks.register(observer)
            try:
                pipeline.generate_image(**generate_kwargs(warm_request))
            finally:
                _unregister(pipeline, observer)
        self._warm.add(key)
        return self._clock() - started

    def pipeline(
        self, variant: Variant, request: GenerationRequest, emit: Emit, cancel: threading.Event
    ) -> Any:
        key = pipeline_key(variant, request)
        if key in self._pipelines:
            self._pipelines.move_to_end(key)
            return self._pipelines[key]
        shipped = variant.family.weights_shipped
        if not shipped:
            # Real models are large: keep only one resident (shipped ones are tiny and stay).
            for other in [k for k in self._pipelines if k not in self._shipped]:
                del self._pipelines[other]
                self._warm = {w for w in self._warm if w[: len(other)] != other}
            self._vanilla.clear()
            self._captured.clear()
            mx.clear_cache()
        emit(LoadProgress(variant.id, f"loading {variant.display_name}…"))
        started = time.perf_counter()
        pipeline = self._loader(variant, request, emit, cancel)
        self._pipelines[key] = pipeline
        if shipped:
            self._shipped.add(key)
        emit(ModelReady(variant.id, time.perf_counter() - started))
        return pipeline

    def run_pass(
        self,
        run_id: int,
        which: Pass,
        pipeline: Any,
        request: GenerationRequest,
        params: GateParamsLike | None,
        emit: Emit,
        cancel: threading.Event,
        resume_from: PassOutcome | None = None,
        *,
        capture_output: bool = False,
    ) -> PassOutcome:
        """One timed pass: the gated one with ``params``, the vanilla one (``params`` unread)
        with the vanilla recorder of the request's variant. ``capture_output`` (vanilla only;
        calibration data) adds a host sync per step, so a Generate's vanilla pass leaves it off:
        both passes then do the same work per computed step."""
        from app.adapters import install_gate

        observe = which is Pass.vanilla
        if not observe and params is None:
            raise ValueError("a gated pass needs its gate's parameters")
        replay: Replay | None = None
        substitutes: dict[int, StepEvent] = {}
        fill = None if observe else get_fill(request.fill)
        if resume_from is not None and params is not None:
            depth = 1 if fill is None else fill.depth
            replay, substitutes = _plan_resume(params, resume_from, depth)
        emit(
            PassStarted(
                run_id,
                which,
                request.active_steps,
                resumed_from=None if replay is None else replay.until,
            )
        )

        events: list[StepEvent] = []

        def on_step(event: StepEvent) -> None:
            substitute = substitutes.get(event.index)
            if substitute is not None:
                # Steps from ``until`` on ran for real (they re-seed the gate): their own time.
                reseeding = replay is not None and event.index >= replay.until
                event = replace(substitute, seconds=event.seconds) if reseeding else substitute
            events.append(event)
            emit(StepDone(run_id, which, event))

        if observe or params is None:
            gate = vanilla_recorder(
                request.variant, calibrating=capture_output, on_step=on_step, clock=self._clock
            )
        else:
            gate = make_gate(params, on_step=on_step, clock=self._clock, fill=fill)
        observer = _LoopObserver(cancel)
        previews: list[np.ndarray] = []
        previewer = None
        if request.previews:
            previewer = _previewer(
                pipeline, gate, previews, events, resume_from, replay, run_id, which, emit
            )
        outputs: list[mx.array] = []
        undo_seam: Callable[[], None] | None = None
        mx.reset_peak_memory()
        with install_gate(pipeline, gate):
            pipeline.callbacks.register(observer)
            if previewer is not None:
                pipeline.callbacks.register(previewer)
            try:
                # installed after the adapter, so it wraps the adapter's own seam
                undo_seam = record_and_replay(pipeline, outputs if observe else None, replay)
                started = self._clock()
                result = pipeline.generate_image(**generate_kwargs(request))
                wall = self._clock() - started
            finally:
                if undo_seam is not None:
                    undo_seam()
                _unregister(pipeline, observer)
                if previewer is not None:
                    _unregister(pipeline, previewer)
        if observer.final_latents is None:
            raise RuntimeError("the pipeline finished without reporting its final latents")
        image = to_uint8_rgb(result.image)
        loop_seconds = sum(e.seconds for e in events)
        outcome = PassOutcome(
            image,
            observer.final_latents,
            events,
            loop_seconds,
            wall,
            outputs,
            None if replay is None else replay.until,
            int(mx.get_peak_memory()),
            previews,
        )
        emit(PassFinished(run_id, which, image, loop_seconds, tuple(events)))
        return outcome


def _previewer(
    pipeline: Any,
    gate: LiveGate,
    previews: list[np.ndarray],
    events: list[StepEvent],
    resume_from: PassOutcome | None,
    replay: Replay | None,
    run_id: int,
    which: Pass,
    emit: Emit,
) -> Any:
    """The pass's ``StepPreviewer``: keeps each step's thumbnail and emits it with the step's
    decision. A resumed pass's replayed steps take vanilla's thumbnails (their latents are
    vanilla's bit for bit, so the thumbnails are too)."""
    from app.adapters.previews import previewer_for

    def on_preview(index: int, image: np.ndarray) -> None:
        previews.append(image)
        decision = events[index].decision if index < len(events) else Decision.computed
        emit(StepPreview(run_id, which, index, image, decision))

    def reuse(index: int) -> np.ndarray | None:
        if replay is None or resume_from is None or index >= replay.until:
            return None
        return resume_from.previews[index] if index < len(resume_from.previews) else None

    return previewer_for(pipeline, on_preview, gate=gate, reuse=reuse)


def _plan_resume(
    params: GateParamsLike, vanilla: PassOutcome, depth: int = 1
) -> tuple[Replay, dict[int, StepEvent]]:
    """Replay vanilla up to (not including) the last ``depth`` computed steps before the first
    skip: the residuals the fill reads at the first skip (``Fill.depth``: one for reuse).

    The simulator is exact up to the first skip, so its verdicts are the gated run's verdicts for
    every step before it. Replayed steps keep vanilla's step times (they cost that in vanilla);
    the re-seeding steps from ``until`` run for real, and only their telemetry is taken from the
    simulation (the live gate sees the first of them as a fresh seed).
    """
    kind = kind_of(params)
    verdicts = kind.simulate(params, kind.trace(vanilla.events))
    first_skip = next((v.index for v in verdicts if v.decision is Decision.skipped), None)
    num_steps = len(vanilla.events)
    until = num_steps if first_skip is None else max(0, first_skip - depth)
    substitutes: dict[int, StepEvent] = {}
    for i in range(num_steps if first_skip is None else first_skip):
        substitutes[i] = kind.step_event(
            verdicts[i],
            num_steps=num_steps,
            threshold=params.threshold,
            seconds=vanilla.events[i].seconds,
        )
    calls_per_step = len(vanilla.outputs) // num_steps
    return Replay(until, vanilla.outputs, calls_per_step), substitutes


def latents_digest(latents: mx.array) -> str:
    """SHA-256 of the latents' bytes: equal digests mean bit-identical trajectories."""
    import hashlib

    return hashlib.sha256(np.asarray(latents).tobytes()).hexdigest()


def build_report(
    request: GenerationRequest,
    params: GateParamsLike,
    vanilla: PassOutcome | None,
    gated: PassOutcome,
    *,
    vanilla_cached: bool = False,
    warmup_seconds: float | None = None,
    engagement: Engagement | None = None,
) -> RunReport:
    """The engine's side of the report: what needs MLX (digests, the latent difference) and the
    gate's numbers (``engagement``: where skipping begins on the vanilla trace, measured by the
    caller); ``reports.measure_run`` measures SSIM and speedup."""
    max_abs_diff: float | None = None
    if vanilla is not None:
        max_abs_diff = float(
            mx.max(
                mx.abs(
                    gated.final_latents.astype(mx.float32)
                    - vanilla.final_latents.astype(mx.float32)
                )
            )
        )
    kind = kind_of(params)
    fields = kind.report_fields(params)
    return reports.measure_run(
        request,
        _summarise(gated),
        _summarise(vanilla, cached=vanilla_cached) if vanilla is not None else None,
        max_abs_diff=max_abs_diff,
        engagement=engagement,
        gate_fields={kind.name: fields} if fields else {},
        versions=versions(),
        warmup_seconds=warmup_seconds,
    )


def _summarise(result: PassOutcome, *, cached: bool = False) -> reports.PassResult:
    return reports.PassResult(
        image=result.image,
        steps=tuple(result.events),
        loop_seconds=result.loop_seconds,
        wall_seconds=result.wall_seconds,
        latents_sha256=latents_digest(result.final_latents),
        peak_memory_bytes=result.peak_memory_bytes,
        resumed_from=result.resumed_from,
        measured_at=result.finished_at,
        cached=cached,
    )


def pipeline_key(variant: Variant, request: GenerationRequest) -> PipelineKey:
    """What a loaded pipeline depends on: the variant, its quantization, the folder it came from
    (a model folder's weights are not the Hub's) and its LoRAs (mflux bakes them into the weights,
    so a pipeline with other LoRAs, or none, is another pipeline, built afresh)."""
    return (variant.id, request.quantize, request.model_path, request.loras)


def default_loader(
    variant: Variant, request: GenerationRequest, emit: Emit, cancel: threading.Event
) -> Any:
    if variant.family.loader is not None:  # a family that builds its own pipeline
        build = load(variant.family.loader)
        pipeline = build(variant.id.partition("+")[0])  # user calibrations share weights
    else:

        def progress(done: int | None, total: int | None, message: str) -> None:
            emit(LoadProgress(variant.id, message, done, total))

        pipeline = load_pipeline(
            variant,
            quantize=request.quantize,
            loras=request.loras,
            model_path=request.model_path,
            size=(request.width, request.height),
            progress=progress,
            cancel=cancel,
        )
    return pipeline
