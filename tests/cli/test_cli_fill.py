"""``--fill`` on the command line: ``generate`` (and its target search), ``compare`` and
``bench`` carry the fill to the engine and record it (report, PNG metadata, the summary line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from app.cli.main import main
from app.gate.fill import REACH

PROMPT = "two red circles and a blue star on a yellow background"


def _generate(tmp_path: Path, name: str, *extra: str) -> dict:
    out = tmp_path / name
    args = ["generate", "--variant", "demo", "--prompt", PROMPT, "--seed", "5", "--out", str(out)]
    assert main([*args, *extra]) == 0
    return json.loads((out / "report.json").read_text())


def test_generate_forecasts_records_it_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forecast = _generate(tmp_path, "forecast", "--threshold", "0.15", "--fill", "forecast")
    line = capsys.readouterr().out.strip().splitlines()[-1]
    reused = _generate(tmp_path, "reuse", "--threshold", "0.15")
    assert forecast["skipped"] > 0  # engagement
    assert (forecast["fill"], reused["fill"]) == ("forecast", "reuse")
    assert "on a skipped step: forecast it" in line
    assert any(step["fill"].get(REACH, 0) > 0 for step in forecast["steps_detail"])
    assert all(step["fill"].get(REACH, 0) == 0 for step in reused["steps_detail"])
    assert forecast["gated_latents_sha256"] != reused["gated_latents_sha256"]
    with Image.open(tmp_path / "forecast" / "gated.png") as image:
        chunks = dict(image.text)  # type: ignore[attr-defined]
    assert chunks["fill"] == "forecast" and json.loads(chunks["teacache"])["fill"] == "forecast"


def test_the_target_search_runs_every_pass_with_the_fill(tmp_path: Path) -> None:
    report = _generate(
        tmp_path, "target", "--steps", "16", "--target-ssim", "0.99", "--fill", "forecast"
    )
    assert report["fill"] == "forecast" and report["target_search"]
    assert report["skipped"] > 0


def test_an_unknown_fill_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["generate", "--variant", "demo", "--prompt", PROMPT, "--out", "x", "--fill", "t"])
    assert exited.value.code == 2
    assert "invalid choice: 't' (choose from 'reuse', 'forecast')" in capsys.readouterr().err


def test_bench_passes_the_fill_to_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.bench import harness
    from app.bench.worker import WorkerSpec

    seen = {}

    def fake_run_bench(config: harness.BenchConfig, *args: object, **kwargs: object) -> None:
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(harness, "run_bench", fake_run_bench)
    with pytest.raises(SystemExit):
        main(["bench", "--variant", "demo", "--fill", "forecast", "--reps", "1"])
    config = seen["config"]
    assert config.settings()["fill"] == "forecast"
    spec = WorkerSpec.from_json(config.spec("gated", 0).to_json())  # across the process line
    assert spec.request.fill == "forecast"


def test_compare_runs_every_threshold_with_the_fill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare"
    code = main(
        ["compare", "--variant", "demo", "--prompt", PROMPT, "--thresholds", "0.05,0.1,0.15,0.2",
         "--fill", "forecast", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    assert "(on a skipped step: forecast it)" in capsys.readouterr().out
    document = json.loads((out / "compare.json").read_text())
    assert document["request"]["fill"] == "forecast"
    entries = document["entries"]
    assert [e["report"]["fill"] for e in entries] == ["forecast"] * 4
    assert sum(e["report"]["skipped"] for e in entries) > 0  # engagement
