"""``teacache-studio calibrate``: the window's ``Calibrate`` job from the command line, its
refusals as one line (a name taken, too few prompts, a model that cannot load offline), the
default thresholds it chose and why, and ``--replace`` refitting the kept prompts (and reusing
the kept threshold trials) without a pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.variants import get_variant
from app.variants.user import calibrations_dir
from tests.fakes.network import UNREACHABLE_REASONS, unreachable_endpoint

ROOT = Path(__file__).resolve().parents[2]


def _prompts(tmp_path: Path, count: int) -> str:
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(DEMO_PROMPTS[:count]) + "\n", encoding="utf-8")
    return str(path)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_name_taken_is_refused_and_replace_refits_without_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["calibrate", "--variant", "demo", "--prompts", _prompts(tmp_path, 3), "--steps", "6",
            "--name", "twice", "--quiet"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "demo+twice" in out and "MagCache table" in out  # every gate by default
    first = json.loads((calibrations_dir() / "demo+twice.json").read_text())
    assert first["fit"]["mode"] == "both" and "magcache" in first
    for gate, label in (("teacache", "TeaCache"), ("magcache", "MagCache")):  # chosen, and why
        assert f"{label} default threshold: {first['threshold_choice'][gate]['reason']}" in out

    assert main(args) == 2
    line = _one_line(capsys)
    assert "'twice' already exists for demo (demo+twice)" in line and "--replace" in line

    from app.engine.engine import Engine

    def no_pass(*_args: object) -> None:
        raise AssertionError("a pass ran: the kept prompts should have been refitted")

    monkeypatch.setattr(Engine, "run", no_pass)
    # The same settings again: the fit and the threshold trials all come from the chunks.
    assert main([*args, "--replace"]) == 0
    again = json.loads((calibrations_dir() / "demo+twice.json").read_text())
    assert again["threshold_choice"] == first["threshold_choice"]
    assert again["coefficients"] == first["coefficients"]
    # TeaCache's threshold given (its new fit would need trials of its own); MagCache's table is
    # the same, so its threshold trials come from the chunks too.
    assert main([*args, "--replace", "--mode", "free", "--threshold", "0.1"]) == 0
    second = json.loads((calibrations_dir() / "demo+twice.json").read_text())
    assert second["fit"]["mode"] == "free" and second["pairs"] == first["pairs"]
    assert get_variant("demo+twice").coefficients == tuple(second["coefficients"])
    assert second["threshold_choice"]["magcache"] == first["threshold_choice"]["magcache"]
    assert second["default_threshold"] == 0.1


def test_too_few_prompts_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--variant", "demo", "--prompts", _prompts(tmp_path, 1)]) == 2
    line = _one_line(capsys)
    assert "at least 2 prompts, got 1" in line and "held-out R²" in line
    assert not calibrations_dir().exists()


def test_too_few_steps_for_the_fit_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--variant", "demo", "--steps", "2", "--holdout", "0.9"]) == 2
    assert "a degree-4 fit needs" in _one_line(capsys)


def test_a_model_that_cannot_load_offline_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real loader meets a refused port (the real Hugging Face client, in a fresh process):
    one sentence, exit 1 like every failed run, and no calibration."""
    home = tmp_path / "home"
    with unreachable_endpoint("refused") as endpoint:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("TEACACHE_STUDIO_HOME", str(home))
        done = subprocess.run(
            [sys.executable, "-m", "app", "calibrate", "--variant", "flux2-klein-base-4b",
             "--quantize", "4", "--steps", "8", "--name", "offline", "--quiet"],
            cwd=ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("teacache-studio:")]
    assert len(errors) == 1 and "No internet connection" in errors[0], done.stderr
    assert UNREACHABLE_REASONS["refused"] in errors[0]
    assert not list(home.rglob("*+offline.json"))
