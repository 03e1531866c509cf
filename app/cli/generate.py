"""``teacache-studio generate``: vanilla and gated in one process, images and a JSON report."""

from __future__ import annotations

import argparse
import math
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.errors import UserError
from app.cli.model_path import add_model_path_argument, resolve_model_path
from app.gate.fill import DEFAULT_FILL, FILLS, get_fill
from app.gate.kinds import DEFAULT_GATE, GATE_KINDS, UNCALIBRATED_GATE
from app.variants.catalog import QUANTIZE_LEVELS

if TYPE_CHECKING:
    import numpy as np

    from app.cli.outdir import OutputFolder
    from app.engine.jobs import Generate
    from app.engine.report import RunReport, TargetProbe
    from app.engine.request import GenerationRequest, QualityTarget
    from app.engine.target import QualitySearch


def parse_size(text: str) -> tuple[int, int]:
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise UserError(f"size must look like WIDTHxHEIGHT (for example 512x512), got {text!r}")
    return int(parts[0]), int(parts[1])


def add_request_arguments(p: argparse.ArgumentParser, *, threshold: bool = True) -> None:
    p.add_argument("--variant", help="variant id (see `teacache-studio variants`)")
    p.add_argument("--prompt", required=True, help="what to draw")
    p.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
    p.add_argument("--steps", type=int, help="denoising steps (default: the variant's)")
    if threshold:
        p.add_argument(
            "--threshold",
            type=float,
            help="gate threshold in [0, 1]; 0 turns skipping off (default: the variant's)",
        )
    p.add_argument("--size", type=parse_size_arg, help="WIDTHxHEIGHT (default: the variant's)")
    p.add_argument("--guidance", type=float, help="guidance scale where the family has one")
    p.add_argument("--quantize", type=int, choices=QUANTIZE_LEVELS, help="quantize real models")
    add_model_path_argument(p)
    add_lora_argument(p)
    add_gate_argument(p)
    add_image_arguments(p)


def add_image_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="start from this picture (image-to-image) where the family has mflux's path; both "
        "passes start from it, and the size follows it unless --size is given",
    )
    p.add_argument(
        "--strength",
        type=float,
        metavar="S",
        help="with --image: how far the result may move from the picture, 0 < S ≤ 1 (the share "
        f"of the steps that run; default {_default_strength():g})",
    )


def add_lora_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lora",
        nargs=2,
        action="append",
        metavar=("FILE", "SCALE"),
        help="a LoRA .safetensors file and its scale (repeatable); both passes use it",
    )


def lora_args(args: argparse.Namespace) -> list[tuple[str, float]]:
    """``--lora FILE SCALE`` pairs, the scale read as a number (one sentence where it is not)."""
    pairs: list[tuple[str, float]] = []
    for path, scale in getattr(args, "lora", None) or []:
        try:
            pairs.append((path, float(scale)))
        except ValueError:
            raise UserError(f"the LoRA scale must be a number, got {scale!r} for {path}") from None
    return pairs


def add_gate_argument(p: argparse.ArgumentParser) -> None:
    meanings = "; ".join(f"{name} — {kind.threshold_words}" for name, kind in GATE_KINDS.items())
    p.add_argument(
        "--gate",
        choices=tuple(GATE_KINDS),
        default=None,
        help=f"which step-skipping rule decides (default {DEFAULT_GATE} where it is calibrated for "
        f"the model, else {UNCALIBRATED_GATE}: a variant without {DEFAULT_GATE} numbers, a model "
        "folder, LoRAs); the threshold means: " + meanings.replace("%", "%%"),
    )
    add_fill_argument(p)


def add_fill_argument(p: argparse.ArgumentParser) -> None:
    words = "; ".join(f"{name} — {fill.describe()}" for name, fill in FILLS.items())
    p.add_argument(
        "--fill",
        choices=tuple(FILLS),
        default=DEFAULT_FILL,
        help=f"what a skipped step adds, whichever gate skips it (default {DEFAULT_FILL}): "
        + words.replace("%", "%%"),
    )


