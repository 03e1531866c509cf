"""``teacache-studio calibrate``: fit the gate polynomial on your own vanilla runs."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.chunked import interrupted, stopped_early
from app.cli.errors import UserError
from app.cli.generate import parse_size_arg
from app.gate.kinds import (
    DEFAULT_GATE,
    CalibrationMethod,
    calibrated_gates,
    gate_kind,
    magcache_from_document,
)
from app.variants.catalog import QUANTIZE_LEVELS, Variant

if TYPE_CHECKING:
    from app.bench.calibrate import CalibrateConfig


def _calibrate(args: argparse.Namespace) -> int:
    from app.bench.calibrate import CalibrateConfig, capture_pairs, default_prompts, read_prompts
    from app.bench.chunks import PlanMismatchError
    from app.engine.request import RequestError, make_request
    from app.variants import UnknownVariantError, get_variant
    from app.variants.user import (
        calibration_path,
        split_user_variant_id,
        user_variant_id,
        validate_name,
    )

    if not args.variant:
        raise UserError("--variant is required (see `teacache-studio variants`)")
    try:
        variant = get_variant(args.variant)
    except UnknownVariantError as exc:
        raise UserError(str(exc)) from None
    parts = split_user_variant_id(variant.id)
    base = get_variant(parts[0]) if parts else variant  # recalibrate a user variant's base
    name = args.name or f"cal-{dt.date.today():%Y%m%d}"
    try:
        validate_name(name)
    except ValueError as exc:
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
        if len(prompts) < 2:
            raise UserError(f"{args.prompts} must hold at least 2 prompts, one per line")
    else:
        prompts = default_prompts(base.id)
    if len(set(prompts)) != len(prompts):
        raise UserError("the prompt list holds a prompt twice")
    try:  # validates steps, size, seed and every prompt (the demo checks its vocabulary later)
        request = make_request(
            base.id,
            prompts[0],
            seed=args.seed,
            steps=args.steps,
            threshold=0.0,
            size=args.size,
            guidance=args.guidance,
            quantize=args.quantize,
        )
    except RequestError as exc:
        raise UserError(str(exc)) from None
    _check_demo_prompts(base, prompts)
    config = CalibrateConfig(request, name, prompts, holdout=args.holdout, mode=args.mode)
    variant_id = user_variant_id(base.id, name)
    chunks_dir = calibration_path(variant_id).with_suffix(".chunks")
    from app.cli.outdir import output_folder

    try:
        # The calibrations folder (where the chunks and the result go) is checked before the
        # first vanilla run; one it had to create is removed again if nothing was kept.
        with output_folder(chunks_dir.parent, what="calibrations folder"):
            chunks, done = capture_pairs(
                config,
                chunks_dir,
                progress=not args.quiet,
                max_chunks=args.max_chunks,
                fresh=args.fresh,
            )
    except PlanMismatchError as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        return interrupted("finished prompts", chunks_dir)
    if chunks is None:
        return stopped_early(done, len(prompts), "prompts", chunks_dir)
    from app.hardware import runtime_info

    method = gate_kind(args.gate).calibration_method
    if method is None:
        raise UserError(f"the {args.gate} gate needs no calibration")
    return _WRITERS[method](args, config, base, chunks, variant_id, runtime_info())


def _write_polynomial(
    args: argparse.Namespace,
    config: CalibrateConfig,
    base: Any,
    chunks: list[dict[str, Any]],
    variant_id: str,
    versions: dict[str, str],
) -> int:
    from app.bench.calibrate import calibration_document, fit_report
    from app.variants.user import save_calibration

    try:
        report = fit_report(chunks, config.holdout, config.mode)
    except ValueError as exc:
        raise UserError(str(exc)) from None

    threshold = args.threshold if args.threshold is not None else base.default_threshold
    document = calibration_document(config, chunks, report, threshold, versions)
    path = save_calibration(document)
    print(fit_summary(config, report, document))
    print(f"\nwrote {path}\nselect it with --variant {variant_id} (or in the app's variant list)")
    return 0


def _write_ratio_table(
    args: argparse.Namespace,
    config: CalibrateConfig,
    base: Any,
    chunks: list[dict[str, Any]],
    variant_id: str,
    versions: dict[str, str],
) -> int:
    from app.bench.calibrate import magcache_document
    from app.variants.user import save_calibration

    threshold = args.threshold
    if threshold is None:
        threshold = base.default_threshold_for(args.gate)
    try:
        document = magcache_document(
            config,
            chunks,
            None if base.coefficients is None else tuple(base.coefficients),
            base.calibrated_range,
            base.default_threshold,
            threshold,
            versions,
            retention_ratio=args.retention_ratio,
            max_consecutive_skips=args.max_skips,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    path = save_calibration(document)
    table = magcache_from_document(document)
    assert table is not None  # magcache_document writes its section
    ratios, spread = table.ratios, table.provenance.fit_value or 0.0
    print(
        f"{config.request.variant_id}: MagCache table from {len(chunks)} prompts × "
        f"{config.request.steps} steps "
        f"(ratios {min(ratios[1:]):.4f}–{max(ratios[1:]):.4f}; largest spread across prompts "
        f"{spread:.4f})"
    )
    if threshold is None:
        print("no default MagCache threshold stored: pass --threshold when generating")
    print(
        f"\nwrote {path}\nselect it with --variant {variant_id} --gate {args.gate} "
        "(or in the app's variant list)"
    )
    return 0


def _write_probe_trace(
    args: argparse.Namespace,
    config: CalibrateConfig,
    base: Any,
    chunks: list[dict[str, Any]],
    variant_id: str,
    versions: dict[str, str],
) -> int:
    """The first-block probe needs no fit: the vanilla runs' first-block changes give its
    simulated skips on this model, and the default threshold is recorded with them."""
    from app.bench.calibrate import probe_document
    from app.variants.user import save_calibration

    threshold = args.threshold
    if threshold is None:
        threshold = base.default_threshold_for(args.gate)
    try:
        document = probe_document(config, chunks, base, threshold, versions)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    path = save_calibration(document)
    steps = config.request.steps
    print(
        f"{config.request.variant_id}: the first block's change on {len(chunks)} prompts × "
        f"{steps} steps; {document[args.gate]['provenance']['notes']}"
    )
    print("\n| Threshold | Skipped, median (min–max) |\n|---|---|")
    for row in document["skip_curve"]:
        mark = " (default)" if row["threshold"] == threshold else ""
        print(
            f"| {row['threshold']:g}{mark} | {row['median_skipped']:g} of {steps} "
            f"({row['min_skipped']}–{row['max_skipped']}) |"
        )
    print(
        f"\nwrote {path}\nselect it with --variant {variant_id} --gate {args.gate} "
        "(or in the app's variant list)"
    )
    return 0


# How each calibration method is measured and saved (``GateKind.calibration_method``).
_WRITERS = {
    CalibrationMethod.polynomial: _write_polynomial,
    CalibrationMethod.ratio_table: _write_ratio_table,
    CalibrationMethod.probe_trace: _write_probe_trace,
}


def _check_demo_prompts(variant: Variant, prompts: tuple[str, ...]) -> None:
    """The embedded demo draws only its own vocabulary: each prompt must parse."""
    if not variant.embedded:
        return
    from app.demo.prompt import PromptError, parse_prompt

    for prompt in prompts:
        try:
            parse_prompt(prompt)
        except PromptError as exc:
            raise UserError(f"prompt {prompt!r}: {exc}") from None


def fit_summary(config: CalibrateConfig, report: dict[str, Any], document: dict[str, Any]) -> str:
    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:.4f}"

    r = config.request
    lines = [
        f"{r.variant_id}: {report['fit_pairs']} pairs from {len(config.prompts)} prompts "
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
        help="fit the gate polynomial on vanilla runs and save it as a user variant",
        description="Capture (signal rel-L1, output rel-L1) pairs from vanilla runs, fit degree 4 "
        "free and through the origin, report R² and held-out R² (split by prompt), and save the "
        "chosen fit as the variant <variant>+<name>.",
    )
    p.add_argument("--variant", help="variant id to calibrate (see `teacache-studio variants`)")
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
        "--threshold", type=float, help="default threshold stored with it (default: the variant's)"
    )
    p.add_argument(
        "--gate",
        choices=calibrated_gates(),
        default=DEFAULT_GATE,
        help="teacache: fit the polynomial (default); magcache: measure the per-step magnitude "
        "ratio table; firstblock: measure the first block's change and record the probe's "
        "default threshold with the skips it gives on these prompts",
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
