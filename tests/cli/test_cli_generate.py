"""``teacache-studio generate`` on the embedded demo: files, report contract, clean failures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli.main import main
from app.variants import get_variant

PROMPT = "two red circles and a blue star on a yellow background"
REPORT_KEYS = {
    "variant", "prompt", "seed", "steps", "threshold", "skipped", "computed", "pattern",
    "steps_detail", "ssim", "vanilla_seconds", "gated_seconds", "max_abs_diff",
}  # fmt: skip


def _generate(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "out"
    code = main(["generate", "--variant", "demo", "--prompt", PROMPT, "--out", str(out), *extra])
    assert code == 0
    for name in ("gated.png", "vanilla.png"):
        assert Image.open(out / name).size == (128, 128)
    return json.loads((out / "report.json").read_text())


def test_threshold_zero_is_bit_exact_against_vanilla(tmp_path: Path) -> None:
    # The demo's vanilla runs eager, on the gate's numerical path: exactly equal, not "close".
    report = _generate(tmp_path, "--threshold", "0", "--steps", "8", "--seed", "5")
    assert set(report) >= REPORT_KEYS
    assert report["max_abs_diff"] == 0.0
    assert report["gated_latents_sha256"] == report["vanilla_latents_sha256"]
    assert report["skipped"] == 0 and report["pattern"] == "C" * 8
    assert report["ssim"] == 1.0


def test_default_threshold_engages_and_reports_every_step(tmp_path: Path) -> None:
    report = _generate(tmp_path, "--seed", "5")
    assert report["steps"] == 28
    assert report["threshold"] == pytest.approx(get_variant("demo").default_threshold)
    assert report["skipped"] > 0  # engagement, next to the quality figure
    assert report["ssim"] >= 0.90
    assert len(report["pattern"]) == 28 and report["pattern"][0] == report["pattern"][-1] == "F"
    assert report["pattern"].count("S") == report["skipped"]
    detail = report["steps_detail"]
    assert [s["index"] for s in detail] == list(range(28))
    assert {"index", "decision", "accumulated", "seconds", "signals"} <= set(detail[0])
    assert {"rel_l1", "predicted"} <= set(detail[0]["signals"]["teacache"])
    assert report["computed"] + report["skipped"] == 28


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "nope", "--prompt", PROMPT], "unknown variant 'nope'"),
        (["--variant", "demo", "--prompt", "   "], "the prompt is empty"),
        (["--variant", "demo", "--prompt", "a purple elephant"], "does not know 'elephant'"),
        (["--variant", "demo", "--prompt", PROMPT, "--threshold", "1.5"], "between 0 and 1"),
        (["--variant", "demo", "--prompt", PROMPT, "--steps", "1"], "steps must be at least"),
        (["--variant", "demo", "--prompt", PROMPT, "--size", "130x128"], "multiple of 16"),
        (["--variant", "demo", "--prompt", PROMPT, "--size", "big"], "WIDTHxHEIGHT"),
        (["--variant", "demo", "--prompt", PROMPT, "--size", "256x256"], "128 × 128 pixels only"),
        (["--variant", "demo", "--prompt", PROMPT, "--lora", "a.safetensors", "1"], "no LoRA"),
        (
            [
                "--variant",
                "flux2-klein-base-4b",
                "--prompt",
                "a cat",
                "--lora",
                "/no/such.safetensors",
                "1",
            ],
            "the LoRA file /no/such.safetensors does not exist",
        ),
        (
            [
                "--variant",
                "flux2-klein-base-4b",
                "--prompt",
                "a cat",
                "--lora",
                "a.safetensors",
                "lots",
            ],
            "the LoRA scale must be a number, got 'lots'",
        ),
        (
            ["--variant", "demo", "--prompt", PROMPT, "--lora", "a.safetensors"],
            "--lora: expected 2",
        ),
    ],
)
def test_bad_input_is_one_clear_line_without_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", *args, "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()  # refused before the output folder was made


def test_flux1_dev_fails_cleanly_without_weights_or_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", "--variant", "flux1-dev", "--prompt",
         "a red apple", "--steps", "4", "--size", "256x256", "--quantize", "4",
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1
    lines = [line for line in result.stderr.strip().splitlines() if line]
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith("teacache-studio: ")
    assert "FLUX.1 dev is not downloaded and HF_HUB_OFFLINE is set" in lines[-1], result.stderr
    assert not (tmp_path / "o").exists()  # a failed generate leaves no empty output folder


def test_previews_write_one_file_per_step_and_list_them(tmp_path: Path) -> None:
    report = _generate(tmp_path, "--steps", "12", "--seed", "5", "--previews")
    out = tmp_path / "out"
    assert report["skipped"] > 0  # engagement: skipped steps have previews too
    listing = report["previews"]
    assert set(listing) == {"vanilla", "gated"}
    for which in ("vanilla", "gated"):
        names = [f"previews/{which}-{i:02d}.png" for i in range(12)]
        assert listing[which] == names
        assert sorted(p.name for p in (out / "previews").glob(f"{which}-*.png")) == [
            n.removeprefix("previews/") for n in names
        ]
        # the demo's last preview is the pass's image (the codec decodes exactly)
        last = np.asarray(Image.open(out / names[-1]).convert("RGB"))
        assert np.array_equal(last, np.asarray(Image.open(out / f"{which}.png").convert("RGB")))


def test_without_previews_nothing_is_written_or_listed(tmp_path: Path) -> None:
    report = _generate(tmp_path, "--steps", "8", "--seed", "5")
    assert "previews" not in report
    assert not (tmp_path / "out" / "previews").exists()


def test_target_ssim_writes_the_search_and_the_chosen_threshold(tmp_path: Path) -> None:
    report = _generate(tmp_path, "--target-ssim", "0.97", "--seed", "701103987")
    assert report["target_ssim"] == 0.97 and report["target_max_local_diff"] == 0.25
    tried = report["target_search"]
    assert 1 <= len(tried) <= 8
    chosen = [t for t in tried if t["chosen"]]
    assert chosen and all(t["threshold"] == report["threshold"] for t in chosen)
    assert report["skipped"] == chosen[-1]["skipped"] > 0  # engagement
    assert report["ssim"] >= 0.97 and report["local_diff"] <= 0.25  # measured, met
    assert report["target_met"] is True
    assert {"threshold", "ssim", "local_diff", "skipped", "met"} <= set(tried[0])
    assert not any(t["met"] and t["skipped"] > report["skipped"] for t in tried)
    window = report["local_diff_window"]
    assert window["size"] == 16 and 0 <= window["x"] <= 112


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target-ssim", "0.97", "--threshold", "0.1"], "either --threshold or --target-ssim"),
        (["--target-ssim", "0"], "above 0 and at most 1"),
        (["--target-ssim", "1.2"], "above 0 and at most 1"),
        (["--target-ssim", "0.97", "--max-local-diff", "-1"], "between 0 and 1"),
        (["--max-local-diff", "0.2"], "give --target-ssim too"),
        (["--target-ssimulacra2", "70", "--threshold", "0.1"], "--target-ssimulacra2, not both"),
        (["--target-ssimulacra2", "101"], "a number up to 100"),
        (["--target-ssimulacra2", "nan"], "a number up to 100"),
    ],
)
def test_bad_target_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "o"
    code = main(["generate", "--variant", "demo", "--prompt", PROMPT, "--out", str(out), *extra])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not out.exists()


def test_target_search_previews_are_the_chosen_passes(tmp_path: Path) -> None:
    """A search runs several gated passes; the gated previews written are the chosen threshold's
    only, byte-equal to a plain resumed run at that threshold (bit-exact with the search's)."""
    seed = "701103987"  # with MagCache the last pass tried is not the one chosen (measured)
    search = _generate(
        tmp_path / "search", "--gate", "magcache", "--target-ssim", "0.97", "--seed", seed,
        "--previews",
    )  # fmt: skip
    tried = search["target_search"]
    assert search["target_met"] is True and search["skipped"] > 0  # engagement
    assert tried[-1]["threshold"] != search["threshold"]  # a later pass ran after the chosen one
    plain = _generate(
        tmp_path / "plain", "--gate", "magcache", "--threshold", str(search["threshold"]),
        "--seed", seed, "--resume", "--previews",
    )  # fmt: skip
    assert plain["pattern"] == search["pattern"]
    for which in ("vanilla", "gated"):
        assert search["previews"][which] == plain["previews"][which]
        for name in search["previews"][which]:
            a = np.asarray(Image.open(tmp_path / "search" / "out" / name).convert("RGB"))
            b = np.asarray(Image.open(tmp_path / "plain" / "out" / name).convert("RGB"))
            assert np.array_equal(a, b), name


def test_the_pngs_carry_the_runs_figures_as_the_windows_export_does(tmp_path: Path) -> None:
    """gated.png and vanilla.png carried no metadata; mflux's own outputs do (#27, "Also")."""
    from app import __version__
    from app.storage.export import export_metadata

    report = _generate(tmp_path, "--seed", "5", "--steps", "12", "--gate", "magcache")
    assert report["skipped"] > 0  # a run that skipped: its figures are worth carrying
    chunks = {}
    for name in ("gated.png", "vanilla.png"):
        with Image.open(tmp_path / "out" / name) as image:
            chunks[name] = dict(image.text)  # type: ignore[attr-defined]
    gated, vanilla = chunks["gated.png"], chunks["vanilla.png"]
    assert (gated["image"], vanilla["image"]) == ("MagCache", "Vanilla")
    assert gated["prompt"] == gated["Description"] == PROMPT
    assert (gated["seed"], gated["variant"], gated["steps"]) == ("5", "demo", "12")
    assert (gated["gate"], float(gated["threshold"])) == ("magcache", report["threshold"])
    assert gated["guidance"] == str(report["guidance"]) and gated["size"] == "128x128"
    assert gated["skips"] == str(report["skipped"])
    assert float(gated["ssim"]) == report["ssim"]
    assert float(gated["local_diff"]) == report["local_diff"]
    assert float(gated["ssimulacra2"]) == report["ssimulacra2"]
    assert float(gated["speedup"]) == report["speedup"]
    assert gated["speedup_label"] == report["speedup_label"]  # the full label, not its head
    assert gated["app_version"] == __version__ and gated["Software"].endswith(__version__)
    assert "quantize" not in gated and "loras" not in gated  # the demo: none of either
    assert json.loads(gated["teacache"])["gate"] == "magcache"
    # One builder: the window's export builds the same chunks from the same fields.
    same = export_metadata(
        prompt=PROMPT, seed=5, variant="demo", steps=12, threshold=report["threshold"],
        skips=report["skipped"], gate="magcache", ssim=report["ssim"],
        gated_seconds=report["gated_seconds"], vanilla_seconds=report["vanilla_seconds"],
        speedup=report["speedup"], speedup_label=report["speedup_label"],
        guidance=report["guidance"], size=(128, 128), local_diff=report["local_diff"],
        ssimulacra2=report["ssimulacra2"],
    )  # fmt: skip
    assert {k: v for k, v in gated.items() if k != "image"} == same
    assert {k: v for k, v in vanilla.items() if k != "image"} == same
