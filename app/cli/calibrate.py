"""``teacache-studio calibrate``: measure a model's gate calibrations on your own vanilla runs
(TeaCache's polynomial, MagCache's ratio table), choose their default thresholds on the same
prompts (``app.engine.threshold_rule``), and save them as the variant ``<variant>+<name>``.

The same ``Calibrate`` job as the window's Calibrate This Model… (``app.engine.calibration``, run
by ``app.bench.calibrate`` with resumable chunks); every refusal is one line."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.chunked import interrupted, stopped_early
from app.cli.errors import UserError
from app.cli.generate import add_lora_argument, lora_args, parse_size_arg
from app.engine.threshold_rule import RULE_WORDS
from app.gate.kinds import (
    DEFAULT_GATE,
    GATE_KINDS,
    calibrated_gates,
    gate_kind,
    magcache_from_document,
)
from app.variants.catalog import QUANTIZE_LEVELS

if TYPE_CHECKING:
    from app.engine.calibration import Calibrate, CalibrationResult


def _job(args: argparse.Namespace) -> Calibrate:
    """The command's job, checked (every refusal a ``UserError`` line) before any work."""
    from app.engine.calibration import (
        Calibrate,
        CalibrationError,
        check_calibration,
        default_prompts,
        read_prompts,
    )
    from app.engine.request import RequestError, make_request
    from app.variants import UnknownVariantError, get_variant
    from app.variants.user import CalibrationExistsError, calibration_base, clash_message

    if not args.variant:
        raise UserError("--variant is required (see `teacache-studio variants`)")
    try:
        variant = get_variant(args.variant)
        base = get_variant(calibration_base(variant.id))  # recalibrate a user variant's base
    except UnknownVariantError as exc:
        raise UserError(str(exc)) from None
    if not (0.0 <= args.holdout < 1.0) or not math.isfinite(args.holdout):
        raise UserError(f"--holdout must be in [0, 1), got {args.holdout}")
    if not (0.0 <= args.retention_ratio < 1.0):
        raise UserError(f"--retention-ratio must be in [0, 1), got {args.retention_ratio}")
    if args.max_skips < 1:
        raise UserError(f"--max-skips must be at least 1, got {args.max_skips}")
    if args.threshold is not None and not (0.0 <= args.threshold <= 1.0):
        raise UserError(f"--threshold must be between 0 and 1, got {args.threshold}")
    if args.prompts:
        try:
            prompts = read_prompts(Path(args.prompts))
        except OSError as exc:
            raise UserError(
                f"cannot read the prompts file {args.prompts}: {exc.strerror}"
            ) from None
    else:
        prompts = default_prompts(base)
    gates = (args.gate,) if args.gate else calibrated_gates()
    try:  # validates steps, size, seed, guidance, quantization, LoRAs and the first prompt
        request = make_request(
            base.id,
            prompts[0] if prompts else "a red circle",
            seed=args.seed,
            steps=args.steps,
            threshold=0.0,
            size=args.size,
            guidance=args.guidance,
            quantize=args.quantize,
            loras=lora_args(args),
        )
    except RequestError as exc:
        raise UserError(str(exc)) from None
    job = Calibrate(
        request,
        args.name or dt.date.today().strftime("cal-%Y%m%d"),
        prompts,
        gates=gates,
        holdout=args.holdout,
        mode=args.mode,
        thresholds=() if args.threshold is None else ((args.gate or DEFAULT_GATE, args.threshold),),
        retention_ratio=args.retention_ratio,
        max_consecutive_skips=args.max_skips,
        replace_existing=args.replace,
    )
    try:
        check_calibration(job)
    except CalibrationExistsError:
        advice = "choose another --name, or pass --replace to refit it"
        raise UserError(clash_message(base.id, job.name, advice)) from None
    except CalibrationError as exc:
        raise UserError(str(exc)) from None
    return job


def _calibrate(args: argparse.Namespace) -> int:
    from app.bench.calibrate import run_calibration
    from app.bench.chunks import PlanMismatchError
    from app.cli.outdir import output_folder
    from app.variants.user import calibration_path

    job = _job(args)
    chunks_dir = calibration_path(job.variant_id).with_suffix(".chunks")
    try:
        # The calibrations folder (where the chunks and the result go) is checked before the
        # first vanilla run; one it had to create is removed again if nothing was kept.
        with output_folder(chunks_dir.parent, what="calibrations folder"):
            run = run_calibration(
                job,
                chunks_dir,
                progress=not args.quiet,
                max_chunks=args.max_chunks,
                fresh=args.fresh,
            )
    except PlanMismatchError as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        return interrupted("finished prompts", chunks_dir)
    if run.failure is not None:
        raise UserError(run.failure, exit_code=1)
    if run.result is None:
        return stopped_early(run.done, run.total, "prompts", chunks_dir)
    print(result_summary(run.result))
    only = job.gates[0] if len(job.gates) == 1 else None
    gate = f" --gate {only}" if only else ""
    print(
        f"\nwrote {run.result.path}\nselect it with --variant {job.variant_id}{gate} (or in "
        "the app's variant list)"
    )
    return 0


