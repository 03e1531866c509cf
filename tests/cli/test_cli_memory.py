"""The memory check from the command line: refused in one sentence only where the weights cannot
fit; where only the estimated peak (an upper bound) is over, a ``warning:`` line on stderr and the
run goes ahead. The machine's memory is given, not probed; real weights cannot be loaded here, so
mflux's constructor returns a tiny random-weight shell (as in test_cli_model_path.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, shells
from app.adapters.flux2 import shell as flux2_shell
from app.cli.main import main
from app.engine import loader
from app.variants import get_variant
from tests.fakes.hub import write_snapshot

PROMPT = shells.DEFAULT_PROMPT
GB = 1024**3
KLEIN = get_variant("flux2-klein-base-4b")  # not distilled: no schedule warning


def _generate(folder: Path, out: Path, quantize: int, size: str = "512x512") -> int:
    return main(
        [
            "generate", "--variant", KLEIN.id, "--prompt", PROMPT, "--model-path", str(folder),
            "--size", size,
            "--steps", "2", "--quantize", str(quantize), "--out", str(out),
        ]
    )  # fmt: skip


@pytest.fixture
def shell_constructor(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    made: list[dict[str, Any]] = []
    with common.use_precision(mx.float32):  # the whole run, as in test_cli_model_path.py
        shell = flux2_shell("flux2-klein-base-4b", prompts=(PROMPT,))

        def constructor(**kwargs: Any) -> Any:
            made.append(kwargs)
            return shell

        monkeypatch.setattr(loader, "pipeline_class", lambda variant: constructor)
        yield made


@pytest.mark.usefixtures("on_a_mac")
def test_weights_that_cannot_fit_are_refused_in_one_sentence_before_loading(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shell_constructor: list[dict[str, Any]],
) -> None:
    folder = write_snapshot(tmp_path / "klein", KLEIN)
    # 4-bit weights: 4.2 GB, plus the 1.5 GB floor, on a 5 GB machine.
    monkeypatch.setattr(loader, "physical_memory_bytes", lambda: 5 * GB)
    # 1, as for missing weights or no network: the machine lacks something (2: a wrong command)
    assert _generate(folder, tmp_path / "out", 4) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert not any("may need up to" in line for line in err)
    assert "Traceback" not in "\n".join(err)
    assert err[-1] == (
        "teacache-studio: FLUX.2 Klein base 4B at 4-bit cannot load on this machine: its weights "
        "alone need 4.2 GB plus 1.5 GB for macOS and the app, and it has 5 GB; choose 3-bit "
        "quantization (3.3 GB of weights)"
    )
    assert shell_constructor == []  # refused before mflux was asked
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("on_a_mac")
def test_a_peak_over_memory_is_a_warning_line_and_the_run_goes_ahead(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shell_constructor: list[dict[str, Any]],
) -> None:
    folder = write_snapshot(tmp_path / "klein", KLEIN)
    # 4-bit at 512 × 512: weights 4.2 GB + 1.5 fit 7 GB; the upper bound, 7.9 GB, does not.
    monkeypatch.setattr(loader, "physical_memory_bytes", lambda: 7 * GB)
    out = tmp_path / "out"
    assert _generate(folder, out, 4) == 0
    err = capsys.readouterr().err.splitlines()
    # Other warnings (2 steps leave nothing gate-eligible) are not this test's concern.
    warnings = [line for line in err if line.startswith("warning:") and "may need" in line]
    assert warnings == [
        "warning: FLUX.2 Klein base 4B at 4-bit at 512 × 512 may need up to 7.9 GB and this "
        "machine has 7 GB: that figure is an upper bound measured with MLX on CUDA, so macOS may "
        "swap or the run may stop with an out-of-memory message. 3-bit quantization (up to "
        "7.0 GB) would fit."
    ]
    (kwargs,) = shell_constructor
    assert kwargs["quantize"] == 4  # run at the level asked for
    assert json.loads((out / "report.json").read_text())["quantize"] == 4
