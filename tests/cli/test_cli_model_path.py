"""``--model-path DIR`` in generate, bench and sweep: the base variant read from the folder (or
given), one line for every unusable folder before any work, and the folder carried to the loader,
the report and the benchmark's worker spec.

Real weights cannot be loaded here: the end-to-end generate replaces mflux's constructor with one
that returns a tiny random-weight shell and records what it was given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, shells
from app.adapters.flux1 import shell as flux1_shell
from app.cli.main import main
from app.engine import loader
from app.variants import get_variant
from tests.fakes.hub import write_snapshot

PROMPT = shells.DEFAULT_PROMPT


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("teacache-studio: ") and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("command", ["generate", "bench", "sweep"])
def test_unusable_folders_are_one_line_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    required = {
        "generate": ["--out", str(out)],
        "bench": ["--out", str(out / "bench.json")],
        "sweep": ["--thresholds", "0.1", "--out", str(out)],
    }
    base = [command, "--prompt", PROMPT, *required[command]]
    (tmp_path / "empty").mkdir()
    assert "holds no model" in _fails(capsys, *base, "--model-path", str(tmp_path / "empty"))
    assert "does not exist" in _fails(capsys, *base, "--model-path", str(tmp_path / "nowhere"))
    qwen = write_snapshot(tmp_path / "qwen", get_variant("qwen-image"))
    other = _fails(capsys, *base, "--variant", "flux1-dev", "--model-path", str(qwen))
    assert "holds a Qwen-Image model, not FLUX.1 dev" in other
    dev = write_snapshot(tmp_path / "dev", get_variant("flux1-dev"))
    ambiguous = _fails(capsys, *base, "--model-path", str(dev))
    assert "could be any of flux1-dev, flux1-krea-dev: say which with --variant" in ambiguous
    (dev / "transformer" / "model.safetensors").write_bytes(b"\xff" * 64)
    damaged = _fails(capsys, *base, "--variant", "flux1-dev", "--model-path", str(dev))
    assert "incomplete or damaged" in damaged
    assert not out.exists()


def test_generate_runs_a_folder_and_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_snapshot(tmp_path / "schnell", get_variant("flux1-schnell"))
    made: list[dict[str, Any]] = []
    with common.use_precision(mx.float32):
        shell = flux1_shell("schnell", prompts=(PROMPT,))

        def constructor(**kwargs: Any) -> Any:
            made.append(kwargs)
            return shell

        monkeypatch.setattr(loader, "pipeline_class", lambda variant: constructor)
        out = tmp_path / "out"
        code = main(
            [
                "generate", "--prompt", PROMPT, "--model-path", str(folder), "--size", "128x128",
                "--steps", "2", "--quantize", "8", "--out", str(out),
            ]
        )  # fmt: skip
    assert code == 0
    (kwargs,) = made
    assert kwargs["model_path"] == str(folder.resolve()) and kwargs["quantize"] == 8
    report = json.loads((out / "report.json").read_text())
    assert report["variant"] == "flux1-schnell"  # read from the folder's files
    assert report["model_path"] == str(folder.resolve()) and report["quantize"] == 8


def test_bench_and_sweep_carry_the_folder_to_their_workers(tmp_path: Path) -> None:
    import argparse

    from app.bench.harness import BenchConfig
    from app.bench.sweep import SweepConfig
    from app.bench.worker import WorkerSpec
    from app.cli.bench import make_recipe_request

    folder = write_snapshot(tmp_path / "schnell", get_variant("flux1-schnell"))
    args = argparse.Namespace(
        variant=None,
        prompt=PROMPT,
        seed=1,
        steps=4,
        size=None,
        guidance=None,
        quantize=4,
        model_path=str(folder),
        gate="teacache",
        lora=None,
    )
    request = make_recipe_request(args)
    assert request.variant_id == "flux1-schnell" and request.model_path == str(folder.resolve())
    spec = BenchConfig(request).spec("gated", 0)
    assert spec.request.model_path == request.model_path
    assert WorkerSpec.from_json(spec.to_json()).request.model_path == request.model_path
    assert BenchConfig(request).settings()["model_path"] == request.model_path
    sweep = SweepConfig(request, thresholds=(0.1,))
    assert sweep.spec("gated", 0.1, 0, None).request.model_path == request.model_path


def test_random_weights_and_a_folder_do_not_go_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_snapshot(tmp_path / "schnell", get_variant("flux1-schnell"))
    message = _fails(
        capsys, "bench", "--random-weights", "tiny", "--model-path", str(folder), "--out",
        str(tmp_path / "b.json"),
    )  # fmt: skip
    assert "leave out --model-path" in message
