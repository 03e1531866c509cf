"""One benchmark chunk: load a pipeline, run a discarded warm-up generation, time one generation.

Runs inside a fresh subprocess (``teacache-studio bench --worker SPEC``) and prints exactly one
result line, ``::BENCH_RESULT::<json>``, on stdout. Everything else (mflux's own progress bar,
warnings) goes to stderr. The three conditions:

* ``vanilla``: the untouched mflux pipeline — no adapter installed, mflux's own predict (for the
  demo its eager predict; for FLUX.2 shells on Linux/CUDA the ``mx.compile``'d one).
* ``gate_off``: our adapter installed with threshold 0 (the gate's fast path: no signal, no
  residual). Against ``vanilla`` it isolates the cost of our execution path.
* ``gated``: our adapter at the benchmark threshold. Against ``gate_off`` it isolates the gating.

The only thing added to every condition alike is a timing callback with no MLX work in it: it
stamps ``before_loop`` and ``after_loop`` (mflux evaluates the latents at the end of every step,
so ``after_loop`` sees the loop finished) and counts the steps.

Warm-up policy: ``warmup`` discarded generations run first in the same process, so MLX start-up,
kernel JIT (``mx.compile`` traces, g++ on CPU) and allocator growth are not billed to the step
loop. The first generation's times are still reported (``first_generation``), so both the cold
and the steady cost are visible.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from typing import Any

from app.engine.request import GenerationRequest, generate_kwargs

RESULT_PREFIX = "::BENCH_RESULT::"
CONDITIONS = ("vanilla", "gate_off", "gated")
WORKER_SCHEMA = 1
# A further gated condition runs another gate on the same request: ``gated-<gate>`` (``bench
# --also-gate``), e.g. the first-block probe's forced pattern beside TeaCache's in one batch.
GATED_PREFIX = "gated-"


def condition_gate(condition: str) -> str | None:
    """The gate a ``gated-<gate>`` condition names; None for the three plain conditions."""
    return condition.removeprefix(GATED_PREFIX) if condition.startswith(GATED_PREFIX) else None


def is_gated(condition: str) -> bool:
    """Whether the condition's gate may skip (``gated`` or ``gated-<gate>``)."""
    return condition == "gated" or condition_gate(condition) is not None


