"""``generate --image`` on the embedded demo end to end (the shipped sketch, its own codec), and
each bad picture input refused in one line, exit 2, before any work."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli.main import main
from app.paths import DEMO_SKETCH
from app.variants.schedule import steps_left_out

PROMPT = "a red circle at the left on a blue background"
SKETCH = DEMO_SKETCH


def _generate(out: Path, *extra: str) -> dict:
    code = main(["generate", "--variant", "demo", "--prompt", PROMPT, "--out", str(out), *extra])
    assert code == 0
    return json.loads((out / "report.json").read_text())


def test_generate_from_the_sketch_runs_the_steps_strength_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps, strength = 10, 0.6
    active = steps - steps_left_out(steps, strength)
    report = _generate(
        tmp_path / "from-sketch",
        *("--image", str(SKETCH), "--strength", str(strength)),
        *("--steps", str(steps), "--threshold", "0", "--seed", "5"),
    )
    assert report["strength"] == strength and report["steps"] == steps
    (picture,) = report["images"]
    assert picture["sha256"] == hashlib.sha256(SKETCH.read_bytes()).hexdigest()
    assert picture["path"] == str(SKETCH.resolve())
    assert report["steps_left_out"] == steps - active == 4
    # both passes ran the same steps from the same picture: threshold 0 is bit-exact
    assert report["pattern"] == "C" * active and len(report["steps_detail"]) == active
    assert report["max_abs_diff"] == 0.0
    assert report["gated_latents_sha256"] == report["vanilla_latents_sha256"]
    assert "the first 4 never run" in capsys.readouterr().out
    # the picture took part: the same seed from noise draws something else
    plain = _generate(tmp_path / "from-noise", "--steps", str(steps), "--threshold", "0")
    assert plain["vanilla_latents_sha256"] != report["vanilla_latents_sha256"]
    # the PNGs carry the picture's hash and the strength
    with Image.open(tmp_path / "from-sketch" / "gated.png") as image:
        chunks = dict(image.text)  # type: ignore[attr-defined]
    assert picture["sha256"] in chunks["input_images"] and chunks["strength"] == "0.6"
    teacache = json.loads(chunks["teacache"])
    assert teacache["input_images"][0]["sha256"] == picture["sha256"]
    assert "path" not in teacache["input_images"][0]  # a PNG does not tell the user's folders


def test_a_low_strength_keeps_the_picture_and_the_gate_still_skips(tmp_path: Path) -> None:
    """At strength 0.4 the result stays near the sketch; at the demo's default threshold the
    gate skips among the steps that run (engagement beside the quality figure)."""
    report = _generate(
        tmp_path / "out", "--image", str(SKETCH), "--strength", "0.4", "--seed", "5", "--resume"
    )
    active = 28 - steps_left_out(28, 0.4)
    assert len(report["pattern"]) == active == 12
    assert report["skipped"] > 0
    assert report["ssim"] >= 0.9
    sketch = np.asarray(Image.open(SKETCH).convert("RGB"), dtype=np.float32)
    vanilla = np.asarray(Image.open(tmp_path / "out" / "vanilla.png"), dtype=np.float32)
    noise = _generate(tmp_path / "noise", "--seed", "5", "--threshold", "0", "--steps", "8")
    from_noise = np.asarray(Image.open(tmp_path / "noise" / "vanilla.png"), dtype=np.float32)
    assert noise["skipped"] == 0
    # closer to the sketch than a picture drawn from noise is
    assert np.abs(vanilla - sketch).mean() < np.abs(from_noise - sketch).mean()


def _not_an_image(tmp_path: Path) -> str:
    path = tmp_path / "notes.png"
    path.write_text("hello")
    return str(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image", "{missing}"], "does not exist"),
        (["--image", "{text}"], "is not an image this app can read"),
        (["--image", str(SKETCH), "--strength", "1.5"], "strength must be above 0 and at most 1"),
        (["--image", str(SKETCH), "--strength", "0"], "strength must be above 0 and at most 1"),
        (["--strength", "0.5"], "give a picture or leave strength out"),
        (["--image", str(SKETCH), "--image", str(SKETCH)], "starts from one picture, got 2"),
        (
            ["--variant", "flux3-image-klein", "--image", str(SKETCH)],
            "cannot start from a picture",
        ),
    ],
)
def test_bad_picture_input_is_one_line_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    filled = [
        a.format(missing=tmp_path / "missing.png", text=_not_an_image(tmp_path)) for a in args
    ]
    variant = [] if "--variant" in filled else ["--variant", "demo"]
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", *variant, "--prompt", PROMPT, *filled,
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_compare_takes_the_picture_too(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code = main(
        ["compare", "--variant", "demo", "--prompt", PROMPT, "--image", str(SKETCH),
         "--strength", "0.5", "--steps", "8", "--thresholds", "0,0.1,0.2,0.3", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    document = json.loads((out / "compare.json").read_text())
    reports = [row["report"] for row in document["entries"]]
    assert document["request"]["strength"] == 0.5 and document["request"]["images"]
    active = 8 - steps_left_out(8, 0.5)
    assert all(len(r["pattern"]) == active and r["strength"] == 0.5 for r in reports)
    assert all(r["images"][0]["sha256"] for r in reports)
