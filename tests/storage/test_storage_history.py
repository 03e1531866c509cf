"""Run history: run.json holds the report once, atomic entries, round trips, corrupt entries
skipped (and left on disk) with one sentence."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from storage_support import run_report

from app import paths
from app.engine.report import RunReport
from app.engine.request import make_request
from app.storage import history as history_module
from app.storage.export import entry_captions, export_entry
from app.storage.history import (
    GATED_FILE,
    HISTORY_FORMAT,
    META_FILE,
    VANILLA_FILE,
    HistoryStore,
)

WARNINGS = ({"kind": "distilled", "message": "m", "details": {"array": np.float32(1.5)}},)


def test_default_root_is_the_user_history_folder() -> None:
    assert HistoryStore().root == paths.history_dir()


def test_save_then_read_back(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    report = run_report()
    saved = store.save(report, WARNINGS)
    [entry] = store.entries()
    assert entry.id == saved.id
    assert sorted(p.name for p in entry.folder.iterdir()) == [GATED_FILE, META_FILE, VANILLA_FILE]
    gated, vanilla = entry.load_images()
    assert np.array_equal(gated, report.gated.image)
    assert report.vanilla is not None and vanilla is not None
    assert np.array_equal(vanilla, report.vanilla.image)
    request = entry.request
    assert (request.prompt, request.seed, request.variant_id, request.steps) == (
        "two red circles",
        7,
        "demo",
        6,
    )
    assert request.threshold == pytest.approx(0.1)
    read = entry.report
    assert read.gated.skipped == 2
    assert read.gated.pattern == "FCSSCF"
    assert read.ssim == pytest.approx(0.9812)
    assert read.vanilla is not None
    assert (read.gated.loop_seconds, read.vanilla.loop_seconds) == (0.5, 0.75)
    assert report.speedup is not None and entry.speedup == pytest.approx(report.speedup)
    assert read.vanilla_cached is True
    assert read.gated.resumed_from == 1
    assert read.gated.steps == report.gated.steps
    assert read.vanilla.steps == report.vanilla.steps  # whole: predictions and all
    assert entry.to_request() == report.request
    assert "python" in entry.versions and "platform" in entry.versions
    assert entry.warning_messages == ("m",)
    assert entry.warnings[0]["details"] == {"array": 1.5}  # numpy, written as plain JSON


def test_run_json_holds_the_report_once(tmp_path: Path) -> None:
    report = run_report()
    entry = HistoryStore(tmp_path).save(report, WARNINGS)
    meta = json.loads((entry.folder / META_FILE).read_text())
    assert set(meta) == {"format", "id", "created", "warnings", "versions", "report"}
    assert meta["format"] == HISTORY_FORMAT == 3
    assert meta["id"] == entry.id and meta["created"] == entry.created
    assert meta["report"] == json.loads(json.dumps(report.to_json()))
    assert meta["warnings"] == [{"kind": "distilled", "message": "m", "details": {"array": 1.5}}]
    # Read back through the report's own from_json: nothing is copied field by field.
    assert entry.report.to_json() == report.to_json()


def test_a_run_without_vanilla_saves_only_the_gated_image(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    entry = store.save(run_report(vanilla=False))
    assert entry.vanilla_path is None
    assert entry.load_images()[1] is None
    assert entry.to_request() == replace(entry.request, compare_vanilla=False)


def test_entries_are_newest_first(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    now = datetime.now().astimezone()
    older = store.save(run_report(seed=1), created=now - timedelta(minutes=5))
    newer = store.save(run_report(seed=2), created=now)
    assert [e.id for e in store.entries()] == [newer.id, older.id]
    assert store.get(older.id) is not None and store.get("missing") is None


def test_same_instant_saves_keep_both(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    when = datetime.now().astimezone()
    a = store.save(run_report(), created=when)
    b = store.save(run_report(), created=when)
    assert a.id != b.id
    assert len(store.entries()) == 2


def _corrupt(folder: Path, how: str) -> None:
    if how == "bad-json":
        (folder / META_FILE).write_text("{oops")
    elif how == "no-meta":
        (folder / META_FILE).unlink()
    elif how == "no-image":
        (folder / GATED_FILE).unlink()
    elif how == "future-format":
        meta = json.loads((folder / META_FILE).read_text())
        meta["format"] = 99
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "missing-prompt":
        meta = json.loads((folder / META_FILE).read_text())
        del meta["report"]["prompt"]
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "bad-steps":
        meta = json.loads((folder / META_FILE).read_text())
        meta["report"]["steps_detail"][0]["decision"] = "teleported"
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "bad-vanilla-steps":
        meta = json.loads((folder / META_FILE).read_text())
        meta["report"]["vanilla_steps_detail"] = "none"
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "no-report":
        meta = json.loads((folder / META_FILE).read_text())
        del meta["report"]
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "not-an-object":
        (folder / META_FILE).write_text("[]")


@pytest.mark.parametrize(
    "how",
    [
        "bad-json",
        "no-meta",
        "no-image",
        "future-format",
        "missing-prompt",
        "bad-steps",
        "bad-vanilla-steps",
        "no-report",
        "not-an-object",
    ],
)
def test_corrupt_entries_are_skipped_with_a_warning(tmp_path: Path, how: str) -> None:
    store = HistoryStore(tmp_path)
    good = store.save(run_report(seed=1))
    bad = store.save(run_report(seed=2))
    _corrupt(bad.folder, how)
    before = {p.name: p.read_bytes() for p in bad.folder.iterdir()}
    assert [e.id for e in store.entries()] == [good.id]
    assert len(store.warnings) == 1 and bad.id in store.warnings[0]
    assert "\n" not in store.warnings[0]  # one sentence
    # Nothing the user made is lost: the unreadable folder is left exactly as it was.
    assert {p.name: p.read_bytes() for p in bad.folder.iterdir()} == before


def test_staging_folders_and_stray_files_are_ignored(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save(run_report())
    (tmp_path / ".staging-leftover").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    assert len(store.entries()) == 1
    assert store.warnings == []


def test_a_failed_save_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = HistoryStore(tmp_path)

    def broken(*_args: object, **_kwargs: object) -> bytes:
        raise OSError("disk full")

    monkeypatch.setattr(history_module, "png_bytes", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(run_report())
    assert list(tmp_path.iterdir()) == []
    assert store.entries() == []


def test_delete(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    entry = store.save(run_report())
    store.delete(entry)
    assert store.entries() == []


def _lora_report(tmp_path: Path) -> RunReport:
    import mlx.core as mx

    mx.save_safetensors(str(tmp_path / "ink.safetensors"), {"a.lora_A.weight": mx.zeros((1, 1))})
    request = make_request(
        "flux2-klein-base-4b", "a cat", seed=3, steps=6, threshold=0.1, size=(256, 256),
        loras=[(str(tmp_path / "ink.safetensors"), 0.8)],
    )  # fmt: skip
    return run_report(request=request)


def test_loras_round_trip_through_the_history_and_the_export(tmp_path: Path) -> None:
    report = _lora_report(tmp_path)
    entry = HistoryStore(tmp_path / "history").save(report)
    [read] = HistoryStore(tmp_path / "history").entries()
    assert read.request.loras == report.request.loras
    assert read.to_request() == report.request
    assert "LoRA ink.safetensors × 0.8" in entry_captions(read)["footer"]
    with Image.open(export_entry(entry, tmp_path / "out.png")) as image:
        text = dict(image.text)  # type: ignore[attr-defined]
    assert text["loras"] == "ink.safetensors × 0.8"
    assert json.loads(text["teacache"])["loras"] == [
        {"path": str((tmp_path / "ink.safetensors").resolve()), "scale": 0.8}
    ]


def test_an_entry_from_before_loras_still_loads_and_reproduces(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    saved = store.save(run_report())
    meta = json.loads((saved.folder / META_FILE).read_text())
    del meta["report"]["loras"]  # a report from before LoRA support has no such key
    (saved.folder / META_FILE).write_text(json.dumps(meta))
    [entry] = store.entries()
    assert entry.request.loras == ()
    assert entry.to_request() == run_report().request
    assert "LoRA" not in entry_captions(entry)["footer"]


def test_an_entry_whose_lora_file_is_gone_loads_but_does_not_reproduce(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path / "history").save(_lora_report(tmp_path))
    (tmp_path / "ink.safetensors").unlink()
    [read] = HistoryStore(tmp_path / "history").entries()
    assert read.request.loras == entry.request.loras and read.to_request() is None


def test_the_local_difference_is_saved_and_read_back(tmp_path: Path) -> None:
    from app.engine.report import measure_run
    from tests.fakes.engine import minimal_report

    report = minimal_report(make_request("demo", "a red star", steps=3))
    assert report.vanilla is not None
    lost = report.vanilla.image.copy()
    lost[8:24, 8:24] = (200, 30, 30)  # one 16 × 16 patch changed
    measured = measure_run(report.request, replace(report.gated, image=lost), report.vanilla)
    assert measured.local_diff is not None and measured.local_diff.value > 0.3
    entry = HistoryStore(tmp_path).save(measured)
    [read] = HistoryStore(tmp_path).entries()
    assert read.id == entry.id
    assert read.report.local_diff_value == pytest.approx(measured.local_diff.value)
    assert read.report_json["local_diff_window"] == {"x": 8, "y": 8, "size": 16}
