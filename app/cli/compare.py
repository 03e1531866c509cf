"""``teacache-studio compare``: one vanilla pass and a resumed gated pass per threshold.

Writes ``vanilla.png``, ``t-<threshold>.png`` per threshold and ``compare.json`` (per threshold:
skips, pattern, SSIM, times, speedup with its label, the full report; and the hardware). Ctrl+C
stops after the current step and keeps the thresholds that finished (exit 130).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.errors import UserError
from app.cli.generate import add_request_arguments, request_from_args

if TYPE_CHECKING:
    from app.engine.comparison import ComparisonResult, ThresholdComparison


def _compare(args: argparse.Namespace) -> int:
    from app.engine.comparison import ThresholdComparison, default_thresholds, parse_thresholds
    from app.engine.request import RequestError

    base = request_from_args(args, compare_vanilla=True)
    try:
        thresholds = (
            parse_thresholds(args.thresholds)
            if args.thresholds
            else default_thresholds(
                base.variant, base.active_steps, around=base.threshold, gate=base.gate
            )
        )
        comparison = ThresholdComparison(base, thresholds)
    except RequestError as exc:
        raise UserError(str(exc)) from None

    from app.cli.outdir import output_folder

    out = Path(args.out)
    with output_folder(out) as folder:  # checked before the model loads; removed if we fail
        result, interrupted = _run(comparison)
        try:
            _write(folder, result)
        except OSError as exc:
            raise UserError(
                f"cannot write the results into {out}: {exc.strerror or exc}", exit_code=1
            ) from None
    for report in result.reports:
        speedup = (
            f", {report.speedup:.2f}× ({report.speedup_label})"
            if report.speedup is not None
            else ""
        )
        ssim = "—" if report.ssim is None else f"{report.ssim:.4f}"
        if report.ssimulacra2 is not None:
            ssim += f", SSIMULACRA2 {report.ssimulacra2:.1f}"
        print(
            f"t={report.request.threshold:g}: skipped {report.gated.skipped} of "
            f"{base.active_steps} ({report.gated.pattern}), SSIM {ssim}, "
            f"gated {report.gated.loop_seconds:.2f} s{speedup}"
        )
    done, total = len(result.reports), len(comparison.thresholds)
    stopped = "" if done == total else f" ({done} of {total} thresholds; interrupted)"
    from app.gate.fill import get_fill

    fill = f"on a skipped step: {get_fill(base.fill).choice}"
    print(f"{base.variant_id}: {total} thresholds compared{stopped} ({fill}) → {out}")
    return 130 if interrupted else 0


def _run(comparison: ThresholdComparison) -> tuple[ComparisonResult, bool]:
    from app.blas import preload_openblas

    preload_openblas()
    from app.engine import events as ev
    from app.engine.engine import Engine
    from app.engine.jobs import run_job

    cancel = threading.Event()
    errors: list[str] = []

    def emit(event: object) -> None:
        if isinstance(event, ev.RunWarning):
            print(f"warning: {event.message}", file=sys.stderr)
        elif isinstance(event, ev.LoadProgress):
            print(event.message, file=sys.stderr)
        elif isinstance(event, ev.PassStarted):
            note = " (cached)" if event.cached else ""
            print(f"{event.which.value} pass: {event.num_steps} steps{note}", file=sys.stderr)
        elif isinstance(event, ev.RunFailed):
            errors.append(event.message)

    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())  # stop after this step
    engine = Engine()
    try:
        result = run_job(engine, 1, comparison, emit, cancel)
    finally:
        engine.close()
        signal.signal(signal.SIGINT, previous)
    if result is None:
        if cancel.is_set():
            raise UserError("interrupted before any threshold finished", exit_code=130)
        raise UserError(errors[0] if errors else "the engine reported no result", exit_code=1)
    if result.failure is not None:
        print(f"warning: stopped early: {result.failure}", file=sys.stderr)
    return result, cancel.is_set() and not result.complete


def _write(folder: Any, result: Any) -> None:
    from PIL import Image

    from app.fileio.jsonio import write_json_atomic
    from app.hardware import hardware_label
    from app.storage.comparisons import ComparisonRow, same_skips

    first = result.reports[0]
    if first.vanilla is not None:
        Image.fromarray(first.vanilla.image).save(folder.track("vanilla.png"))
    rows = [ComparisonRow.from_report(r) for r in result.reports]
    same = same_skips(rows)
    entries = []
    for i, (row, report) in enumerate(zip(rows, result.reports, strict=True)):
        name = f"t-{row.threshold:g}.png"
        Image.fromarray(report.gated.image).save(folder.track(name))
        data = row.to_json(name)
        data["same_skips_as"] = same.get(i)
        data["report"] = report.to_json()
        entries.append(data)
    write_json_atomic(
        folder.track("compare.json"),
        {
            "request": result.comparison.base.as_dict(),
            "thresholds": list(result.comparison.thresholds),
            "complete": result.complete,
            "failure": result.failure,
            "hardware": hardware_label(first.versions),
            "entries": entries,
        },
    )


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="compare 4–8 thresholds: one vanilla pass, a resumed gated pass each"
    )
    add_request_arguments(p)
    p.add_argument(
        "--thresholds",
        help="4 to 8 distinct values in [0, 1], e.g. 0.05,0.1,0.2,0.3 "
        "(default: six around --threshold or the variant's default)",
    )
    p.add_argument("--out", required=True, help="folder for the images and compare.json")
    p.set_defaults(handler=_compare)
