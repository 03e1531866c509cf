"""``teacache-studio sweep``: skips, SSIM and speedup per threshold, with a plot and a sheet."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from app.cli.bench import add_recipe_arguments, make_recipe_request
from app.cli.chunked import interrupted, stopped_early
from app.cli.errors import UserError


def parse_thresholds(text: str) -> tuple[float, ...]:
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise UserError(
                f"--thresholds must be numbers separated by commas, got {part!r}"
            ) from None
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise UserError(f"every threshold must be between 0 and 1, got {part}")
        values.append(value)
    if not values:
        raise UserError("--thresholds needs at least one value, for example 0.05,0.1,0.2")
    if len(set(values)) != len(values):
        raise UserError("--thresholds lists a value twice")
    return tuple(sorted(values))


def _sweep(args: argparse.Namespace) -> int:
    if not args.thresholds:
        raise UserError("--thresholds is required, for example --thresholds 0.05,0.1,0.2")
    thresholds = parse_thresholds(args.thresholds)
    if args.reps < 1:
        raise UserError(f"--reps must be at least 1, got {args.reps}")
    if args.max_chunks is not None and args.max_chunks < 0:
        raise UserError(f"--max-chunks must be at least 0, got {args.max_chunks}")
    request = make_recipe_request(args, 0.0)
    from app.bench.chunks import PlanMismatchError
    from app.bench.harness import WorkerFailed
    from app.bench.sweep import SweepConfig, run_sweep

    config = SweepConfig(
        request, thresholds, reps=args.reps, warmup=args.warmup, timing=args.timing
    )
    out = Path(args.out or f"sweep-{request.variant_id}")
    from app.cli.outdir import output_folder

    try:
        # Checked before any run; a folder it had to create goes again if nothing was kept.
        with output_folder(out):
            outcome = run_sweep(
                config, out, progress=not args.quiet, max_chunks=args.max_chunks, fresh=args.fresh
            )
    except PlanMismatchError as exc:
        raise UserError(str(exc)) from None
    except WorkerFailed as exc:
        raise UserError(
            f"{exc} (logs in {out / 'chunks' / 'logs'}; finished runs are kept — rerun to resume)",
            exit_code=1,
        ) from None
    except KeyboardInterrupt:
        return interrupted("finished runs", out / "chunks")
    if outcome.report is None:
        return stopped_early(outcome.done, outcome.total, "runs", outcome.chunks)
    print((out / "sweep.md").read_text(encoding="utf-8"))
    print(
        f"wrote {out / 'sweep.json'}, {out / 'sweep.md'}, {out / 'sweep.png'} and "
        f"{out / 'contact_sheet.png'}",
        file=sys.stderr,
    )
    return 0


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="skips, SSIM against vanilla and speedup per threshold, with a plot",
        description="Vanilla once, then one gated run per threshold. Timing 'isolated' runs "
        "each in a fresh subprocess (honest speed); 'none' resumes every gated pass from the "
        "vanilla trajectory in one process (fast, exact skips and SSIM, no speed).",
    )
    add_recipe_arguments(p)
    p.add_argument("--thresholds", help="comma-separated thresholds in [0, 1], e.g. 0.05,0.1,0.2")
    p.add_argument("--out", help="output folder (default sweep-<variant>)")
    p.add_argument(
        "--timing",
        choices=("isolated", "none"),
        default="isolated",
        help="isolated: cold subprocess per run (default); none: skips and SSIM only",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=1,
        help="cold repetitions per threshold with --timing isolated (default 1)",
    )
    p.add_argument("--warmup", type=int, default=1, help="discarded warm-up generations per run")
    p.add_argument("--fresh", action="store_true", help="discard kept runs and start over")
    p.add_argument("--max-chunks", type=int, metavar="N", help="stop after N new runs (resumable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_sweep)
