"""The worker's JSON contract and the whole command, through real subprocesses.

Model: a tiny random-weight FLUX.2 shell (mflux's own pipeline and loop, our FLUX.2 adapter),
float32 on CPU. ``MLX_DISABLE_COMPILE=1`` keeps mflux's compiled predict from paying g++ JIT in
every fresh process (tests/conftest.py notes why compile is avoided in tests). No wall-clock
assertion anywhere: times are only checked to be positive numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.bench.worker import RESULT_PREFIX, WorkerSpec, parse_result
from app.engine.request import GenerationRequest, make_request
from app.variants import get_variant

STEPS = 8
FORCED = (0.0, 0.0, 0.0, 0.0, 0.2)  # constant prediction: skip 2, compute 1 at threshold 0.5
ENV = {**os.environ, "MLX_DISABLE_COMPILE": "1", "TQDM_DISABLE": "1"}


def spec(condition: str) -> WorkerSpec:
    request = GenerationRequest(
        variant_id="flux2-klein-base-4b",
        prompt="a red circle on a blue background",
        seed=3,
        steps=STEPS,
        threshold=0.5,
        width=64,
        height=64,
        guidance=1.0,
    )
    return WorkerSpec(
        request,
        condition,
        coefficients=FORCED,
        random_weights="tiny",
        dtype="float32",
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=ENV, timeout=300
    )


@pytest.mark.slow
def test_worker_prints_one_result_line_with_engagement_next_to_time() -> None:
    done = run_cli("bench", "--worker", spec("gated").to_json())
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert len(lines) == 1
    result = parse_result(done.stdout)
    assert result is not None
    assert result["schema"] == 1 and result["condition"] == "gated" and result["rep"] == 0
    assert result["pattern"] == "FSSCSSCF"  # forced by the constant polynomial
    assert result["skipped"] == 4 and result["computed"] == 4
    assert result["active_steps"] == STEPS == result["loop_steps"]
    assert result["longest_skip_streak"] == 2
    assert len(result["step_seconds"]) == STEPS
    for key in ("loop_seconds", "wall_seconds", "load_seconds"):
        assert result[key] > 0
    assert result["first_generation"]["pattern"] == result["pattern"]
    assert result["warmup_generations"] == 1
    assert result["peak_memory_bytes"] > 0
    runtime = result["runtime"]
    assert runtime["mlx_device"].startswith("Device(cpu")
    assert "BLAS" in runtime["blas"] or "Accelerate" in runtime["blas"]
    assert runtime["mflux"] == "0.24.0"


@pytest.mark.slow
def test_vanilla_worker_installs_no_gate() -> None:
    done = run_cli("bench", "--worker", spec("vanilla").to_json())
    assert done.returncode == 0, done.stderr
    result = parse_result(done.stdout)
    assert result is not None
    assert result["pattern"] == "C" * STEPS and result["skipped"] == 0
    assert result["threshold"] is None and result["coefficients"] is None
    assert result["step_seconds"] is None  # no gate, so no per-step telemetry


@pytest.mark.slow
def test_bench_command_end_to_end_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    common = (
        "bench",
        "--variant",
        "flux2-klein-base-4b",
        "--random-weights",
        "tiny",
        "--forced-skips",
        "2",
        "--steps",
        str(STEPS),
        "--size",
        "64x64",
        "--guidance",
        "1",
        "--reps",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    first = run_cli(*common, "--max-chunks", "1")
    assert first.returncode == 0, first.stderr
    assert "rerun the same command to resume" in first.stderr
    chunk = tmp_path / "bench.chunks" / "rep0-vanilla.json"
    kept = chunk.read_text()
    assert not out.exists()

    second = run_cli(*common)
    assert second.returncode == 0, second.stderr
    assert chunk.read_text() == kept  # the finished chunk was not redone
    report = json.loads(out.read_text())
    assert [(r["rep"], r["condition"]) for r in report["runs"]] == [
        (0, "vanilla"),
        (0, "gate_off"),
        (0, "gated"),
    ]
    assert report["conditions"]["gated"]["skipped"] == [4]
    assert report["conditions"]["gate_off"]["skipped"] == [0]
    assert report["speedup"]["ideal"] == pytest.approx(2.0)
    assert "| gated |" in second.stdout and "4/8" in second.stdout
    assert report["hardware"]["runtime"]["mflux"] == "0.24.0"
    assert report["recipe"]["coefficients"] == [0.0, 0.0, 0.0, 0.0, 0.2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--variant", "nope"), "unknown variant"),
        (("--variant", "demo", "--reps", "0"), "--reps must be at least 1"),
        (("--variant", "demo", "--threshold", "2"), "threshold must be between 0 and 1"),
        (("--variant", "demo", "--out", "x.txt"), "--out must name a .json file"),
        (("--variant", "demo", "--forced-skips", "2", "--threshold", "0.1"), "--forced-skips"),
        (
            ("--variant", "demo", "--random-weights", "tiny"),
            # the families read from the registry: random_weight_families()
            "Qwen-Image 2.1, Krea 2, ",
        ),
        (("--variant", "demo", "--warmup-steps", "0"), "--warmup-steps must be at least 1"),
        (  # no TeaCache numbers: a real threshold needs a calibration (a forced one does not);
            # TeaCache named, as the probe is this variant's default gate
            (
                "--variant",
                "qwen-image-2.1",
                "--random-weights",
                "tiny",
                "--gate",
                "teacache",
                "--threshold",
                "0.1",
            ),
            "make one with `teacache-studio calibrate --variant qwen-image-2.1 --gate teacache`",
        ),
        (
            (
                "--reps",
                "2",
            ),
            "--variant is required",
        ),
        (("--variant", "demo", "--size", "12x"), "size must look like"),
        (("--variant", "demo", "--lora", "a.safetensors", "1"), "takes no LoRA"),
        (
            ("--variant", "flux2-klein-base-4b", "--lora", "/no/such.safetensors", "1"),
            "the LoRA file /no/such.safetensors does not exist",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli.main import main

    try:
        code = main(["bench", *args])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


@pytest.mark.slow
def test_demo_worker_loads_the_app_pipeline_and_saves_the_image(tmp_path: Path) -> None:
    image = tmp_path / "gated.png"
    request = make_request("demo", "a red circle on a blue background", steps=6, threshold=0.5)
    demo = WorkerSpec(request, "gated", image_path=str(image))
    done = run_cli("bench", "--worker", demo.to_json())
    assert done.returncode == 0, done.stderr
    result = parse_result(done.stdout)
    assert result is not None
    assert len(result["pattern"]) == 6 and result["pattern"][0] == "F"
    assert result["coefficients"] == list(get_variant("demo").coefficients or ())
    from PIL import Image

    with Image.open(image) as saved:
        assert saved.size == (128, 128)


def test_a_forced_pattern_times_a_variant_without_teacache_numbers() -> None:
    """This year's models have no TeaCache calibration; the forced polynomial stands in for it
    in every gated condition (gate off: the same polynomial at threshold 0)."""
    from app.bench.worker import gate_params
    from app.gate import TeaCacheParams

    request = GenerationRequest(
        variant_id="qwen-image-2.1", prompt="p", seed=1, steps=4, threshold=0.5, width=64,
        height=64, guidance=None,
    )  # fmt: skip
    assert request.variant.coefficients is None
    off = gate_params(WorkerSpec(request, "gate_off", coefficients=FORCED))
    gated = gate_params(WorkerSpec(request, "gated", coefficients=FORCED))
    assert isinstance(off, TeaCacheParams) and isinstance(gated, TeaCacheParams)
    assert off.coefficients == gated.coefficients == FORCED
    assert not off.enabled and gated.rel_l1_thresh == 0.5


@pytest.mark.slow
def test_bench_command_forces_a_pattern_on_this_years_model(tmp_path: Path) -> None:
    """What lab/bench/device/issue29.sh runs, on a tiny shell: Qwen-Image 2.1 (no TeaCache
    numbers) through TeaCache's seam, one skip after each computed step."""
    out = tmp_path / "qwen21.json"
    done = run_cli(
        "bench", "--variant", "qwen-image-2.1", "--random-weights", "tiny", "--dtype", "float32",
        "--gate", "teacache", "--forced-skips", "1", "--steps", "6", "--size", "64x64", "--reps",
        "1", "--warmup-steps", "4", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["conditions"]["gated"]["skipped"] == [2]  # FSCSCF
    assert report["conditions"]["gate_off"]["skipped"] == [0]
    assert report["recipe"]["variant"] == "qwen-image-2.1"
    assert report["speedup"]["ideal"] == pytest.approx(1.5)


@pytest.mark.slow
def test_bench_times_the_forecast_fill_on_a_random_weight_shell(tmp_path: Path) -> None:
    """What the lead's device batch runs for the forecast's cost on a skipped step (FLUX.2 Klein
    at its real size there), on a tiny shell: the forced pattern, every gated run forecasting
    the skips it can (the first skip has one computed step behind it, so it reuses; the guard may
    reuse a later one)."""
    out = tmp_path / "forecast.json"
    done = run_cli(
        "bench", "--variant", "flux2-klein-base-4b", "--random-weights", "tiny", "--dtype",
        "float32", "--fill", "forecast", "--forced-skips", "1", "--steps", "8", "--size",
        "64x64", "--reps", "1", "--warmup-steps", "4", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["recipe"]["fill"] == "forecast"
    gated = report["conditions"]["gated"]
    assert gated["skipped"] == [3]  # FSCSCSCF
    # The skip at step 3 forecasts (two computed steps behind it); the one at step 5 too, unless
    # the guard reuses after a streak where the forecast was further off than reuse: on the kit's
    # FLUX.2 shell it was (step 4's check: 1.08 against reuse's 0.46), so the count is 1 there.
    assert gated["forecast_steps"][0] in (1, 2)
    assert report["conditions"]["vanilla"]["forecast_steps"] == [0]