def check_condition(condition: str) -> str:
    from app.gate.kinds import GATE_KINDS

    gate = condition_gate(condition)
    if condition not in CONDITIONS and gate not in GATE_KINDS:
        raise ValueError(
            f"condition must be one of {CONDITIONS} or {GATED_PREFIX}<gate>, got {condition!r}"
        )
    return condition


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything one chunk needs; plain data so it crosses the process boundary as JSON. The
    request is what ``generate`` would run (its threshold and gate: the ``gated`` condition's);
    the rest is how the bench runs and times it."""

    request: GenerationRequest
    condition: str
    # Replace the variant's polynomial (a forced skip pattern for timing on random weights).
    coefficients: tuple[float, ...] | None = None
    max_consecutive_skips: int | None = None
    # A forced pattern for a kind that forces its own (``GateKind.forced``: the probe skips this
    # many after each computed step whatever it measures); TeaCache's comes from ``coefficients``.
    forced_skips: int | None = None
    random_weights: str | None = None  # "tiny" | "full": an mflux shell with random weights
    dtype: str | None = None  # "float32" | "bfloat16"; None: the pipeline's own
    warmup: int = 1
    # Steps of each warm-up generation (None: the request's). A short warm-up still traces and
    # JIT-compiles everything once (with a forced pattern, 4 steps run F, S, C, F: prelude,
    # body and skip tail) and saves device time on large models.
    warmup_steps: int | None = None
    rep: int = 0
    image_path: str | None = None  # save the timed generation's image here (PNG)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_condition(self.condition)
        if self.coefficients is not None:
            object.__setattr__(self, "coefficients", tuple(float(c) for c in self.coefficients))

    def to_json(self) -> str:
        from app.fileio.jsonio import dumps_json

        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["request"] = self.request.as_dict()
        return dumps_json(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        data = json.loads(text)
        data["request"] = GenerationRequest.from_dict(data["request"])
        if data.get("coefficients") is not None:
            data["coefficients"] = tuple(data["coefficients"])
        return cls(**data)


def request_recipe(request: GenerationRequest) -> dict[str, Any]:
    """The request as the flat recipe keys the bench's and the sweep's reports (and their chunk
    folders' settings) have always held."""
    return {
        "variant": request.variant_id,
        "prompt": request.prompt,
        "seed": request.seed,
        "steps": request.steps,
        "width": request.width,
        "height": request.height,
        "threshold": request.threshold,
        "guidance": request.guidance,
        "quantize": request.quantize,
        "loras": [[lora.path, lora.scale] for lora in request.loras],  # as JSON reads it back
        "model_path": request.model_path,
        "gate": request.gate,
        "fill": request.fill,
    }


def gate_params(spec: WorkerSpec):  # -> GateParamsLike
    """The gate a condition runs with: ``gate_off`` the request's gate at threshold 0, ``gated``
    the request's gate, ``gated-<gate>`` that gate at the request's threshold. A forced pattern
    (``--forced-skips``) comes from the kind's own forced mode where it has one
    (``GateKind.forced``), else from ``coefficients`` through TeaCache's polynomial (gate off:
    that polynomial at 0 where the variant has no numbers of its own, so this year's models are
    timed all the same)."""
    from dataclasses import replace

    from app.gate.kinds import gate_kind

    request = spec.request
    variant = request.variant
    if spec.condition == "gate_off":
        uncalibrated = gate_kind(request.gate).calibration_of(variant) is None
        if spec.coefficients is not None and uncalibrated:
            return _polynomial_params(spec.coefficients, 0.0)
        return variant.params_for(request.gate, 0.0)
    gate = condition_gate(spec.condition) or request.gate
    kind = gate_kind(gate)
    if spec.forced_skips is not None:
        calibration = kind.calibration_of(variant)
        forced = None if calibration is None else kind.forced(calibration, spec.forced_skips)
        if forced is not None:
            return forced
    params: Any = (
        _polynomial_params(spec.coefficients, request.threshold)
        if spec.coefficients is not None
        else variant.params_for(gate, request.threshold)
    )
    if spec.max_consecutive_skips is not None:
        params = replace(params, max_consecutive_skips=spec.max_consecutive_skips)
    return params


def _polynomial_params(coefficients: tuple[float, ...], threshold: float):  # -> GateParamsLike
    """The parameters of the kind whose calibration is a polynomial (TeaCache's) with these
    coefficients, at ``threshold``: the bench's forced pattern (``--forced-skips``)."""
    from app.gate.kinds import GATE_KINDS, CalibrationMethod

    kind = next(
        k for k in GATE_KINDS.values() if k.calibration_method is CalibrationMethod.polynomial
    )
    return kind.params(kind.calibration_from_json({"coefficients": list(coefficients)}), threshold)


class _LoopTimer:
    """Stamps the denoising loop's start and end and counts its steps; no MLX work at all."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.finished: float | None = None
        self.steps = 0
        self.active_steps = 0

    def call_before_loop(
        self, seed: int, prompt: str, latents: Any, config: Any, **kw: Any
    ) -> None:
        self.active_steps = int(config.num_inference_steps) - int(
            getattr(config, "init_time_step", 0) or 0
        )
        self.started = time.perf_counter()

    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: Any,
        config: Any,
        time_steps: Any = None,
        **kw: Any,
    ) -> None:
        self.steps += 1

    def call_after_loop(self, seed: int, prompt: str, latents: Any, config: Any, **kw: Any) -> None:
        self.finished = time.perf_counter()

    @property
    def loop_seconds(self) -> float:
        if self.started is None or self.finished is None:
            raise RuntimeError("the pipeline never ran its denoising loop")
        return self.finished - self.started


def _load_average() -> float | None:
    """The host's 1-minute load average (None where the OS has none)."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _unregister(pipeline: Any, callback: object) -> None:
    for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
        items = getattr(pipeline.callbacks, name, None)
        if isinstance(items, list):
            items[:] = [c for c in items if c is not callback]


@contextmanager
def _precision(spec: WorkerSpec) -> Iterator[None]:
    if spec.dtype is None:
        yield
        return
    import mlx.core as mx

    from app.adapters.common import use_precision

    with use_precision({"float32": mx.float32, "bfloat16": mx.bfloat16}[spec.dtype]):
        yield


def load_pipeline(spec: WorkerSpec) -> Any:
    """The pipeline the app itself would load (the engine's loader), or a random-weight shell."""
    import threading
    from dataclasses import replace

    from app.engine.engine import default_loader
    from app.variants import get_variant
    from app.variants.user import split_user_variant_id

    variant = spec.request.variant
    if spec.random_weights is not None:
        from app.adapters.lora import apply_loras

        pipeline = _random_weight_pipeline(spec, variant)
        loras = spec.request.loras
        apply_loras(pipeline, [lora.path for lora in loras], [lora.scale for lora in loras])
        return pipeline
    # A user calibration (``demo+mycal``) runs the weights of its base variant.
    parts = split_user_variant_id(variant.id)
    base = get_variant(parts[0]) if parts else variant
    request = replace(spec.request, variant_id=base.id)
    return default_loader(base, request, lambda event: None, threading.Event())


def random_weight_families() -> str:
    """The families a random-weight shell exists for, in words: "FLUX.1, … and Qwen-Image"."""
    from app.families import family_names

    return family_names(lambda f: f.random_weights is not None, "and")


def _random_weight_pipeline(spec: WorkerSpec, variant: Any) -> Any:
    """An mflux shell of the variant's family with random weights: ``full`` at the real
    dimensions (built in the target dtype one matrix at a time, so a 20B-parameter Qwen-Image
    never holds a float32 copy), ``tiny`` for CPU tests and dry runs."""
    import mlx.core as mx

    from app.adapters import shells

    dtype = {"float32": mx.float32, "bfloat16": mx.bfloat16, None: mx.float32}[spec.dtype]
    if variant.family.random_weights is None:
        raise ValueError(
            f"random weights are available for {random_weight_families()} only, not {variant.id}"
        )
    return shells.random_weight_shell(
        variant.family,
        variant.mflux_name,
        full=spec.random_weights == "full",
        prompts=[spec.request.prompt],
        dtype=dtype,
    )


def generate_once(pipeline: Any, spec: WorkerSpec) -> dict[str, Any]:
    """One generation under the spec's condition; times, telemetry and the image."""
    import mlx.core as mx

    timer = _LoopTimer()
    gate = None
    load_average = _load_average()  # other work on the host: context for the time below
    mx.reset_peak_memory()
    if spec.condition == "vanilla":
        context: Any = nullcontext()
    else:
        from app.adapters import install_gate
        from app.gate import make_gate
        from app.gate.fill import get_fill

        gate = make_gate(gate_params(spec), fill=get_fill(spec.request.fill))
        context = install_gate(pipeline, gate)
    with context:
        pipeline.callbacks.register(timer)  # after the adapter's lifecycle: its begin() runs first
        try:
            started = time.perf_counter()
            result = pipeline.generate_image(**generate_kwargs(spec.request))
            wall = time.perf_counter() - started
        finally:
            _unregister(pipeline, timer)
    out: dict[str, Any] = {
        "loop_seconds": timer.loop_seconds,
        "wall_seconds": wall,
        "peak_memory_bytes": int(mx.get_peak_memory()),
        "active_steps": timer.active_steps,
        "loop_steps": timer.steps,
        "host_load_average": load_average,
    }
    if gate is None:  # nothing can skip: every active step ran the transformer
        out.update(
            pattern="C" * timer.steps,
            skipped=0,
            computed=timer.steps,
            step_seconds=None,
            forecast_steps=0,
        )
    else:
        from app.gate import Decision
        from app.gate.fill import REACH

        events = gate.events
        out.update(
            pattern="".join(e.decision.letter for e in events),
            skipped=sum(e.decision is Decision.skipped for e in events),
            computed=sum(e.decision.computes for e in events),
            step_seconds=[e.seconds for e in events],
            # skipped steps that added a forecast (``app.gate.fill``): 0 where the fill reuses
            forecast_steps=sum(e.fill.get(REACH, 0.0) > 0 for e in events),
        )
    out["_image"] = getattr(result, "image", None)
    return out


def warm_loop_estimate(timed: dict[str, Any], pattern: str) -> float:
    """Seconds a warm generation with ``pattern`` would take, from the timed run: its median
    computed-step and skipped-step times where the gate timed each step, else its mean step."""
    import statistics

    steps = timed.get("step_seconds")
    mean = timed["loop_seconds"] / max(1, timed["loop_steps"])
    if not steps:
        return mean * len(pattern)
    letters = timed["pattern"]
    computed = [t for t, c in zip(steps, letters, strict=False) if c != "S"]
    skipped = [t for t, c in zip(steps, letters, strict=False) if c == "S"]
    c_cost = statistics.median(computed) if computed else mean
    s_cost = statistics.median(skipped) if skipped else c_cost
    return sum(s_cost if c == "S" else c_cost for c in pattern)


def run_worker(spec: WorkerSpec) -> dict[str, Any]:
    """Load, warm up, time. Returns the result the worker prints (without the image)."""
    from dataclasses import replace

    from app.blas import preload_openblas

    preload_openblas()
    import mlx.core as mx

    from app.engine.report import longest_skip_streak
    from app.hardware import runtime_info

    with _precision(spec):
        mx.reset_peak_memory()
        started = time.perf_counter()
        pipeline = load_pipeline(spec)
        load_seconds = time.perf_counter() - started
        load_peak = int(mx.get_peak_memory())
        first: dict[str, Any] | None = None
        warm_spec = (
            spec
            if spec.warmup_steps is None
            else replace(spec, request=replace(spec.request, steps=spec.warmup_steps))
        )
        for _ in range(spec.warmup):
            warm = generate_once(pipeline, warm_spec)
            warm.pop("_image", None)
            first = first or warm
        timed = generate_once(pipeline, spec)
    image = timed.pop("_image")
    if spec.image_path and image is not None:
        image.save(spec.image_path)
    if first is None:
        first = {k: v for k, v in timed.items()}
        compile_estimate = None
    else:
        compile_estimate = first["loop_seconds"] - warm_loop_estimate(timed, first["pattern"])
    from app.gate.kinds import kind_of

    params = gate_params(spec) if spec.condition != "vanilla" else None
    fields = kind_of(params).report_fields(params) if params is not None else {}
    return {
        "schema": WORKER_SCHEMA,
        "variant": spec.request.variant_id,
        "condition": spec.condition,
        "rep": spec.rep,
        "gate": None if params is None else params.gate,
        "fill": None if params is None else spec.request.fill,
        "threshold": None if params is None else params.threshold,
        "coefficients": list(fields["coefficients"]) if "coefficients" in fields else None,
        "load_seconds": load_seconds,
        "load_peak_memory_bytes": load_peak,
        "warmup_generations": spec.warmup,
        "first_generation": {
            "loop_seconds": first["loop_seconds"],
            "wall_seconds": first["wall_seconds"],
            "steps": first["loop_steps"],
            "pattern": first["pattern"],
            "skipped": first["skipped"],
            # What the first generation cost beyond a warm one with its pattern: mx.compile
            # traces, kernel JIT (g++ on CPU, NVRTC on CUDA), allocator growth. The warm cost is
            # estimated from the timed run's own step times (see warm_loop_estimate).
            "compile_seconds": compile_estimate,
        },
        **timed,
        "longest_skip_streak": longest_skip_streak(timed["pattern"]),
        "image": spec.image_path if image is not None else None,
        "runtime": runtime_info(),
    }


def worker_main(spec_json: str) -> int:
    """Entry point of the hidden ``--worker`` mode: one result line on stdout, exit 0."""
    spec = WorkerSpec.from_json(spec_json)
    result = run_worker(spec)
    from app.fileio.jsonio import dumps_json

    sys.stdout.write(RESULT_PREFIX + dumps_json(result) + "\n")
    sys.stdout.flush()
    return 0


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The worker's result from its stdout (the last result line wins), or None."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            found = json.loads(line[len(RESULT_PREFIX) :])
    return found
