"""``calibrate``: pairs → degree-4 fits (app.gate.fit) → a user variant the registry loads; the
command line's resumable chunks around the ``Calibrate`` job (``app.bench.calibrate``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.bench.calibrate import run_calibration
from app.cli.main import main
from app.engine.calibration import (
    Calibrate,
    PromptCapture,
    calibration_document,
    fit_report,
    split_prompts,
)
from app.engine.request import GenerationRequest
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.variants import get_variant
from app.variants.user import calibrations_dir, save_calibration
from tests.fakes.engine import FAKE_OUTPUT_POLYNOMIAL, FakeEngine

KNOWN = (4.0, -3.0, 1.5, 0.6, 0.0)  # through the origin: both fit modes can recover it exactly
# Exact data: float64 least squares on a degree-4 Vandermonde over x in 0.01–0.35 (condition
# number 2e4) recovered KNOWN to 4e-13 and R² to exactly 1.0 here; 1e-9 (1e-12 for R²) leaves
# three orders of magnitude for another BLAS's summation order and still fails any wrong fit.
COEFFICIENTS_ATOL = 1e-9
R2_ABS = 1e-12
PROMPTS = tuple(f"prompt {i}" for i in range(10))


def synthetic_capture(prompt: str, shift: float = 0.0) -> PromptCapture:
    """One prompt's trajectory: signal changes shrinking over the steps, outputs = KNOWN(x)."""
    index = PROMPTS.index(prompt)
    rng = np.random.default_rng(index)
    x = np.sort(rng.uniform(0.01, 0.35, size=11))[::-1]
    return PromptCapture(
        prompt=prompt,
        step=tuple(range(1, 12)),
        x=tuple(float(v) for v in x),
        y=tuple(float(v) + shift for v in np.polyval(KNOWN, x)),
        mag_ratio=(None, *(1.0 - 0.1 * float(v) for v in x)),
        active_steps=12,
        loop_seconds=0.0,
    )


def job(prompts: tuple[str, ...] = PROMPTS, **overrides: Any) -> Calibrate:
    request = GenerationRequest(
        variant_id="demo",
        prompt=prompts[0],
        seed=42,
        steps=12,
        threshold=0.0,
        width=128,
        height=128,
    )
    return Calibrate(request, "synthetic", prompts, holdout=0.3, mode="both", **overrides)


def test_split_is_by_prompt() -> None:
    assert split_prompts(10, 0.3) == (list(range(7)), [7, 8, 9])
    assert split_prompts(10, 0.0) == (list(range(10)), [])
    assert split_prompts(2, 0.9) == ([0], [1])  # never holds out every prompt
    assert split_prompts(1, 0.5) == ([0], [])


def test_recovers_a_known_polynomial_and_the_registry_loads_it() -> None:
    chunks = [synthetic_capture(p) for p in PROMPTS]
    report = fit_report(chunks, 0.3, "both")
    for mode in ("free", "origin"):
        fit = report["fits"][mode]
        np.testing.assert_allclose(fit["coefficients"], KNOWN, atol=COEFFICIENTS_ATOL)
        assert fit["r2"] == pytest.approx(1.0, abs=R2_ABS)
        assert fit["heldout_r2"] == pytest.approx(1.0, abs=R2_ABS)
    assert report["heldout_prompts"] == [7, 8, 9]
    assert report["fit_pairs"] == 110 and report["heldout_pairs"] == 33

    calibration = job(thresholds=(("teacache", 0.12),))
    document = calibration_document(calibration, chunks, {"mlx": "test"})
    assert document["fit"]["fits"] == report["fits"]
    assert document["provenance"]["fit_metric"] == "held-out R²"
    assert document["calibrated_range"] == document["x_range"]
    assert len(document["pairs"]["x"]) == 110
    path = save_calibration(document)
    assert path.parent == calibrations_dir()
    variant = get_variant("demo+synthetic")
    assert variant.coefficients is not None
    np.testing.assert_allclose(variant.coefficients, KNOWN, atol=COEFFICIENTS_ATOL)
    assert variant.default_threshold == 0.12
    assert variant.calibrated_range == tuple(document["x_range"])


