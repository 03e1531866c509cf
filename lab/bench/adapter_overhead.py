"""What the gate adapters cost per step, on real-dimension transformers with random weights.

Run on a GPU (MLX CUDA on the lent H200, or Metal on a Mac)::

    python -m lab.bench.adapter_overhead --out lab/bench/results/adapter-overhead-h200.json

Cases: FLUX.1 at its fixed 3072 width with a few blocks, and FLUX.2 Klein 4B in full (5 double +
20 single blocks, 24 × 128 heads), bf16, 512² and 1024², 512 text tokens, through mflux's real
``generate_image`` on shell pipelines (each family's ``shell`` in app/adapters; stub VAE, injected
embeddings).

Conditions, run interleaved (repetition-outer) in one process after one discarded warm-up each:

- ``vanilla``: no adapter, mflux's own path (FLUX.2's predict is ``mx.compile``'d off M1/M2);
- ``vanilla_eager``: FLUX.2 only, mflux's predict left eager (``is_m1_or_m2`` patched True): the
  baseline that shares the gated path's numerics, so gate overhead is not confused with compile;
- ``gate_threshold_0``: the adapter's fast path (no signal, no residual);
- ``gate_observe``: the vanilla-trace mode — signal and rel-L1 (one host sync) every step;
- ``gate_computing``: the gate enabled but never skipping (a constant prediction of 1.0 above the
  threshold): signal, rel-L1, and the residual stored and materialised every step;
- ``forced_skips``: zero coefficients and a streak cap of 1, so steps alternate computed/skipped
  (``FSCSCS…F``): the cost of a skipped step next to computed ones.

A step's time runs from the previous step's end (or before_loop) to its ``in_loop`` callback after
``mx.eval(latents)``; step 0 (trace/compile on the first call) is left out of every median. Ratios:
overhead per computed step = median computed step (condition) / median step (baseline) − 1;
skipped-step cost = median skipped step / median computed step of the baseline. Skip counts
and patterns sit next to every time in the JSON. Thresholds on random weights mean nothing; the
point is the mechanics' cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.fileio.jsonio import dumps_json

SCHEMA = 1
OFF_COEFFICIENTS = (0.0, 0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Condition:
    name: str
    gate: dict[str, Any] | None  # TeaCacheParams keywords (+ "observe"); None: no adapter
    eager_vanilla: bool = False


def _conditions(family: str) -> list[Condition]:
    conditions = [Condition("vanilla", None)]
    if family == "flux2":
        conditions.append(Condition("vanilla_eager", None, eager_vanilla=True))
    conditions += [
        Condition("gate_threshold_0", {"coefficients": OFF_COEFFICIENTS, "rel_l1_thresh": 0.0}),
        Condition(
            "gate_observe",
            {"coefficients": OFF_COEFFICIENTS, "rel_l1_thresh": 0.0, "observe": True},
        ),
        Condition("gate_computing", {"coefficients": OFF_COEFFICIENTS, "rel_l1_thresh": 0.5}),
        Condition(
            "forced_skips",
            {
                "coefficients": (0.0, 0.0, 0.0, 0.0, 0.0),
                "rel_l1_thresh": 0.5,
                "max_consecutive_skips": 1,
            },
        ),
    ]
    return conditions


class StepTimer:
    """mflux callback: wall time of each step, measured after the step's latents are evaluated."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._last = 0.0
        self.finite = True

    def call_before_loop(self, seed: int, prompt: str, latents: Any, config: Any, **kw: Any):
        import mlx.core as mx

        mx.eval(latents)
        self.times = []
        self._last = time.perf_counter()

    def call_in_loop(self, t: int, seed: int, prompt: str, latents: Any, config: Any, **kw: Any):
        import mlx.core as mx

        mx.eval(latents)
        now = time.perf_counter()
        self.times.append(now - self._last)
        self._last = now

    def call_after_loop(self, seed: int, prompt: str, latents: Any, config: Any, **kw: Any):
        import mlx.core as mx

        self.finite = bool(mx.all(mx.isfinite(latents)).item())


