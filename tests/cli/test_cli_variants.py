"""``teacache-studio variants [--json]``: in process through ``main([...])`` and as a real command
(``python -m app``, what the ``teacache-studio`` script runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.variants import VARIANTS

ROOT = Path(__file__).resolve().parents[2]
TWELVE = {
    "flux1-dev", "flux1-schnell", "flux1-krea-dev", "flux2-klein-4b", "flux2-klein-9b",
    "flux2-klein-base-4b", "flux2-klein-base-9b", "z-image", "z-image-turbo", "qwen-image",
    "demo", "demo-turbo",
}  # fmt: skip
# Issue #29's five and their ``distilled`` flags (mflux's schedules: FLUX.3 Klein's 16-step flow
# map, Qwen-Image 2.1 Turbo's 8 steps and Krea 2 Turbo's 8 are distilled; the bases are not).
ISSUE_29 = {
    "flux3-image-klein": True,
    "flux3-image-klein-base": False,
    "qwen-image-2.1": False,
    "qwen-image-2.1-turbo": True,
    "krea-2": True,
}
# Issue #40's families, none with published TeaCache numbers (their Turbo/Lite schedules distilled).
ISSUE_40 = {
    "anima-turbo": True,
    "anima-aesthetic": False,
    "anima-base": False,
    "moss-image-sft": False,
    "moss-image-base": False,
    "ernie-image": False,
    "ernie-image-turbo": True,
    "lens-turbo": True,
    "fibo": False,
    "fibo-lite": True,
    "fibo2": False,
}
ALL_IDS = TWELVE | set(ISSUE_29) | set(ISSUE_40)
REQUIRED = {"id", "family", "distilled", "default_steps", "default_threshold"}


def run_cli(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=env,
    )


def check_rows(rows: object) -> None:
    assert isinstance(rows, list) and len(rows) == len(ALL_IDS)
    assert {row["id"] for row in rows} == ALL_IDS
    for row in rows:
        assert set(row) >= REQUIRED, row["id"]
        variant = VARIANTS[row["id"]]
        assert row["family"] == variant.family.id
        assert row["distilled"] is variant.distilled
        assert isinstance(row["default_steps"], int) and row["default_steps"] > 0
        threshold = row["default_threshold"]
        assert threshold is None or (isinstance(threshold, float) and 0 < threshold <= 1)
        assert threshold == variant.default_threshold
        uncalibrated = {**ISSUE_29, **ISSUE_40}
        if row["id"] in uncalibrated:  # no TeaCache numbers: no threshold, no coefficients
            assert row["distilled"] is uncalibrated[row["id"]]
            assert row["coefficients"] is None and threshold is None
        else:
            assert len(row["coefficients"]) == 5
    # Distilled variants list no threshold unless they state why they are listed anyway.
    assert all(
        row["default_threshold"] is not None
        for row in rows
        if not row["distilled"] and row["id"] in TWELVE
    )


# -- in process ------------------------------------------------------------------------------------


def test_json_lists_every_variant_with_the_required_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["variants", "--json"]) == 0
    out, err = capsys.readouterr()
    check_rows(json.loads(out))
    assert err == ""


def test_table_lists_every_variant_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["variants"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["id", "family", "steps", "threshold", "distilled"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == ALL_IDS and len(lines) == 1 + len(ALL_IDS)
    assert rows["flux1-dev"][1:] == ["flux1", "25", "0.20", "no"]
    assert rows["flux1-schnell"][1:] == ["flux1", "4", "—", "yes"]
    assert rows["flux3-image-klein"][1:] == ["flux3", "16", "—", "yes"]
    assert rows["qwen-image-2.1"][1:] == ["qwen-image-2.1", "40", "—", "no"]
    # One column per field: the longest family id does not push its row out of line.
    assert (
        len({line.index(" yes") if " yes" in line else line.index(" no") for line in lines[1:]})
        == 1
    )
    assert err == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["variants", "--bogus"],
        ["variants", "extra"],
        ["variants", "--json=yes"],
        ["variant"],
        ["--no-such-flag"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("teacache-studio") and "error:" in err
    assert "Traceback" not in err


# -- as a command ----------------------------------------------------------------------------------


def test_command_json() -> None:
    done = run_cli("variants", "--json")
    assert done.returncode == 0, done.stderr
    check_rows(json.loads(done.stdout))
    assert done.stderr == ""


def test_command_table_matches_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli("variants")
    assert done.returncode == 0, done.stderr
    main(["variants"])
    assert done.stdout == capsys.readouterr().out


@pytest.mark.parametrize("argv", [["variants", "--bogus"], ["variant"], ["variants", "x", "y"]])
def test_command_bad_arguments(argv: list[str]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_reader_that_leaves_early_is_no_traceback() -> None:
    """``teacache-studio variants --json | head -1``: the pipe closes before the output is
    written. The reading end is closed before the command starts, so this is deterministic."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = run_cli("variants", "--json", stdout=write_end)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141