def result_summary(result: CalibrationResult) -> str:
    """What was measured: the fit table (TeaCache) and the table's range (MagCache)."""
    parts = []
    if result.fit is not None:
        parts.append(fit_summary(result))
    table = magcache_from_document(result.document)
    if table is not None and result.magcache_spread is not None:
        r = result.job.request
        ratios = table.ratios
        line = (
            f"{r.variant_id}: MagCache table from {len(result.captures)} prompts × {r.steps} "
            f"steps (ratios {min(ratios[1:]):.4f}–{max(ratios[1:]):.4f}; largest spread across "
            f"prompts {result.magcache_spread:.4f})"
        )
        parts.append(line)
    if result.choices:
        parts.append("\n".join(threshold_lines(result)))
    return "\n\n".join(parts)


def threshold_lines(result: CalibrationResult) -> list[str]:
    """Each calibrated gate's default threshold and where it comes from (the job's choice)."""
    lines = []
    for choice in result.choices:
        line = f"{gate_kind(choice.gate).label} default threshold: {choice.reason}"
        if choice.threshold is None:
            line += " (pass --threshold when generating)"
        lines.append(line)
    return lines


def fit_summary(result: CalibrationResult) -> str:
    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:.4f}"

    report: dict[str, Any] = result.fit or {}
    document = result.document
    r = result.job.request
    lines = [
        f"{r.variant_id}: {report['fit_pairs']} pairs from {len(result.job.prompts)} prompts "
        f"({r.steps} steps, {r.width}×{r.height}); held-out R² refits without "
        f"the last {len(report['heldout_prompts'])} prompts ({report['heldout_pairs']} pairs)",
        f"signal rel-L1 range {document['x_range'][0]:.4f}–{document['x_range'][1]:.4f}, "
        f"output rel-L1 range {document['y_range'][0]:.4f}–{document['y_range'][1]:.4f}",
        "",
        "| Fit | Coefficients (c4 … c0) | R² | Held-out R² |",
        "|---|---|---|---|",
    ]
    for name, fit in report["fits"].items():
        mark = " (chosen)" if name == report["chosen"] else ""
        coefficients = ", ".join(f"{c:.6g}" for c in fit["coefficients"])
        lines.append(
            f"| {name}{mark} | {coefficients} | {fmt(fit['r2'])} | {fmt(fit['heldout_r2'])} |"
        )
    return "\n".join(lines)


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure a model's gate calibrations on vanilla runs and save them as a user variant",
        description="Run vanilla passes of your prompts, fit TeaCache's degree-4 polynomial (free "
        "and through the origin; R² and held-out R², split by prompt) and measure MagCache's "
        "per-step ratio table, choose each one's default threshold on your prompts (gated "
        "passes resumed from the vanilla runs, by the rule that chose the shipped defaults), "
        "and save them as the variant <variant>+<name> (the window's "
        "Calibrate This Model… runs the same job). The model folder, quantization and LoRA set "
        "are recorded with it.",
    )
    p.add_argument(
        "--variant",
        help="variant id to calibrate, a model folder's included (see `teacache-studio variants`)",
    )
    p.add_argument(
        "--prompts",
        metavar="FILE",
        help="prompts, one per line (default: a fixed list of 10 for the variant)",
    )
    p.add_argument("--steps", type=int, help="denoising steps (default: the variant's)")
    p.add_argument("--size", type=parse_size_arg, help="WIDTHxHEIGHT (default: the variant's)")
    p.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    p.add_argument("--guidance", type=float, help="guidance scale where the family has one")
    p.add_argument("--quantize", type=int, choices=QUANTIZE_LEVELS, help="quantize real models")
    add_lora_argument(p)
    p.add_argument(
        "--holdout",
        type=float,
        default=0.3,
        help="share of prompts held out for held-out R² (default 0.3)",
    )
    p.add_argument(
        "--mode",
        choices=("free", "origin", "both"),
        default="both",
        help="fit free, through the origin, or both and keep the better (default)",
    )
    p.add_argument("--name", help="calibration name: the variant becomes <variant>+<name>")
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace a calibration of that name (its captured prompts are refitted, not rerun)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        help="default threshold stored for the --gate named, TeaCache's without --gate "
        "(default: chosen on the prompts by the rule that chose the shipped defaults — "
        + RULE_WORDS.replace("%", "%%")
        + " — from gated passes resumed from the vanilla runs; none for a step-distilled "
        "model)",
    )
    p.add_argument(
        "--gate",
        choices=tuple(GATE_KINDS),  # a kind that needs no calibration is refused with one line why
        help="calibrate one gate only: "
        + "; ".join(f"{name}: {gate_kind(name).calibration_method}" for name in calibrated_gates())
        + " (default: every gate that has a calibration, from the same vanilla runs; "
        + ", ".join(gate_kind(name).label for name in GATE_KINDS if name not in calibrated_gates())
        + " needs none)",
    )
    p.add_argument(
        "--retention-ratio",
        type=float,
        default=0.2,
        help="MagCache: share of early steps that always compute (default 0.2)",
    )
    p.add_argument(
        "--max-skips",
        type=int,
        default=2,
        help="MagCache: most steps reused in a row, K (default 2)",
    )
    p.add_argument("--fresh", action="store_true", help="discard captured prompts and start over")
    p.add_argument(
        "--max-chunks", type=int, metavar="N", help="stop after N new prompts (resumable)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_calibrate)
