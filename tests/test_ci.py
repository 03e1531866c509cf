"""CI runs every test: each marker that the default ``uv run pytest`` leaves out (``addopts`` in
pyproject.toml) has its own ``uv run pytest -m <marker>`` step in ``.ci/run``."""

from __future__ import annotations

import re
import shlex
import subprocess
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


def test_ci_runs_every_step_in_a_fresh_empty_temporary_folder(tmp_path: Path) -> None:
    # MLX's CPU compile cache lives under $TMPDIR: a warm one hid a race between the test workers
    # (issue #39). A stand-in `uv` records the folder each step sees and what it holds.
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    for tool in ("uv", "shellcheck"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "$TMPDIR $(ls -A "$TMPDIR" | wc -l)" >> "{seen}"\n')
        stub.chmod(0o755)
    callers = tmp_path / "callers"
    callers.mkdir()
    (callers / "warm-cache").mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TMPDIR": str(callers), "HOME": str(tmp_path)}

    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    steps = [line.split() for line in seen.read_text().splitlines()]
    assert len(steps) >= 6  # sync, ruff, pyright and the three pytest steps
    folders = {folder for folder, _ in steps}
    assert len(folders) == 1
    (folder,) = folders
    assert Path(folder).parent == callers  # made beside the caller's, not the caller's own
    assert steps[0][1] == "0"  # empty when the first step starts
    assert not Path(folder).exists()  # and removed at the end
