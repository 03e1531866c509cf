"""What live step previews cost per step (issue #20): the embedded demo on the CPU, FLUX.2 Klein 4B
at its real size with random weights on a GPU.

On this machine (the demo, float32)::

    uv run python -m lab.bench.previews --variant demo --reps 5 \\
        --out lab/bench/results/previews-demo-cpu.json

On the H200 (MLX CUDA; FLUX.2 Klein 4B in full — 5 double + 20 single blocks — bf16, 1024²)::

    python -m lab.bench.previews --variant flux2-klein-4b --random-weights full \\
        --dtype bfloat16 --size 1024x1024 --steps 8 --reps 3 \\
        --out $OUT/previews-h200-flux2-1024.json

Each repetition runs two cold subprocesses, previews off and on (their order alternating between
repetitions), each loading the pipeline, running one discarded warm-up generation with previews
on (so the projection's kernels are built in both), then the timed gated generation. The gate runs
a forced pattern on random weights (zero coefficients, one skip after each computed step:
``FSCSCS…F``) and the variant's default threshold on the demo (a real model: its own pattern).

Measured per step: the gate's step seconds (previews are charged to none of them: the previewer
runs inside ``gate.untimed()``), the preview's own seconds (the clean prediction, the projection or
the demo's decode, and the host transfer: every ``gate.untimed()`` block the previewer runs — a
step's pick-up of the previous step's finished thumbnail plus the dispatch of its own, the last
pick-up after the loop folded into the last step),
and the loop's wall seconds (before_loop to after_loop, previews included). Reported: the median
over repetitions of the median preview seconds, and its ratio to the median computed step of the
previews-off runs (the issue asks ≤ 2 % of a 1024² FLUX.2 Klein 4B step); the wall difference per
step on/off; skip counts and patterns next to every time. Step 0 (first trace) is left out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.fileio.jsonio import dumps_json
from lab.readme_figures import Passage, count_word, fixed

if TYPE_CHECKING:
    from app.bench.worker import WorkerSpec

SCHEMA = 1
FORCED = {"coefficients": (0.0, 0.0, 0.0, 0.0, 0.0), "threshold": 0.5, "max_consecutive_skips": 1}
PROMPT = "red circle"  # in the demo's vocabulary; the random-weight shells embed any prompt


def _spec(args: argparse.Namespace) -> WorkerSpec:
    from app.bench.worker import WorkerSpec
    from app.engine.request import GenerationRequest
    from app.variants import get_variant

    variant = get_variant(args.variant)
    width, height = args.size or variant.default_size
    forced = args.random_weights is not None
    request = GenerationRequest(
        variant_id=variant.id,
        prompt=PROMPT,
        seed=args.seed,
        steps=args.steps or variant.default_steps,
        threshold=FORCED["threshold"] if forced else (variant.default_threshold or 0.1),
        width=width,
        height=height,
        guidance=variant.default_guidance,
    )
    return WorkerSpec(
        request,
        "gated",
        coefficients=FORCED["coefficients"] if forced else None,
        max_consecutive_skips=FORCED["max_consecutive_skips"] if forced else None,
        random_weights=args.random_weights,
        dtype=args.dtype,
        warmup_steps=args.warmup_steps,
    )


# -- one cold process --------------------------------------------------------------------------
def run_once(spec_json: str, previews: bool) -> dict[str, Any]:
    """Load, warm up (previews on), then one timed gated generation with previews ``previews``."""
    from app.blas import preload_openblas

    preload_openblas()
    import mlx.core as mx
    import numpy as np

    from app.adapters import install_gate
    from app.adapters.common import attached
    from app.adapters.previews import StepPreviewer, preview_decoder
    from app.bench.worker import WorkerSpec, _precision, gate_params
    from app.bench.worker import load_pipeline as load_bench_pipeline
    from app.engine.engine import quiet_mflux_progress
    from app.engine.request import generate_kwargs
    from app.gate import Decision, TeaCacheGate, TeaCacheParams

    quiet_mflux_progress()
    spec = WorkerSpec.from_json(spec_json)
    with _precision(spec):
        pipeline = load_bench_pipeline(spec)
        decode = preview_decoder(pipeline)
        preview_seconds: list[float] = []
        shapes: set[tuple[int, ...]] = set()

        class TimedGate(TeaCacheGate):
            """Times every block the previewer runs outside the steps: a step's pick-up of the
            previous thumbnail plus its own dispatch, and the last pick-up after the loop."""

            @contextlib.contextmanager
            def untimed(self) -> Iterator[None]:
                started = time.perf_counter()
                with super().untimed():
                    yield
                preview_seconds.append(time.perf_counter() - started)

        def keep_shape(index: int, image: np.ndarray) -> None:
            shapes.add(tuple(image.shape))

        class LoopClock:
            started = finished = 0.0

            def call_before_loop(self, *a: Any, **k: Any) -> None:
                self.started = time.perf_counter()

            def call_after_loop(self, *a: Any, **k: Any) -> None:
                self.finished = time.perf_counter()

        def generate(steps: int, with_previews: bool) -> tuple[TeaCacheGate, LoopClock]:
            params = gate_params(spec)
            assert isinstance(params, TeaCacheParams)  # it times TeaCache's forced pattern
            gate = TimedGate(params)
            clock = LoopClock()
            previewer = StepPreviewer(decode, keep_shape, gate=gate)
            kwargs = {**generate_kwargs(spec.request), "num_inference_steps": steps}
            with install_gate(pipeline, gate), attached(pipeline, clock):
                if with_previews:
                    with attached(pipeline, previewer):
                        pipeline.generate_image(**kwargs)
                else:
                    pipeline.generate_image(**kwargs)
            return gate, clock

        steps = spec.request.steps
        generate(spec.warmup_steps or steps, True)
        preview_seconds.clear()
        mx.synchronize()
        gate, clock = generate(steps, previews)
    if len(preview_seconds) == steps + 1:  # the after-loop pick-up is the last step's
        preview_seconds[-2:] = [preview_seconds[-2] + preview_seconds[-1]]
    events = gate.events
    computed = [e.seconds for e in events[1:] if e.decision is not Decision.skipped]
    skipped = [e.seconds for e in events[1:] if e.decision is Decision.skipped]
    return {
        "previews": previews,
        "pattern": gate.pattern,
        "skipped": gate.skipped,
        "step_seconds": [e.seconds for e in events],
        "median_computed_step_seconds": statistics.median(computed) if computed else None,
        "median_skipped_step_seconds": statistics.median(skipped) if skipped else None,
        "loop_wall_seconds": clock.finished - clock.started,
        "preview_seconds": preview_seconds,
        "median_preview_seconds": statistics.median(preview_seconds[1:] or preview_seconds)
        if preview_seconds
        else None,
        "preview_shapes": sorted(shapes),
        "mlx_device": str(mx.default_device()),
    }


# -- the driver ----------------------------------------------------------------------------------
def _subprocess(spec: WorkerSpec, previews: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "lab.bench.previews", "--worker", spec.to_json()]
    if previews:
        command.append("--worker-previews")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    off = [r for r in runs if not r["previews"]]
    on = [r for r in runs if r["previews"]]
    step = _median([r["median_computed_step_seconds"] for r in off])
    step_on = _median([r["median_computed_step_seconds"] for r in on])
    preview = _median([r["median_preview_seconds"] for r in on])
    steps = len(off[0]["step_seconds"]) if off else 0
    wall_off = _median([r["loop_wall_seconds"] for r in off])
    wall_on = _median([r["loop_wall_seconds"] for r in on])
    return {
        "median_computed_step_seconds_previews_off": step,
        "median_computed_step_seconds_previews_on": step_on,
        "median_preview_seconds": preview,
        "preview_fraction_of_computed_step": preview / step if preview and step else None,
        "median_loop_wall_seconds_previews_off": wall_off,
        "median_loop_wall_seconds_previews_on": wall_on,
        "wall_difference_per_step_seconds": (wall_on - wall_off) / steps
        if wall_on is not None and wall_off is not None and steps
        else None,
        "patterns": sorted({r["pattern"] for r in runs}),
        "skipped": sorted({r["skipped"] for r in runs}),
        "preview_shapes": sorted({tuple(s) for r in on for s in r["preview_shapes"]}),
    }


RESULTS = Path(__file__).parent / "results"
H200 = RESULTS / "previews-h200-flux2-1024.json"
# The first design (each thumbnail waited for inside its step), measured at f039930 and
# superseded in the file above by the queued design; kept byte for byte from that commit.
H200_BLOCKING = RESULTS / "previews-h200-flux2-1024-blocking.json"
DEMO_CPU = RESULTS / "previews-demo-cpu.json"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _ms(seconds: float) -> float:
    return seconds * 1000


def _signed(value: float) -> str:
    return ("+" if value >= 0 else "\u2212") + fixed(abs(value), 1)


def _listed(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def wall_differences_ms(report: dict[str, Any]) -> list[float]:
    """Per repetition, previews on minus off: the loop's wall time per step (ms), in rep order."""
    steps = report["spec"]["steps"]
    by_rep: dict[int, dict[bool, float]] = {}
    for r in report["runs"]:
        by_rep.setdefault(r["rep"], {})[r["previews"]] = r["loop_wall_seconds"]
    return [_ms(pair[True] - pair[False]) / steps for _, pair in sorted(by_rep.items())]