def test_origin_mode_forces_zero_intercept() -> None:
    # an intercept the origin fit must not take
    chunks = [synthetic_capture(p, shift=0.05) for p in PROMPTS]
    origin = fit_report(chunks, 0.3, "origin")
    assert list(origin["fits"]) == ["origin"] and origin["fits"]["origin"]["coefficients"][-1] == 0
    free = fit_report(chunks, 0.3, "free")["fits"]["free"]
    assert free["coefficients"][-1] == pytest.approx(0.05, abs=COEFFICIENTS_ATOL)  # 5e-16 here


def test_capture_resumes_per_prompt(tmp_path: Path) -> None:
    """The command's chunks: a run stopped after 4 prompts keeps them, and a rerun of the same
    job measures only the other 6 (each prompt's pass runs exactly once across both runs; its
    thresholds given, so no threshold trial runs)."""
    prompts = DEMO_PROMPTS
    engine = FakeEngine()
    given = (("teacache", 0.1), ("magcache", 0.02))
    first = run_calibration(
        job(prompts, thresholds=given), tmp_path / "c", engine=engine, progress=False, max_chunks=4
    )
    assert first.result is None and first.done == 4 and first.failure is None
    assert not (calibrations_dir() / "demo+synthetic.json").exists()  # nothing half-written
    second = run_calibration(
        job(prompts, thresholds=given), tmp_path / "c", engine=engine, progress=False
    )
    assert second.result is not None and second.done == 10
    assert [r.prompt for r in engine.requests] == list(prompts)
    fit = second.result.document["fit"]["fits"]["origin"]
    np.testing.assert_allclose(fit["coefficients"], FAKE_OUTPUT_POLYNOMIAL, atol=COEFFICIENTS_ATOL)


def test_too_few_pairs_is_a_clear_error() -> None:
    def short(prompt: str) -> PromptCapture:
        data = synthetic_capture(prompt)
        return PromptCapture(data.prompt, (), (), (), data.mag_ratio, 12, 0.0)

    chunks = [short(p) for p in PROMPTS[:2]]
    with pytest.raises(ValueError, match="degree-4 fit needs"):
        fit_report(chunks, 0.3, "both")


@pytest.mark.slow
def test_calibrate_command_on_the_demo_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("# three prompts\n" + "\n".join(DEMO_PROMPTS[:3]) + "\n\n", encoding="utf-8")
    code = main(
        [
            "calibrate",
            "--variant",
            "demo",
            "--prompts",
            str(prompts),
            "--steps",
            "8",
            "--name",
            "quick",
            "--holdout",
            "0.34",
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "demo+quick" in out and "(chosen)" in out
    data = json.loads((calibrations_dir() / "demo+quick.json").read_text())
    assert data["recipe"]["steps"] == 8 and data["recipe"]["prompts"] == list(DEMO_PROMPTS[:3])
    assert len(data["pairs"]["x"]) == 3 * 7  # steps − 1 consecutive pairs per prompt
    assert all(x > 0 for x in data["pairs"]["x"]) and all(y > 0 for y in data["pairs"]["y"])
    assert data["fit"]["heldout_prompts"] == [2]
    variant = get_variant("demo+quick")
    assert variant.coefficients == tuple(data["coefficients"])
    assert variant.family is get_variant("demo").family


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--variant", "nope"), "unknown variant"),
        (("--variant", "demo", "--name", "Bad Name"), "calibration name"),
        (("--variant", "demo", "--holdout", "1.5"), "--holdout"),
        (("--variant", "demo", "--prompts", "/nonexistent/prompts.txt"), "cannot read"),
        (("--variant", "demo", "--steps", "1"), "steps must be at least"),
        (("--name", "x"), "--variant is required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["calibrate", *args])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_out_of_vocabulary_demo_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text("a red circle\na purple elephant\n", encoding="utf-8")
    code = main(["calibrate", "--variant", "demo", "--prompts", str(prompts)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "elephant" in err[0]