@contextmanager
def _eager_vanilla(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from mflux.utils.apple_silicon import AppleSiliconUtil

    original = AppleSiliconUtil.__dict__["is_m1_or_m2"]
    AppleSiliconUtil.is_m1_or_m2 = staticmethod(lambda: True)  # type: ignore[method-assign]
    try:
        yield
    finally:
        AppleSiliconUtil.is_m1_or_m2 = original  # type: ignore[method-assign]


def run_once(pipeline: Any, condition: Condition, kwargs: dict[str, Any]) -> dict[str, Any]:
    from app.adapters import common, install_gate
    from app.gate import LiveGate, TeaCacheGate, TeaCacheParams
    from app.gate.kinds import vanilla_recorder

    class Uncalibrated:
        calibrations: dict[str, object] = {}  # noqa: RUF012

    gate: LiveGate | None = None
    context: Any = nullcontext()
    if condition.gate is not None:
        spec = dict(condition.gate)
        # ``observe``: the app's vanilla pass, every kind recording its trace each step.
        gate = (
            vanilla_recorder(Uncalibrated())
            if spec.pop("observe", False)
            else TeaCacheGate(TeaCacheParams(**spec))
        )
        context = install_gate(pipeline, gate)
    timer = StepTimer()
    with _eager_vanilla(condition.eager_vanilla), context, common.attached(pipeline, timer):
        started = time.perf_counter()
        pipeline.generate_image(**kwargs)
        wall = time.perf_counter() - started
    steps = len(timer.times)
    pattern = gate.pattern if gate is not None else "C" * steps
    return {
        "step_s": timer.times,
        "pattern": pattern,
        "skipped": pattern.count("S"),
        "computed": steps - pattern.count("S"),
        "loop_s": sum(timer.times),
        "wall_s": wall,
        "finite": timer.finite,
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    computed: list[float] = []
    skipped: list[float] = []
    for run in runs:
        for index, (seconds, letter) in enumerate(zip(run["step_s"], run["pattern"], strict=True)):
            if index == 0:
                continue  # first call: trace / compile
            (skipped if letter == "S" else computed).append(seconds)
    return {
        "median_computed_step_s": _median(computed),
        "median_skipped_step_s": _median(skipped),
        "computed_steps_timed": len(computed),
        "skipped_steps_timed": len(skipped),
        "median_loop_s": _median([r["loop_s"] for r in runs]),
        "skipped_per_run": [r["skipped"] for r in runs],
        "pattern": runs[0]["pattern"],
        "all_finite": all(r["finite"] for r in runs),
        "runs": runs,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def ratios(conditions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base_name = "vanilla_eager" if "vanilla_eager" in conditions else "vanilla"
    base = conditions[base_name]["median_computed_step_s"]
    out: dict[str, Any] = {"baseline": base_name}
    for name in ("gate_threshold_0", "gate_observe", "gate_computing", "forced_skips"):
        r = _ratio(conditions[name]["median_computed_step_s"], base)
        out[f"{name}_overhead_per_computed_step"] = None if r is None else r - 1.0
    forced = conditions["forced_skips"]
    out["skipped_step_cost_vs_baseline_step"] = _ratio(forced["median_skipped_step_s"], base)
    out["skipped_step_cost_vs_same_run_computed_step"] = _ratio(
        forced["median_skipped_step_s"], forced["median_computed_step_s"]
    )
    if "vanilla_eager" in conditions:
        compiled = conditions["vanilla"]["median_computed_step_s"]
        out["compiled_vanilla_vs_eager_vanilla"] = _ratio(compiled, base)
    return out


def _build(
    family: str,
    blocks: tuple[int, int],
    tiny: bool,
    dtype: Any,
    text_tokens: int,
    init_scale: float,
) -> Any:
    from app.adapters import flux1, flux2
    from app.families.flux1 import Flux1Dims
    from app.families.flux2 import FLUX2_KLEIN_4B, FLUX2_TINY

    if family == "flux1":
        return flux1.shell(
            "dev",
            dims=Flux1Dims(*blocks),
            text_tokens=text_tokens,
            dtype=dtype,
        ), f"FLUX.1 dev transformer, {blocks[0]} joint + {blocks[1]} single blocks at 3072"
    dims = FLUX2_TINY if tiny else FLUX2_KLEIN_4B
    label = (
        "FLUX.2 Klein 4B transformer in full (5 double + 20 single blocks, 24 × 128)"
        if not tiny
        else "FLUX.2 tiny transformer"
    )
    return flux2.shell(
        "flux2-klein-4b", dims=dims, text_tokens=text_tokens, dtype=dtype, init_scale=init_scale
    ), label


def bench_case(
    family: str,
    size: int,
    *,
    blocks: tuple[int, int] = (2, 4),
    steps: int,
    reps: int,
    tiny: bool,
    text_tokens: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    import mlx.core as mx

    from app.adapters import common, shells

    dtype = mx.float32 if tiny else mx.bfloat16
    kwargs: dict[str, Any] = {
        "seed": 0,
        "prompt": shells.DEFAULT_PROMPT,
        "num_inference_steps": steps,
        "height": size,
        "width": size,
    }
    if family == "flux1":
        kwargs["guidance"] = 3.5
    with common.use_precision(dtype):
        init_scale = 1.0
        pipeline, label = _build(family, blocks, tiny, dtype, text_tokens, init_scale)
        for _attempt in range(3):  # deep random nets can overflow bf16: shrink the weights
            if run_once(pipeline, Condition("vanilla", None), kwargs)["finite"]:
                break
            init_scale *= 0.5
            log(f"  non-finite latents: rebuilding with init scale {init_scale}")
            pipeline, label = _build(family, blocks, tiny, dtype, text_tokens, init_scale)
        conditions = _conditions(family)
        for condition in conditions:  # warm-up, discarded
            run_once(pipeline, condition, kwargs)
        results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in conditions}
        for rep in range(reps):
            for condition in conditions:
                result = run_once(pipeline, condition, kwargs)
                results[condition.name].append(result)
                log(
                    f"  rep {rep} {condition.name:<18} loop {result['loop_s']:.3f}s "
                    f"skipped {result['skipped']}/{steps} {result['pattern']}"
                )
        del pipeline
        mx.clear_cache()
    summary = {name: summarise(runs) for name, runs in results.items()}
    return {
        "family": family,
        "model": label,
        "blocks": list(blocks) if family == "flux1" else None,
        "random_weights_init_scale": init_scale,
        "dtype": "float32" if tiny else "bfloat16",
        "size": size,
        "image_tokens": (size // 16) ** 2,
        "text_tokens": text_tokens,
        "steps": steps,
        "reps": reps,
        "conditions": summary,
        "ratios": ratios(summary),
    }


def hardware() -> dict[str, Any]:
    import mlx.core as mx

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mlx": getattr(mx, "__version__", None),
        "default_device": str(mx.default_device()),
    }
    try:
        from importlib.metadata import version

        info["mflux"] = version("mflux")
    except Exception:
        info["mflux"] = None
    with contextlib.suppress(Exception):
        info["device_info"] = {k: str(v) for k, v in mx.device_info().items()}  # type: ignore[attr-defined]
    return info


DEFAULT_CASES = "flux1:2+4:512,flux1:2+4:1024,flux1:4+8:1024,flux2:full:512,flux2:full:1024"


def _parse_case(spec: str) -> tuple[str, tuple[int, int], int]:
    family, depth, size = spec.split(":")
    blocks = (0, 0) if depth == "full" else tuple(int(n) for n in depth.split("+"))
    return family, (blocks[0], blocks[1]), int(size)


def flux1_full_depth(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """FLUX.1 runs 19 joint + 38 single blocks; timing that needs ~24 GB of random weights per
    depth, so two shallow depths with the same 1:2 ratio are timed and a vanilla computed step is
    extrapolated linearly in depth (t = a + b·joint blocks) to 19. What the gate adds (block 0's
    modulated input, one rel-L1 with its host sync, the residual) and what a skipped step costs
    do not depend on depth: they are taken as measured, the larger of the two depths' values."""
    out = []
    by_size: dict[int, list[dict[str, Any]]] = {}
    for case in cases:
        blocks = case.get("blocks")
        if case["family"] == "flux1" and blocks and blocks[1] == 2 * blocks[0]:
            by_size.setdefault(case["size"], []).append(case)
    for size, group in sorted(by_size.items()):
        if len({c["blocks"][0] for c in group}) < 2:
            continue
        lo, hi = sorted(group, key=lambda c: c["blocks"][0])[:2]
        k_lo, k_hi = lo["blocks"][0], hi["blocks"][0]
        v_lo = lo["conditions"]["vanilla"]["median_computed_step_s"]
        v_hi = hi["conditions"]["vanilla"]["median_computed_step_s"]
        vanilla = v_lo + (v_hi - v_lo) / (k_hi - k_lo) * (19 - k_lo)

        def added(name: str, pair: tuple[dict, ...] = (lo, hi)) -> float:
            return max(
                c["conditions"][name]["median_computed_step_s"]
                - c["conditions"]["vanilla"]["median_computed_step_s"]
                for c in pair
            )

        skipped = max(c["conditions"]["forced_skips"]["median_skipped_step_s"] for c in (lo, hi))
        out.append(
            {
                "size": size,
                "from_depths": [lo["blocks"], hi["blocks"]],
                "vanilla_computed_step_s_at_19_plus_38": vanilla,
                "gate_observe_added_s": added("gate_observe"),
                "gate_computing_added_s": added("gate_computing"),
                "skipped_step_s": skipped,
                "gate_observe_overhead_per_computed_step": added("gate_observe") / vanilla,
                "gate_computing_overhead_per_computed_step": added("gate_computing") / vanilla,
                "skipped_step_cost_vs_computed_step": skipped / vanilla,
            }
        )
    return out


def rederive(report: dict[str, Any]) -> dict[str, Any]:
    """Recompute every derived number of a saved report from its raw per-step times."""
    for case in report["cases"]:
        case["conditions"] = {
            name: summarise(cond["runs"]) for name, cond in case["conditions"].items()
        }
        case["ratios"] = ratios(case["conditions"])
    report["flux1_full_depth_extrapolation"] = flux1_full_depth(report["cases"])
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Per-step cost of the TeaCache gate adapters.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--cases",
        default=DEFAULT_CASES,
        help="comma-separated family:depth:size, depth 'J+S' blocks (FLUX.1) or 'full' (FLUX.2)",
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--text-tokens", type=int, default=512)
    parser.add_argument("--tiny", action="store_true", help="tiny float32 shells (a CPU dry run)")
    parser.add_argument(
        "--rederive", type=Path, help="recompute the derived numbers of a saved report into --out"
    )
    args = parser.parse_args(argv)
    if args.rederive is not None:
        report = rederive(json.loads(args.rederive.read_text(encoding="utf-8")))
        args.out.write_text(dumps_json(report, indent=1) + "\n", encoding="utf-8")
        return 0

    from app.blas import preload_openblas

    preload_openblas()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    cases: list[dict[str, Any]] = []
    for spec in args.cases.split(","):
        family, blocks, size = _parse_case(spec)
        log(f"{spec}")
        cases.append(
            bench_case(
                family,
                size,
                blocks=blocks,
                steps=args.steps,
                reps=args.reps,
                tiny=args.tiny,
                text_tokens=args.text_tokens,
                log=log,
            )
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps_json(_report(cases), indent=1), encoding="utf-8")
    for case in cases:
        r = case["ratios"]
        log(
            f"{case['model']} {case['size']}²: overhead/computed step "
            f"t0 {_pct(r['gate_threshold_0_overhead_per_computed_step'])}, "
            f"observe {_pct(r['gate_observe_overhead_per_computed_step'])}, "
            f"computing {_pct(r['gate_computing_overhead_per_computed_step'])}; "
            f"skipped step {_share(r['skipped_step_cost_vs_baseline_step'])} of a computed one"
        )
    for row in flux1_full_depth(cases):
        log(
            f"FLUX.1 19+38 (extrapolated) {row['size']}²: computing "
            f"{_pct(row['gate_computing_overhead_per_computed_step'])}, skipped step "
            f"{_share(row['skipped_step_cost_vs_computed_step'])} of a computed one"
        )
    return 0


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.2f}%"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


def _report(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "what": "per-step cost of the TeaCache gate adapters (random weights, timing only)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "hardware": hardware(),
        "method": (
            "one process, repetition-outer interleaving of conditions, one discarded warm-up "
            "generation per condition; step time = previous step end to in_loop after "
            "mx.eval(latents); step 0 excluded; medians over all timed steps of all reps"
        ),
        "cases": cases,
        "flux1_full_depth_extrapolation": flux1_full_depth(cases),
    }


if __name__ == "__main__":
    raise SystemExit(main())