def readme_figures() -> list[Passage]:
    """The README's preview costs: the H200's (and the first design's) and the demo CPU's."""
    h200, blocking, cpu = load(H200), load(H200_BLOCKING), load(DEMO_CPU)
    summary, old = h200["summary"], blocking["summary"]
    step = summary["median_computed_step_seconds_previews_off"]
    pairs = wall_differences_ms(h200)
    median_pair = statistics.median(pairs)
    spread = [_ms(r["median_computed_step_seconds"]) for r in h200["runs"]]
    source = "lab/bench/results/previews-h200-flux2-1024.json"
    return [
        Passage(
            source,
            "`lab/bench/results/previews-h200-flux2-1024.json`, {reps} repetitions, {steps} steps, "
            "{skipped} skipped): a preview costs **{ms} ms per step, {share}% of a computed "
            "step** ({step} ms).",
            {
                "reps": str(h200["reps"]),
                "steps": str(h200["spec"]["steps"]),
                "skipped": "/".join(str(n) for n in summary["skipped"]),
                "ms": fixed(_ms(summary["median_preview_seconds"]), 2),
                "share": fixed(summary["preview_fraction_of_computed_step"] * 100, 1),
                "step": fixed(_ms(step), 1),
            },
        ),
        Passage(
            "lab/bench/results/previews-h200-flux2-1024-blocking.json",
            "The first design waited for each thumbnail ({ms} ms, {share}%);",
            {
                "ms": fixed(_ms(old["median_preview_seconds"]), 2),
                "share": fixed(old["preview_fraction_of_computed_step"] * 100, 2),
            },
        ),
        Passage(
            source,
            "the computed step's median with previews on is {on} ms against {off} ms off (cold "
            "processes, within their {low}–{high} ms spread), and the loop's wall time per step "
            "differs by {pairs} ms in the {count} on/off pairs (median {median} ms, {share}% of a "
            "computed step)",
            {
                "on": fixed(_ms(summary["median_computed_step_seconds_previews_on"]), 1),
                "off": fixed(_ms(step), 1),
                "low": fixed(min(spread), 1),
                "high": fixed(max(spread), 1),
                "pairs": _listed([_signed(p) for p in pairs]),
                "count": count_word(len(pairs)),
                "median": _signed(median_pair),
                "share": fixed(median_pair / _ms(step) * 100, 1),
            },
        ),
        Passage(
            "lab/bench/results/previews-demo-cpu.json",
            "({cpu}, {cores} cores, shared; `lab/bench/results/previews-demo-cpu.json`, median of "
            "{reps}, {skipped} of {steps} steps skipped): {ms} ms per step, {share}% of a computed "
            "step;",
            {
                "cpu": cpu["hardware"]["cpu"],
                "cores": str(cpu["hardware"]["cores"]),
                "reps": str(cpu["reps"]),
                "skipped": "/".join(str(n) for n in cpu["summary"]["skipped"]),
                "steps": str(cpu["spec"]["steps"]),
                "ms": fixed(_ms(cpu["summary"]["median_preview_seconds"]), 1),
                "share": fixed(cpu["summary"]["preview_fraction_of_computed_step"] * 100, 1),
            },
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    from app.cli.generate import parse_size_arg
    from app.hardware import host_info

    p = argparse.ArgumentParser(description="What live step previews cost per step.")
    p.add_argument("--variant", default="demo")
    p.add_argument("--random-weights", choices=("tiny", "full"))
    p.add_argument("--dtype", choices=("float32", "bfloat16"))
    p.add_argument("--size", type=parse_size_arg)
    p.add_argument("--steps", type=int)
    p.add_argument("--warmup-steps", type=int, default=4)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", type=Path)
    p.add_argument("--label", default="")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-previews", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        result = run_once(args.worker, args.worker_previews)
        print(dumps_json(result))
        return 0
    spec = _spec(args)
    runs: list[dict[str, Any]] = []
    for rep in range(args.reps):
        for previews in (False, True) if rep % 2 == 0 else (True, False):
            result = _subprocess(spec, previews)
            result["rep"] = rep
            runs.append(result)
            print(
                f"rep {rep} previews {'on ' if previews else 'off'}: "
                f"step {result['median_computed_step_seconds'] * 1000:.2f} ms, preview "
                + (
                    f"{result['median_preview_seconds'] * 1000:.2f} ms"
                    if result["median_preview_seconds"] is not None
                    else "—"
                )
                + f", {result['skipped']} skipped ({result['pattern']})",
                file=sys.stderr,
            )
    summary = summarise(runs)
    document = {
        "schema": SCHEMA,
        "what": "live step previews: per-step cost against the gated step (issue #20)",
        "label": args.label,
        "spec": json.loads(spec.to_json()),
        "reps": args.reps,
        "hardware": host_info(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "summary": summary,
        "runs": runs,
    }
    text = dumps_json(document, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    fraction = summary["preview_fraction_of_computed_step"]
    print(
        f"preview {summary['median_preview_seconds'] * 1000:.2f} ms per step = "
        f"{fraction * 100:.2f} % of a computed step "
        f"({summary['median_computed_step_seconds_previews_off'] * 1000:.1f} ms); "
        f"skipped {summary['skipped']}",
    )
    # the thumbnail's device work is queued asynchronously: where the device is still busy with
    # it when the next step evaluates, it shows here, as step time on above off
    step_on = summary["median_computed_step_seconds_previews_on"]
    wall = summary["wall_difference_per_step_seconds"]
    if step_on is not None and wall is not None:
        print(
            f"computed step with previews on {step_on * 1000:.1f} ms; loop wall on − off "
            f"{wall * 1000:+.2f} ms per step"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
