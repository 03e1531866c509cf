"""``teacache-studio bench``: cold, isolated, interleaved timings with the skips beside them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.bench.worker import CONDITIONS, GATED_PREFIX, random_weight_families
from app.cli.chunked import interrupted, stopped_early
from app.cli.errors import UserError
from app.cli.generate import add_gate_argument, add_lora_argument, lora_args, parse_size_arg
from app.cli.model_path import add_model_path_argument, resolve_model_path
from app.gate.fill import DEFAULT_FILL
from app.gate.kinds import GATE_KINDS, gate_kind
from app.variants.catalog import QUANTIZE_LEVELS

DEFAULT_PROMPT = "a red circle on a blue background"
FORCED_THRESHOLD = 0.5


def forced_coefficients(skips_per_compute: int) -> tuple[float, ...]:
    """A constant polynomial that makes the gate skip ``n`` steps after every computed one,
    whatever the weights: each skip adds ``T / (n + ½)`` to the accumulator, so ``n`` skips stay
    under ``T`` and the next step crosses it. For timing on random weights only."""
    return (0.0, 0.0, 0.0, 0.0, FORCED_THRESHOLD / (skips_per_compute + 0.5))


def add_recipe_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="variant id (see `teacache-studio variants`)")
    p.add_argument(
        "--prompt",
        help=f"default: “{DEFAULT_PROMPT}”, or the family's example where it reads a format of its "
        "own (FIBO's JSON captions)",
    )
    p.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    p.add_argument("--steps", type=int, help="denoising steps (default: the variant's)")
    p.add_argument("--size", type=parse_size_arg, help="WIDTHxHEIGHT (default: the variant's)")
    p.add_argument("--guidance", type=float, help="guidance scale where the family has one")
    add_lora_argument(p)
    p.add_argument("--quantize", type=int, choices=QUANTIZE_LEVELS, help="quantize real models")
    add_model_path_argument(p)
    add_gate_argument(p)


def make_recipe_request(
    args: argparse.Namespace, threshold: float | None = None, *, forced: bool = False
):
    """Validate the recipe with the same rules as ``generate``; fill the variant's defaults.
    ``forced``: a forced pattern brings its own gate numbers (a variant without a calibration,
    as this year's models, is timed all the same)."""
    from app.engine.request import RequestError, make_request
    from app.variants import UnknownVariantError, get_variant

    variant_id, model_path = resolve_model_path(args.variant, args.model_path)
    prompt = args.prompt
    if prompt is None:
        try:
            prompt_format = get_variant(variant_id).family.prompt_format
        except UnknownVariantError:
            prompt_format = None  # make_request says so in its own words
        example = prompt_format.example if prompt_format is not None else None
        prompt = example or DEFAULT_PROMPT
    try:
        return make_request(
            variant_id,
            prompt,
            seed=args.seed,
            steps=args.steps,
            threshold=threshold,
            size=args.size,
            guidance=args.guidance,
            quantize=args.quantize,
            loras=lora_args(args),
            model_path=model_path,
            gate=args.gate,
            gate_numbers_given=forced,
            fill=getattr(args, "fill", DEFAULT_FILL),
        )
    except RequestError as exc:
        raise UserError(str(exc)) from None


def _positive(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise UserError(f"{name} must be at least {minimum}, got {value}")


def _bench(args: argparse.Namespace) -> int:
    if args.worker is not None:
        from app.bench.worker import worker_main

        return worker_main(args.worker)
    if args.readme_table:
        from app.bench.table import readme_table

        print(readme_table())
        return 0
    _positive("--reps", args.reps)
    _positive("--warmup", args.warmup, 0)
    _positive("--forced-skips", args.forced_skips)
    _positive("--max-chunks", args.max_chunks, 0)
    coefficients = None
    max_streak = None
    threshold = args.threshold
    if args.forced_skips is not None:
        if threshold is not None:
            raise UserError("--forced-skips sets its own threshold; leave out --threshold")
        # TeaCache's forced pattern; a kind that forces its own (the probe) ignores it.
        coefficients = forced_coefficients(args.forced_skips)
        threshold = FORCED_THRESHOLD
        max_streak = max(args.forced_skips, 1)
    _positive("--warmup-steps", args.warmup_steps)
    request = make_recipe_request(args, threshold, forced=coefficients is not None)
    also = tuple(dict.fromkeys(args.also_gate or ()))
    for gate in (request.gate, *also):
        forced = args.forced_skips is not None and gate_kind(gate).forced_skips
        # A forced pattern brings its own numbers: no calibration is needed to time it.
        reason = None if forced else request.variant.gate_unavailable_reason(gate)
        if reason is not None:
            raise UserError(reason)
        if args.forced_skips is not None and not forced:
            raise UserError(
                f"--forced-skips cannot force a {gate_kind(gate).label} pattern (it drives "
                "TeaCache's polynomial or the first-block probe); leave out that gate"
            )
    if request.gate in also:
        raise UserError(f"--also-gate {request.gate} is the gated condition's own gate already")
    if args.random_weights and request.model_path is not None:
        raise UserError("--random-weights builds its own weights; leave out --model-path")
    if args.random_weights and request.variant.family.random_weights is None:
        raise UserError(f"--random-weights works for {random_weight_families()} variants only")
    if request.threshold <= 0:
        print(
            f"warning: threshold 0 for {request.variant_id} — the gated condition cannot skip "
            "(pass --threshold, or --forced-skips for a timing-only pattern)",
            file=sys.stderr,
        )
    from app.bench.chunks import PlanMismatchError
    from app.bench.harness import BenchConfig, WorkerFailed, chunks_dir, run_bench

    label = args.label
    if label is None and coefficients is not None:
        label = (
            f"Timing only: a forced skip pattern ({args.forced_skips} skipped after each "
            "computed step, from a constant gate polynomial) — says nothing about image quality"
        )
    if label is None and args.random_weights:
        label = "Timing only: random weights"
    config = BenchConfig(
        request,
        reps=args.reps,
        warmup=args.warmup,
        warmup_steps=args.warmup_steps,
        coefficients=coefficients,
        max_consecutive_skips=max_streak,
        forced_skips=args.forced_skips,
        conditions=(*CONDITIONS, *(f"{GATED_PREFIX}{gate}" for gate in also)),
        random_weights=args.random_weights,
        dtype=args.dtype,
        label=label,
    )
    out = Path(args.out or f"bench-{request.variant_id}.json")
    if out.suffix != ".json":
        raise UserError(f"--out must name a .json file, got {out}")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; name a .json file")
    from app.cli.outdir import output_folder

    try:
        # The report's folder is checked before any worker starts; if the bench fails before
        # keeping a single run, a folder it had to create is removed again.
        with output_folder(out.parent, what="folder for the report"):
            outcome = run_bench(
                config, out, progress=not args.quiet, max_chunks=args.max_chunks, fresh=args.fresh
            )
    except PlanMismatchError as exc:
        raise UserError(str(exc)) from None
    except WorkerFailed as exc:
        raise UserError(
            f"{exc} (full log in {chunks_dir(out) / 'logs'}; finished runs are kept — "
            "rerun to resume)",
            exit_code=1,
        ) from None
    except KeyboardInterrupt:
        kept = len(list(chunks_dir(out).glob("rep*.json")))
        return interrupted(f"{kept} finished run(s)", chunks_dir(out))
    if outcome.report is None:
        return stopped_early(outcome.done, outcome.total, "runs", outcome.chunks)
    print(out.with_suffix(".md").read_text(encoding="utf-8"))
    print(f"wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="time vanilla, gate-off and gated runs, each cold in its own process",
        description="Every (condition, repetition) runs in a fresh subprocess, repetitions "
        "interleaved; median, min and max per condition with the skip count, pattern and "
        "longest skip streak next to every time.",
    )
    add_recipe_arguments(p)
    p.add_argument("--threshold", type=float, help="gate threshold (default: the variant's)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per condition (default 3)")
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="discarded warm-up generations inside each worker (default 1)",
    )
    p.add_argument(
        "--warmup-steps",
        type=int,
        metavar="N",
        help="steps of each warm-up generation (default: --steps); a short warm-up still "
        "compiles everything once",
    )
    p.add_argument("--out", help="report path, FILE.json (a FILE.md table is written beside it)")
    p.add_argument(
        "--random-weights",
        choices=("tiny", "full"),
        help="time a weight-less mflux shell with random weights "
        f"({random_weight_families()}): full = the real dimensions, tiny = CPU-sized",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        help="compute precision for --random-weights (default float32)",
    )
    p.add_argument(
        "--forced-skips",
        type=int,
        metavar="N",
        help="timing only: skip N steps after every computed one, whatever the weights",
    )
    p.add_argument(
        "--also-gate",
        action="append",
        choices=tuple(GATE_KINDS),
        metavar="GATE",
        help="time another gate on the same request as one more condition, gated-GATE "
        "(repeatable; with --forced-skips, its own forced pattern)",
    )
    p.add_argument("--label", help="a note printed with the results")
    p.add_argument("--fresh", action="store_true", help="discard kept runs and start over")
    p.add_argument(
        "--max-chunks",
        type=int,
        metavar="N",
        help="stop after N new runs (resumable; for long benchmarks in slices)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--readme-table",
        action="store_true",
        help="print the README performance table rendered from resources/benchmarks",
    )
    p.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    p.set_defaults(handler=_bench)
