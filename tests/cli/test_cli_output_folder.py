"""Output folders are checked before any work and left as they were when a command fails;
everything written is strict JSON (issue #16 item 7)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.errors import UserError
from app.cli.main import main
from app.cli.outdir import OutputFolder, output_folder
from app.fileio.jsonio import loads_strict

PROMPT = "a red circle on a blue background"
FAST = ["--variant", "demo", "--prompt", PROMPT, "--steps", "4", "--seed", "3"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )


def _one_line_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no "vanilla pass: …": nothing ran before the check
    assert lines[0].startswith("teacache-studio: ") and message in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("out", ["/proc/teacache-out", "/sys/teacache-out/deeper", "/proc"])
def test_generate_into_an_unwritable_place_is_one_line_before_any_work(out: str) -> None:
    # We run as root, so chmod cannot make a folder unwritable; /proc and /sys refuse even root.
    result = _cli("generate", *FAST, "--out", out)
    _one_line_exit_2(result, "output folder")
    assert out == "/proc" or not Path(out).exists()


def test_generate_with_a_file_where_the_folder_should_be(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("keep me")
    _one_line_exit_2(_cli("generate", *FAST, "--out", str(blocker)), "is a file, not a folder")
    _one_line_exit_2(
        _cli("generate", *FAST, "--out", str(blocker / "sub")), "cannot create the output folder"
    )
    assert blocker.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_bench_and_sweep_check_their_output_before_any_worker(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("")
    bench = _cli("bench", *FAST, "--reps", "1", "--out", str(blocker / "b.json"), "--quiet")
    _one_line_exit_2(bench, "the folder for the report")
    sweep = _cli("sweep", *FAST, "--thresholds", "0.1", "--out", "/proc/teacache-sweep")
    _one_line_exit_2(sweep, "cannot create the output folder /proc/teacache-sweep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_calibrate_checks_the_calibrations_folder_before_capturing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("TEACACHE_STUDIO_HOME", str(home))
    result = _cli("calibrate", "--variant", "demo", "--steps", "4", "--quiet")
    _one_line_exit_2(result, "calibrations folder")


def test_a_generate_that_fails_late_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.cli.generate as generate

    def fail(*_: object, **__: object) -> None:
        assert (tmp_path / "new" / "out").is_dir()  # created (and probed) before the work
        raise UserError("the engine failed", exit_code=1)

    monkeypatch.setattr(generate, "run_headless", fail)
    assert main(["generate", *FAST, "--out", str(tmp_path / "new" / "out")]) == 1
    assert "the engine failed" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # both levels it made are gone

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "run_headless", interrupted)
    assert main(["generate", *FAST, "--out", str(tmp_path / "cancelled")]) == 130
    assert list(tmp_path.iterdir()) == []


def test_a_failed_generate_never_removes_a_folder_that_existed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.cli.generate as generate

    existing = tmp_path / "results"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")

    def fail(*_: object, **__: object) -> None:
        raise UserError("the engine failed", exit_code=1)

    monkeypatch.setattr(generate, "run_headless", fail)
    assert main(["generate", *FAST, "--out", str(existing)]) == 1
    assert (existing / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["generate", *FAST, "--out", str(empty)]) == 1
    assert empty.is_dir()  # existed before: stays, even empty


def test_outputfolder_leaves_a_created_folder_that_others_wrote_into(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), output_folder(target) as folder:
        folder.track("ours.json").write_text("{}")
        (target / "theirs.txt").write_text("x")
        raise RuntimeError
    assert sorted(p.name for p in target.iterdir()) == ["theirs.txt"]  # ours removed, theirs kept
    assert OutputFolder(target).prepare().created == []  # exists now: nothing to undo


def test_report_json_with_an_undefined_ssim_is_strict_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.engine.report as report_module

    monkeypatch.setattr(report_module, "compare_images", lambda *_: math.nan)
    out = tmp_path / "out"
    assert main(["generate", *FAST, "--out", str(out)]) == 0
    report = loads_strict((out / "report.json").read_text())  # NaN would raise here
    assert report["ssim"] is None
    assert report["skipped"] + report["computed"] == 4  # the rest of the report is there
    assert "SSIM —" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not strict JSON"):
        loads_strict(json.dumps({"ssim": math.nan}))


def test_a_failed_run_removes_the_previews_folder_it_made_inside_a_new_folder(
    tmp_path: Path,
) -> None:
    with pytest.raises(RuntimeError), output_folder(tmp_path / "new") as folder:
        folder.subfolder("previews")
        folder.track("previews/gated-00.png").write_bytes(b"png")
        raise RuntimeError("the disk filled up")
    assert list(tmp_path.iterdir()) == []
