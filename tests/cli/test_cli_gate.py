"""``--gate`` on the command line: generate, bench, sweep and calibrate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.engine.calibration import DEMO_PROMPTS
from app.gate import simulate_magcache
from app.variants import get_variant
from app.variants.user import calibrations_dir

PROMPT = "two red circles and a blue star on a yellow background"


def test_generate_with_magcache_follows_the_demo_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(
        ["generate", "--variant", "demo", "--prompt", PROMPT, "--gate", "magcache",
         "--steps", "12", "--seed", "5", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    params = get_variant("demo").magcache_params()
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
    params = get_variant("demo").magcache_params(0.05)
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
    assert variant.gates == ("teacache", "magcache")
    assert variant.coefficients == get_variant("demo").coefficients  # TeaCache numbers kept
    assert variant.magcache_params().threshold == 0.04
    assert "--gate magcache" in out
