"""CI runs every test: each marker that the default ``uv run pytest`` leaves out (``addopts`` in
pyproject.toml) has its own ``uv run pytest -m <marker>`` step in ``.ci/run``."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _left_out_by_default() -> list[str]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    words = shlex.split(options["pytest"]["ini_options"]["addopts"])
    expression = words[words.index("-m") + 1]
    return re.findall(r"\bnot (\w+)", expression)


def _marker_steps(script: str) -> list[str]:
    return re.findall(r"^step uv run pytest -m (\w+)\b", script, flags=re.MULTILINE)


def test_every_marker_left_out_by_default_is_a_ci_step_of_its_own() -> None:
    left_out = _left_out_by_default()
    assert left_out == ["bundle", "lab_slow"]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^step uv run pytest\s*(#.*)?$", script, flags=re.MULTILINE)  # the default
    assert sorted(_marker_steps(script)) == sorted(left_out)


def test_the_step_reader_reads_a_step_and_only_a_step() -> None:
    script = "step uv run pytest -m bundle  # the bundle\n# step uv run pytest -m lab_slow\n"
    assert _marker_steps(script) == ["bundle"]
