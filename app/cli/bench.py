"""``teacache-studio bench``: placeholder until the implementation lands."""

from __future__ import annotations

import argparse


def setup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="(in progress)")
    p.set_defaults(handler=lambda args: 0)