def parse_size_arg(text: str) -> tuple[int, int]:
    try:
        return parse_size(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def request_from_args(args: argparse.Namespace, **overrides: object) -> GenerationRequest:
    from app.engine.request import RequestError, make_request

    values = {
        "seed": args.seed,
        "steps": args.steps,
        "threshold": getattr(args, "threshold", None),
        "size": args.size,
        "guidance": args.guidance,
        "quantize": args.quantize,
        "loras": lora_args(args),
        "gate": getattr(args, "gate", None),  # None: the variant's default for this model
        "fill": getattr(args, "fill", DEFAULT_FILL),
        "images": getattr(args, "image", None) or (),
        "strength": getattr(args, "strength", None),
    }
    values.update(overrides)
    variant_id, values["model_path"] = resolve_model_path(args.variant, args.model_path)
    try:
        return make_request(variant_id, args.prompt, **values)  # type: ignore[arg-type]
    except RequestError as exc:
        raise UserError(str(exc)) from None


def run_headless(
    job: Generate | QualitySearch,
    *,
    progress: bool = True,
    previews: dict[str, dict[int, np.ndarray]] | None = None,
) -> RunReport:
    """Run one job (a Generate or a target search) on this thread through the real engine;
    raise UserError on failure. ``previews`` (where the request asks for them) receives each
    reported pass's step thumbnails by index (``app.cli.previews``)."""
    from app.blas import preload_openblas

    preload_openblas()
    from app.cli.previews import PreviewCollector
    from app.engine import events as ev
    from app.engine.engine import Engine
    from app.engine.jobs import run_job

    collector = PreviewCollector()
    errors: list[str] = []

    def emit(event: object) -> None:
        if previews is not None:
            collector.on_event(event)
        if isinstance(event, ev.RunWarning) and progress:
            print(f"warning: {event.message}", file=sys.stderr)
        elif isinstance(event, ev.LoadProgress) and progress:
            print(event.message, file=sys.stderr)
        elif isinstance(event, ev.PassStarted) and progress:
            note = " (cached)" if event.cached else ""
            print(f"{event.which.value} pass: {event.num_steps} steps{note}", file=sys.stderr)
        elif isinstance(event, ev.TargetProbed) and progress:
            print(
                f"target search {event.index + 1}/{event.max_passes}: " + probe_line(event.probe),
                file=sys.stderr,
            )
        elif isinstance(event, ev.RunFailed):
            errors.append(event.message)
        elif isinstance(event, ev.RunCancelled):
            errors.append("cancelled")

    engine = Engine()
    try:
        report = run_job(engine, 1, job, emit, threading.Event())
    finally:
        engine.close()
    if errors or report is None:
        raise UserError(errors[0] if errors else "the engine reported no result", exit_code=1)
    if previews is not None:  # with a target search: the chosen threshold's pass only
        previews.update(collector.chosen(report))
    return report


def probe_line(probe: TargetProbe) -> str:
    ssim = "—" if probe.ssim is None else f"{probe.ssim:.4f}"
    if probe.ssimulacra2 is not None:
        ssim += f", SSIMULACRA2 {probe.ssimulacra2:.1f}"
    local = "—" if probe.local_diff is None else f"{probe.local_diff:.3f}"
    verdict = "meets" if probe.met else "misses"
    return (
        f"threshold {probe.threshold:g}: skipped {probe.skipped}, SSIM {ssim}, "
        f"local difference {local} ({verdict} the target)"
    )


def target_from_args(args: argparse.Namespace) -> QualityTarget | None:
    """``--target-ssim`` and/or ``--target-ssimulacra2`` (with ``--max-local-diff``) as a
    validated target, or None."""
    from app.engine.request import DEFAULT_MAX_LOCAL_DIFF, RequestError, make_target

    perceptual = getattr(args, "target_ssimulacra2", None)
    if args.target_ssim is None and perceptual is None:
        if args.max_local_diff is not None:
            raise UserError("--max-local-diff bounds a target run: give --target-ssim too")
        return None
    if args.threshold is not None:
        flag = "--target-ssim" if args.target_ssim is not None else "--target-ssimulacra2"
        raise UserError(
            f"give either --threshold or {flag}, not both: the target search picks the threshold"
        )
    bound = DEFAULT_MAX_LOCAL_DIFF if args.max_local_diff is None else args.max_local_diff
    try:
        return make_target(args.target_ssim, bound, perceptual)
    except RequestError as exc:
        raise UserError(str(exc)) from None


def _generate(args: argparse.Namespace) -> int:
    from app.engine.jobs import Generate
    from app.engine.target import QualitySearch

    target = target_from_args(args)
    request = request_from_args(
        args, compare_vanilla=True, resume=args.resume, previews=args.previews
    )
    # With a target: search from the variant's default threshold for it.
    job = Generate(request) if target is None else QualitySearch(request, target)
    from app.cli.outdir import output_folder
    from app.fileio.jsonio import write_json_atomic
    from app.gate.kinds import gate_kind
    from app.storage.export import report_metadata, write_png

    out = Path(args.out)
    with output_folder(out) as folder:  # checked before the model loads; removed if we fail
        thumbnails: dict[str, dict[int, np.ndarray]] = {}
        report = run_headless(job, previews=thumbnails)
        try:
            # Each PNG carries the run's figures, as mflux's own outputs carry theirs.
            metadata = report_metadata(report)
            gated = {**metadata, "image": gate_kind(report.request.gate).label}
            write_png(folder.track("gated.png"), report.gated.image, gated)
            if report.vanilla is not None:
                vanilla = {**metadata, "image": "Vanilla"}
                write_png(folder.track("vanilla.png"), report.vanilla.image, vanilla)
            document = report.to_json()
            if request.previews:
                document["previews"] = write_previews(folder, thumbnails)
            write_json_atomic(folder.track("report.json"), document)
        except OSError as exc:  # the disk filled up, the folder went away: one line, exit 1
            raise UserError(
                f"cannot write the results into {out}: {exc.strerror or exc}", exit_code=1
            ) from None
    ssim = "—" if report.ssim is None or not math.isfinite(report.ssim) else f"{report.ssim:.4f}"
    vanilla_seconds = report.vanilla.loop_seconds if report.vanilla is not None else 0.0
    speedup = (
        f", speedup {report.speedup:.2f}× ({report.speedup_label})"
        if report.speedup is not None
        else ""
    )
    loras = "".join(f" + LoRA {lora.label()}" for lora in request.loras)
    local = f", local difference {report.local_diff.value:.3f}" if report.local_diff else ""
    if report.ssimulacra2 is not None:
        ssim += f", SSIMULACRA2 {report.ssimulacra2:.1f}"
    if report.target_search is not None:
        print(report.target_search.note)
    fill = get_fill(request.fill).choice
    left_out = request.steps_left_out
    start = (
        f" (from {request.images[0].name} at strength {request.strength:g}: the first "
        f"{left_out} never run)"
        if left_out
        else ""
    )
    print(
        f"{request.variant_id}{loras}: threshold {report.request.threshold:g}, skipped "
        f"{report.gated.skipped} of {request.active_steps} steps{start} "
        f"({report.gated.pattern}; on a skipped step: {fill}), SSIM {ssim}"
        f"{local}, vanilla {vanilla_seconds:.2f} s, gated {report.gated.loop_seconds:.2f} s"
        f"{speedup} → {out}"
    )
    return 0


PREVIEWS_FOLDER = "previews"


def write_previews(
    folder: OutputFolder, thumbnails: dict[str, dict[int, np.ndarray]]
) -> dict[str, list[str]]:
    """``previews/<pass>-NN.png`` per step (NN: the step index, at least two digits); returns
    the report's listing: each pass's files, relative to the output folder, in step order."""
    from PIL import Image

    target = folder.subfolder(PREVIEWS_FOLDER)
    listing: dict[str, list[str]] = {}
    for which in ("vanilla", "gated"):
        names = []
        for index, image in sorted(thumbnails.get(which, {}).items()):
            name = f"{which}-{index:02d}.png"
            Image.fromarray(image).save(folder.track(f"{PREVIEWS_FOLDER}/{name}"))
            names.append(f"{target.name}/{name}")
        listing[which] = names
    return listing


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate one image, vanilla and gated, with a report")
    add_request_arguments(p)
    p.add_argument("--out", required=True, help="folder for gated.png, vanilla.png, report.json")
    p.add_argument(
        "--resume",
        action="store_true",
        help="resume the gated pass from the vanilla trajectory (faster; the gated "
        "time then includes vanilla's time for the replayed steps)",
    )
    p.add_argument(
        "--previews",
        action="store_true",
        help="also write each step's preview to OUT/previews/vanilla-NN.png and gated-NN.png "
        "(NN: step index) and list them in report.json",
    )
    p.add_argument(
        "--target-ssim",
        type=float,
        metavar="S",
        help="instead of --threshold: find the threshold with the most skips whose SSIM against "
        "vanilla is at least S (0 < S ≤ 1; the window's default is 0.97)",
    )
    p.add_argument(
        "--target-ssimulacra2",
        type=float,
        metavar="Q",
        help="instead of --threshold (or beside --target-ssim): find the threshold with the most "
        "skips whose SSIMULACRA2 against vanilla is at least Q (up to 100; 90: no visible "
        "difference, 70: hard to notice side by side)",
    )
    p.add_argument(
        "--max-local-diff",
        type=float,
        metavar="D",
        help="with --target-ssim: the largest accepted local difference, 0–1 (the worst "
        "16 × 16 window's mean difference on the demo; default "
        f"{_default_local_bound():g})",
    )
    p.set_defaults(handler=_generate)


def _default_strength() -> float:
    from app.engine.request import DEFAULT_STRENGTH

    return DEFAULT_STRENGTH


def _default_local_bound() -> float:
    from app.engine.request import DEFAULT_MAX_LOCAL_DIFF

    return DEFAULT_MAX_LOCAL_DIFF
