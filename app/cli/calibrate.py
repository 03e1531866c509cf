"""``teacache-studio calibrate``: placeholder until the implementation lands."""

from __future__ import annotations

import argparse


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="(in progress)")
    p.set_defaults(handler=lambda args: 0)
