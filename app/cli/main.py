"""Argument parsing and dispatch. Subcommands register themselves in ``SUBCOMMANDS``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from app.cli.errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one clear line (exit 2) instead of usage + text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _variants(args: argparse.Namespace) -> int:
    from app.fileio.jsonio import dumps_json
    from app.variants import all_variants, check_schedule

    variants = all_variants()  # the built-ins, the user's calibrations and model folders

    if args.memory:
        from app.cli.memory_table import memory_table

        return _write(memory_table() + "\n")
    if args.json:
        rows = []
        for v in variants.values():
            data = v.summary()
            check = check_schedule(v, v.default_steps)
            data["can_skip_at_default_steps"] = check.can_skip
            data["eligible_steps_at_default"] = check.eligible_steps
            rows.append(data)
        return _write(dumps_json(rows, indent=2) + "\n")
    width = max(len(v) for v in variants)
    family_width = max(len("family"), *(len(v.family.id) for v in variants.values()))
    lines = [
        f"{'id':<{width}}  {'family':<{family_width}} {'steps':>5}  {'threshold':>9}  distilled"
    ]
    for v in variants.values():
        thresh = "—" if v.default_threshold is None else f"{v.default_threshold:.2f}"
        lines.append(
            f"{v.id:<{width}}  {v.family.id:<{family_width}} {v.default_steps:>5}  {thresh:>9}  "
            f"{'yes' if v.distilled else 'no'}"
        )
    return _write("\n".join(lines) + "\n")


def _write(text: str) -> int:
    """Print ``text``; a reader that went away early (``| head``) is not an error worth a
    traceback. Exit code 141 is what a shell reports for a writer killed by SIGPIPE."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return _closed_stdout()
    return 0


def _closed_stdout() -> int:
    # Point stdout at /dev/null so the interpreter's final flush does not fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


SubcommandSetup = Callable[[argparse._SubParsersAction], None]


def _subcommands() -> list[SubcommandSetup]:
    from app.cli import bench, calibrate, compare, generate, sweep

    return [generate.setup, compare.setup, bench.setup, sweep.setup, calibrate.setup]


def build_parser() -> argparse.ArgumentParser:
    from app import __version__

    parser = _Parser(
        prog="teacache-studio",
        description="Explore TeaCache step-skipping on MLX image models. "
        "Without a subcommand, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--screenshot",
        metavar="FILE",
        help="open the window, run one demo generation, save a grab of the window to FILE and exit",
    )
    parser.add_argument(
        "--smoke-test",
        action="store_true",
        help="build the window offscreen, run one demo generation, exit 0",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    p = sub.add_parser("variants", help="list the model variants and their gate defaults")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--memory",
        action="store_true",
        help="estimated peak memory at 1024×1024 per quantization, and what fits which Mac "
        "(the README's table)",
    )
    p.set_defaults(handler=_variants)
    for setup in _subcommands():
        setup(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # transformers (imported by mflux) announces at import that torch is absent: by design here.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    try:
        if handler is None:
            from app.ui.launch import launch

            return launch(screenshot=args.screenshot, smoke_test=args.smoke_test)
        return int(handler(args))
    except UserError as exc:
        print(f"teacache-studio: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("teacache-studio: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): not worth a traceback
        return _closed_stdout()
