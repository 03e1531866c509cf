"""``--gate`` on the command line: generate, bench, sweep and calibrate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.gate import simulate_magcache
from app.variants import get_variant
from app.variants.user import calibrations_dir
from tests.fakes.params import magcache_params

PROMPT = "two red circles and a blue star on a yellow background"


def test_generate_with_magcache_follows_the_demo_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(
        ["generate", "--variant", "demo", "--prompt", PROMPT, "--gate", "magcache",
         "--steps", "12", "--seed", "5", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    params = magcache_params(get_variant("demo"))
    assert report["gate"] == "magcache"
    assert report["threshold"] == pytest.approx(params.threshold)
    expected = "".join(v.decision.letter for v in simulate_magcache(params, 12))
    assert report["pattern"] == expected  # the 28-step table resampled to 12 steps
    assert report["skipped"] > 0  # engagement, next to the quality figure
    assert report["ssim"] >= 0.90
    assert {s["gate"] for s in report["steps_detail"]} == {"magcache"}
    assert len(report["vanilla_mag_ratios"]) == 12


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "flux2-klein-base-4b", "--gate", "magcache"], "no MagCache calibration"),
        (["--variant", "flux1-schnell", "--gate", "magcache"], "step-distilled"),
        (["--variant", "demo", "--gate", "fastcache"], "invalid choice: 'fastcache'"),
        (
            ["--variant", "demo", "--gate", "firstblock", "--threshold", "1.5"],
            "threshold must be between 0 and 1, got 1.5",
        ),
        (
            ["--variant", "demo", "--gate", "firstblock", "--threshold", "-0.1"],
            "threshold must be between 0 and 1, got -0.1",
        ),
    ],
)
def test_a_gate_that_cannot_run_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", "--prompt", PROMPT, *args,
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


def test_sweep_runs_magcache_thresholds(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    code = main(
        ["sweep", "--variant", "demo", "--prompt", PROMPT, "--gate", "magcache", "--steps", "10",
         "--thresholds", "0,0.05", "--timing", "none", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert code == 0
    report = json.loads((out / "sweep.json").read_text())
    assert report["recipe"]["gate"] == "magcache"
    rows = {row["threshold"]: row for row in report["rows"]}
    params = magcache_params(get_variant("demo"), 0.05)
    expected = sum(v.decision.letter == "S" for v in simulate_magcache(params, 10))
    assert rows[0.0]["skipped"] == 0 and rows[0.0]["ssim"] == 1.0
    assert rows[0.05]["skipped"] == expected > 0


def test_bench_passes_the_gate_to_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.bench import harness

    seen = {}

    def fake_run_bench(config: harness.BenchConfig, *args: object, **kwargs: object) -> None:
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(harness, "run_bench", fake_run_bench)
    with pytest.raises(SystemExit):
        main(["bench", "--variant", "demo", "--gate", "magcache", "--reps", "1"])
    config = seen["config"]
    assert config.request.gate == "magcache"
    magcache = get_variant("demo").magcache
    assert magcache is not None and config.request.threshold == magcache.default_threshold
    assert config.spec("gated", 0).request.gate == "magcache"


@pytest.mark.slow
def test_calibrate_magcache_on_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(DEMO_PROMPTS[:2]) + "\n", encoding="utf-8")
    code = main(
        ["calibrate", "--variant", "demo", "--gate", "magcache", "--prompts", str(prompts),
         "--steps", "8", "--name", "mag", "--threshold", "0.04", "--quiet"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads((calibrations_dir() / "demo+mag.json").read_text())
    table = data["magcache"]["ratios"]
    assert len(table) == 8 and table[0] == 1.0
    per_prompt = data["per_prompt_ratios"]
    assert table[1:] == pytest.approx(
        [(a + b) / 2 for a, b in zip(per_prompt[0][1:], per_prompt[1][1:], strict=True)]
    )
    variant = get_variant("demo+mag")
    assert variant.gates == ("teacache", "magcache", "firstblock")  # the probe runs everywhere
    assert variant.coefficients == get_variant("demo").coefficients  # TeaCache numbers kept
    assert magcache_params(variant).threshold == 0.04
    assert "--gate magcache" in out


# -- the first-block probe (issue #28) -------------------------------------------------------------


def test_generate_with_the_probe_at_its_default_on_the_demo(tmp_path: Path) -> None:
    """Issue #28's "done when": at its default threshold on the demo's 28 steps the probe skips at
    least 3 steps with SSIM ≥ 0.95, and the report names the gate."""
    out = tmp_path / "out"
    code = main(["generate", "--variant", "demo", "--prompt", PROMPT, "--gate", "firstblock",
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["gate"] == "firstblock"
    assert report["threshold"] == get_variant("demo").default_threshold_for("firstblock")
    assert report["steps"] == 28 and report["skipped"] >= 3  # engagement
    assert report["ssim"] >= 0.95
    assert {s["gate"] for s in report["steps_detail"]} == {"firstblock"}
    # The gated steps carry the change they compared; the vanilla pass recorded the probe's trace.
    skipped = [s for s in report["steps_detail"] if s["decision"] == "skipped"]
    assert all(s["signals"]["firstblock"]["change"] < report["threshold"] for s in skipped)
    changes = report["vanilla_block_changes"]
    assert len(changes) == 28 and changes[0] is None and all(changes[1:])


def test_demo_turbo_skips_nothing_at_the_probes_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Distilled on purpose: 4 steps leave no step past the probe's warm-up, so at its default
    it skips none, and the run says why (the same distilled warning as every gate's)."""
    out = tmp_path / "out"
    code = main(["generate", "--variant", "demo-turbo", "--prompt", PROMPT, "--gate",
                 "firstblock", "--out", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["gate"] == "firstblock" and report["threshold"] > 0
    assert report["skipped"] == 0 and report["ssim"] == 1.0
    assert "no step the first-block probe may skip" in capsys.readouterr().err


def test_sweep_and_compare_run_the_probe(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    code = main(
        ["sweep", "--variant", "demo", "--prompt", PROMPT, "--gate", "firstblock",
         "--thresholds", "0,0.12", "--timing", "none", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert code == 0
    rows = {row["threshold"]: row for row in json.loads((out / "sweep.json").read_text())["rows"]}
    assert rows[0.0]["skipped"] == 0 and rows[0.0]["ssim"] == 1.0
    assert rows[0.12]["skipped"] >= 3  # engagement
    compared = tmp_path / "compare"
    code = main(
        ["compare", "--variant", "demo", "--prompt", PROMPT, "--gate", "firstblock",
         "--thresholds", "0.05,0.08,0.12,0.2", "--out", str(compared)]
    )  # fmt: skip
    assert code == 0
    assert {p.name for p in compared.iterdir()} >= {"vanilla.png"}


def test_bench_times_the_probe_beside_teacache_with_forced_patterns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.bench import harness
    from app.bench.worker import gate_params
    from app.gate import TeaCacheParams
    from app.gate.firstblock import FirstBlockParams

    seen = {}

    def fake_run_bench(config: harness.BenchConfig, *args: object, **kwargs: object) -> None:
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(harness, "run_bench", fake_run_bench)
    with pytest.raises(SystemExit):
        main(["bench", "--variant", "demo", "--forced-skips", "1", "--also-gate", "firstblock",
              "--reps", "1"])  # fmt: skip
    config = seen["config"]
    assert config.conditions == ("vanilla", "gate_off", "gated", "gated-firstblock")
    tea, probe = (
        gate_params(config.spec("gated", 0)),
        gate_params(config.spec("gated-firstblock", 0)),
    )
    assert isinstance(tea, TeaCacheParams) and tea.coefficients == config.coefficients
    assert isinstance(probe, FirstBlockParams)
    assert probe.forced and probe.max_consecutive_skips == 1
    assert gate_params(config.spec("gate_off", 0)).threshold == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gate", "magcache", "--forced-skips", "1"], "cannot force a MagCache pattern"),
        (["--also-gate", "teacache"], "--also-gate teacache is the gated condition's own gate"),
    ],
)
def test_bench_refuses_what_it_cannot_time_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--variant", "demo", "--reps", "1", *args]) == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_calibrate_refuses_the_probe_in_one_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The probe needs no calibration: ``calibrate --gate firstblock`` says so in one line (and
    what a calibration measures instead) before any vanilla run, and writes nothing."""
    code = main(
        ["calibrate", "--variant", "demo", "--gate", "firstblock", "--steps", "8",
         "--name", "probe", "--quiet"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "First-block probe needs no calibration" in lines[0]
    assert "TeaCache and MagCache" in lines[0]
    assert not (calibrations_dir() / "demo+probe.json").exists()
    assert not (calibrations_dir() / "demo+probe.chunks").exists()
