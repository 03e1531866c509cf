"""A run from a picture in the history: the report records the picture's path, hash and the
strength, the folder keeps the picture as the model saw it, and reopening finds it again (the
original where it still holds the recorded bytes, else the saved copy)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from PIL import Image

from app.engine.report import RunReport
from app.engine.request import make_request
from app.storage.export import report_metadata
from app.storage.history import HistoryStore, read_png
from tests.storage.storage_support import run_report


def _report(tmp_path: Path, strength: float = 0.4) -> tuple[RunReport, Path]:
    picture = tmp_path / "start.png"
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (96, 64, 3), dtype=np.uint8)).save(picture)
    request = make_request(
        "demo", "two red circles", seed=7, steps=10, images=[picture], strength=strength
    )
    return run_report(request=request), picture


def test_the_report_records_the_picture_and_the_strength(tmp_path: Path) -> None:
    report, picture = _report(tmp_path)
    data = report.to_json()
    assert data["strength"] == 0.4
    assert data["images"] == [
        {
            "path": str(picture.resolve()),
            "sha256": hashlib.sha256(picture.read_bytes()).hexdigest(),
            "width": 64,
            "height": 96,
        }
    ]
    again = RunReport.from_json(data, gated_image=report.gated.image)
    assert again.request.images == report.request.images
    assert again.request.strength == 0.4
    assert again.request.steps_left_out == report.request.steps_left_out == 6


def test_a_saved_run_keeps_the_picture_as_the_model_saw_it(tmp_path: Path) -> None:
    report, picture = _report(tmp_path)
    entry = HistoryStore(tmp_path / "history").save(report)
    saved = entry.folder / "input-0.png"
    assert read_png(saved).shape == (128, 128, 3)  # the run's size, as mflux resizes it
    assert entry.request.images == report.request.images
    assert entry.input_pictures() == (picture.resolve(),)  # the original still holds its bytes
    request = entry.to_request()
    assert request is not None and request.strength == 0.4
    assert request.images[0].sha256 == report.request.images[0].sha256


def test_reopening_falls_back_to_the_saved_copy_once_the_original_changed(tmp_path: Path) -> None:
    report, picture = _report(tmp_path)
    entry = HistoryStore(tmp_path / "history").save(report)
    Image.new("RGB", (64, 96), "white").save(picture)  # the user painted over it
    assert entry.input_pictures() == (entry.folder / "input-0.png",)
    picture.unlink()
    assert entry.input_pictures() == (entry.folder / "input-0.png",)
    request = entry.to_request()
    assert request is not None and request.images[0].path == str(entry.folder / "input-0.png")


def test_the_png_chunks_carry_the_pictures_hash_and_the_strength(tmp_path: Path) -> None:
    report, _ = _report(tmp_path)
    chunks = report_metadata(report)
    digest = report.request.images[0].sha256
    assert chunks["strength"] == "0.4"
    assert chunks["input_images"] == f"start.png (sha256 {digest})"
    entry = HistoryStore(tmp_path / "history").save(report)
    with Image.open(entry.gated_path) as image:
        assert dict(image.text)["input_images"].endswith(f"{digest})")  # type: ignore[attr-defined]


def test_a_run_from_noise_records_no_picture(tmp_path: Path) -> None:
    report = run_report()
    data = report.to_json()
    assert data["images"] == [] and data["strength"] is None
    entry = HistoryStore(tmp_path / "history").save(report)
    assert entry.input_pictures() == ()
    assert not list(entry.folder.glob("input-*.png"))
    assert "strength" not in report_metadata(report)
