"""``teacache-studio generate``: vanilla and gated in one process, images and a JSON report."""

from __future__ import annotations

import argparse
import math
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.errors import UserError

if TYPE_CHECKING:
    from app.engine.report import RunReport
    from app.engine.request import GenerationRequest


def parse_size(text: str) -> tuple[int, int]:
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise UserError(f"size must look like WIDTHxHEIGHT (for example 512x512), got {text!r}")
    return int(parts[0]), int(parts[1])


def add_request_arguments(p: argparse.ArgumentParser, *, threshold: bool = True) -> None:
    p.add_argument("--variant", required=True, help="variant id (see `teacache-studio variants`)")
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
    p.add_argument("--quantize", type=int, choices=(3, 4, 5, 6, 8), help="quantize real models")
    add_gate_argument(p)


def add_gate_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gate",
        choices=("teacache", "magcache"),
        default="teacache",
        help="which step-skipping rule decides (default teacache); the threshold means: "
        "teacache — predicted output change to let pile up; magcache — accumulated magnitude "
        "drift to tolerate",
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
        "gate": getattr(args, "gate", "teacache"),
    }
    values.update(overrides)
    try:
        return make_request(args.variant, args.prompt, **values)  # type: ignore[arg-type]
    except RequestError as exc:
        raise UserError(str(exc)) from None


def run_headless(request: GenerationRequest, *, progress: bool = True) -> RunReport:
    """Run one request on this thread through the real engine; raise UserError on failure."""
    from app.blas import preload_openblas

    preload_openblas()
    from app.engine import events as ev
    from app.engine.engine import Engine

    finished: list[RunReport] = []
    errors: list[str] = []

    def emit(event: object) -> None:
        if isinstance(event, ev.RunWarning) and progress:
            print(f"warning: {event.message}", file=sys.stderr)
        elif isinstance(event, ev.LoadProgress) and progress:
            print(event.message, file=sys.stderr)
        elif isinstance(event, ev.PassStarted) and progress:
            note = " (cached)" if event.cached else ""
            print(f"{event.which.value} pass: {event.num_steps} steps{note}", file=sys.stderr)
        elif isinstance(event, ev.RunFinished):
            finished.append(event.report)
        elif isinstance(event, ev.RunFailed):
            errors.append(event.message)
        elif isinstance(event, ev.RunCancelled):
            errors.append("cancelled")

    engine = Engine()
    try:
        engine.run(1, request, emit, threading.Event())
    finally:
        engine.close()
    if errors or not finished:
        raise UserError(errors[0] if errors else "the engine reported no result", exit_code=1)
    return finished[0]


def _generate(args: argparse.Namespace) -> int:
    from PIL import Image

    request = request_from_args(args, compare_vanilla=True, resume=args.resume)
    from app.cli.outdir import output_folder
    from app.storage.jsonio import write_json_atomic

    out = Path(args.out)
    with output_folder(out) as folder:  # checked before the model loads; removed if we fail
        report = run_headless(request)
        try:
            Image.fromarray(report.gated.image).save(folder.track("gated.png"))
            if report.vanilla is not None:
                Image.fromarray(report.vanilla.image).save(folder.track("vanilla.png"))
            write_json_atomic(folder.track("report.json"), report.to_json())
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
    print(
        f"{request.variant_id}: skipped {report.gated.skipped} of {request.steps} steps "
        f"({report.gated.pattern}), SSIM {ssim}, vanilla {vanilla_seconds:.2f} s, "
        f"gated {report.gated.loop_seconds:.2f} s{speedup} → {out}"
    )
    return 0


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
    p.set_defaults(handler=_generate)
