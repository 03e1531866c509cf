"""Run history: atomic entries, round trips, corrupt entries skipped, side-by-side export."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFont

from app import paths
from app.engine.request import make_request
from app.gate import Decision, StepEvent
from app.storage import history as history_module
from app.storage.history import (
    GATED_FILE,
    META_FILE,
    VANILLA_FILE,
    HistoryStore,
    RunRecord,
    caption_font,
    drawable,
    entry_captions,
    export_entry,
    missing_glyphs,
)


def _steps(pattern: str, threshold: float = 0.1) -> tuple[StepEvent, ...]:
    letters = {
        "C": Decision.computed,
        "F": Decision.forced,
        "S": Decision.skipped,
        "N": Decision.numerical_miss,
    }
    n = len(pattern)
    return tuple(
        StepEvent(
            i,
            n,
            letters[c],
            None if i == 0 else 0.05 + i / 1000,
            0.04,
            0.08,
            threshold,
            0.01 * (i + 1),
        )
        for i, c in enumerate(pattern)
    )


def _record(seed: int = 7, created: datetime | None = None, vanilla: bool = True) -> RunRecord:
    rng = np.random.default_rng(seed)
    gated = rng.integers(0, 256, size=(32, 48, 3), dtype=np.uint8)
    request = make_request("demo", "two red circles", seed=seed, steps=6, threshold=0.1)
    record = RunRecord(
        request=request,
        gated_image=gated,
        vanilla_image=(255 - gated) if vanilla else None,
        gated_steps=_steps("FCSSCF"),
        vanilla_steps=_steps("CCCCCC"),
        gated_seconds=0.5,
        vanilla_seconds=0.75,
        ssim=0.9812,
        speedup=1.5,
        resumed_from=1,
        vanilla_cached=True,
        report={"engine": "test", "array": np.float32(1.5)},
        warnings=({"kind": "distilled", "message": "m", "details": {}},),
    )
    return record if created is None else replace(record, created=created)


def test_default_root_is_the_user_history_folder() -> None:
    assert HistoryStore().root == paths.history_dir()


def test_save_then_read_back(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    record = _record()
    saved = store.save(record)
    [entry] = store.entries()
    assert entry.id == saved.id
    assert sorted(p.name for p in entry.folder.iterdir()) == [GATED_FILE, META_FILE, VANILLA_FILE]
    gated, vanilla = entry.load_images()
    assert np.array_equal(gated, record.gated_image)
    assert record.vanilla_image is not None and vanilla is not None
    assert np.array_equal(vanilla, record.vanilla_image)
    assert (entry.prompt, entry.seed, entry.variant_id, entry.steps) == (
        "two red circles",
        7,
        "demo",
        6,
    )
    assert entry.threshold == pytest.approx(0.1)
    assert entry.skips == 2
    assert entry.pattern == "FCSSCF"
    assert entry.ssim == pytest.approx(0.9812)
    assert (entry.gated_seconds, entry.vanilla_seconds, entry.speedup) == (0.5, 0.75, 1.5)
    assert entry.result["vanilla_cached"] is True
    assert entry.result["resumed_from"] == 1
    assert entry.step_events("gated") == record.gated_steps
    assert entry.step_events("vanilla") == record.vanilla_steps
    assert entry.to_request() == record.request
    versions = entry.meta["versions"]
    assert "python" in versions and "platform" in versions
    assert entry.meta["report"]["array"] == 1.5


def test_a_run_without_vanilla_saves_only_the_gated_image(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    entry = store.save(_record(vanilla=False))
    assert entry.vanilla_path is None
    assert entry.load_images()[1] is None


def test_entries_are_newest_first(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    now = datetime.now().astimezone()
    older = store.save(_record(seed=1, created=now - timedelta(minutes=5)))
    newer = store.save(_record(seed=2, created=now))
    assert [e.id for e in store.entries()] == [newer.id, older.id]
    assert store.get(older.id) is not None and store.get("missing") is None


def test_same_instant_saves_keep_both(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    when = datetime.now().astimezone()
    a = store.save(_record(created=when))
    b = store.save(_record(created=when))
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
        del meta["request"]["prompt"]
        (folder / META_FILE).write_text(json.dumps(meta))
    elif how == "bad-steps":
        meta = json.loads((folder / META_FILE).read_text())
        meta["steps"]["gated"][0]["decision"] = "teleported"
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
        "not-an-object",
    ],
)
def test_corrupt_entries_are_skipped_with_a_warning(tmp_path: Path, how: str) -> None:
    store = HistoryStore(tmp_path)
    good = store.save(_record(seed=1))
    bad = store.save(_record(seed=2))
    _corrupt(bad.folder, how)
    assert [e.id for e in store.entries()] == [good.id]
    assert len(store.warnings) == 1 and bad.id in store.warnings[0]


def test_staging_folders_and_stray_files_are_ignored(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.save(_record())
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

    monkeypatch.setattr(history_module, "encode_png", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(_record())
    assert list(tmp_path.iterdir()) == []
    assert store.entries() == []


def test_delete(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    entry = store.save(_record())
    store.delete(entry)
    assert store.entries() == []


def test_export_side_by_side(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history")
    entry = store.save(_record())
    out = export_entry(entry, tmp_path / "out" / "pair.png")
    with Image.open(out) as image:
        width, height = image.size
        pixels = np.asarray(image.convert("RGB"))
    assert width > 2 * 384 and height > 384  # two tiles enlarged to ≥ 384 px on the short side
    # The gated tile (nearest-neighbour enlargement) sits at the top-left under its caption.
    scale = -(-384 // 32)
    tile = pixels[16 + 28 : 16 + 28 + 32 * scale : scale, 16 : 16 + 48 * scale : scale]
    assert np.array_equal(tile, entry.load_images()[0])


def test_export_of_a_run_without_vanilla_is_one_tile(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path).save(_record(vanilla=False))
    out = export_entry(entry, tmp_path / "single.png")
    with Image.open(out) as image:
        pixels = np.asarray(image.convert("RGB"))
    # No second tile: right of the first (16 + 48×scale px) the tile band is background only
    # (the canvas may be wider, for the footer).
    scale = -(-384 // 32)
    first_end = 16 + 48 * scale
    band = pixels[16 + 28 : 16 + 28 + 32 * scale, first_end + 1 :]
    assert band.size == 0 or bool((band == 250).all())


def test_export_adds_the_extension_and_carries_the_runs_numbers(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path / "history").save(_record())
    out = export_entry(entry, tmp_path / "typed without extension")
    assert out == tmp_path / "typed without extension.png" and out.is_file()
    assert not (tmp_path / "typed without extension").exists()
    assert export_entry(entry, tmp_path / "a.PNG") == tmp_path / "a.PNG"  # kept as typed
    with Image.open(out) as image:
        assert image.format == "PNG"
        text = dict(image.text)  # type: ignore[attr-defined]
    assert text["prompt"] == text["Description"] == "two red circles"
    assert (text["seed"], text["variant"], text["steps"], text["threshold"]) == (
        "7",
        "demo",
        "6",
        "0.1",
    )
    assert text["skips"] == "2" and text["ssim"] == "0.9812"
    assert (text["gated_seconds"], text["vanilla_seconds"]) == ("0.5", "0.75")
    assert float(text["speedup"]) == pytest.approx(entry.speedup)
    assert json.loads(text["teacache"])["seed"] == 7


def test_export_captions_draw_every_glyph(tmp_path: Path) -> None:
    """The '×' of the speedup drew as a missing-glyph box in Pillow's built-in font."""
    entry = HistoryStore(tmp_path).save(_record())
    captions = entry_captions(entry)
    text = "".join(captions.values())
    assert "×" in text and "“" in text and "·" in text
    assert missing_glyphs(caption_font(15), text) == set()
    # The check can fail: Pillow's built-in font lacks '×', and the fallback then draws an 'x'.
    builtin = ImageFont.load_default(size=15)
    assert "×" in missing_glyphs(builtin, text)
    assert missing_glyphs(builtin, drawable(builtin, text)) == set()


def test_a_one_tile_export_is_wide_enough_for_its_footer(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path).save(_record(vanilla=False))
    footer = entry_captions(entry)["footer"]
    out = export_entry(entry, tmp_path / "single.png")
    with Image.open(out) as image:
        width = image.size[0]
    assert width >= caption_font(15).getlength(footer) + 2 * 16


def _lora_record(tmp_path: Path) -> RunRecord:
    import mlx.core as mx

    mx.save_safetensors(str(tmp_path / "ink.safetensors"), {"a.lora_A.weight": mx.zeros((1, 1))})
    request = make_request(
        "flux2-klein-base-4b", "a cat", seed=3, steps=6, threshold=0.1, size=(256, 256),
        loras=[(str(tmp_path / "ink.safetensors"), 0.8)],
    )  # fmt: skip
    return replace(_record(), request=request)


def test_loras_round_trip_through_the_history_and_the_export(tmp_path: Path) -> None:
    record = _lora_record(tmp_path)
    entry = HistoryStore(tmp_path / "history").save(record)
    [read] = HistoryStore(tmp_path / "history").entries()
    assert read.loras == record.request.loras
    assert read.to_request() == record.request
    assert "LoRA ink.safetensors × 0.8" in entry_captions(read)["footer"]
    with Image.open(export_entry(entry, tmp_path / "out.png")) as image:
        text = dict(image.text)  # type: ignore[attr-defined]
    assert text["loras"] == "ink.safetensors × 0.8"
    assert json.loads(text["teacache"])["loras"] == [
        {"path": str((tmp_path / "ink.safetensors").resolve()), "scale": 0.8}
    ]


def test_an_entry_from_before_loras_still_loads_and_reproduces(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    saved = store.save(_record())
    meta = json.loads((saved.folder / META_FILE).read_text())
    del meta["request"]["loras"]  # what an older build wrote
    (saved.folder / META_FILE).write_text(json.dumps(meta))
    [entry] = store.entries()
    assert entry.loras == ()
    assert entry.to_request() == _record().request
    assert "LoRA" not in entry_captions(entry)["footer"]


def test_an_entry_whose_lora_file_is_gone_loads_but_does_not_reproduce(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path / "history").save(_lora_record(tmp_path))
    (tmp_path / "ink.safetensors").unlink()
    [read] = HistoryStore(tmp_path / "history").entries()
    assert read.loras == entry.loras and read.to_request() is None


def test_the_local_difference_is_saved_and_read_back(tmp_path: Path) -> None:
    from app.engine.report import measure_run
    from tests.fakes.engine import minimal_report

    report = minimal_report(make_request("demo", "a red star", steps=3))
    assert report.vanilla is not None
    lost = report.vanilla.image.copy()
    lost[8:24, 8:24] = (200, 30, 30)  # one 16 × 16 patch changed
    measured = measure_run(report.request, replace(report.gated, image=lost), report.vanilla)
    assert measured.local_diff is not None and measured.local_diff.value > 0.3
    entry = HistoryStore(tmp_path).save(RunRecord.from_report(measured))
    [read] = HistoryStore(tmp_path).entries()
    assert read.id == entry.id
    assert read.local_diff == pytest.approx(measured.local_diff.value)
    assert read.meta["report"]["local_diff_window"] == {"x": 8, "y": 8, "size": 16}


def test_the_export_is_three_tiles_wide_with_the_difference_and_a_wrapped_footer(
    tmp_path: Path,
) -> None:
    """The walk's export was 1537 px wide for two 384 px tiles: its width followed the footer's
    one line and ~700 px stayed empty; there was no difference panel (#27 item 20)."""
    from matplotlib import colormaps

    from app.metrics import difference_image

    entry = HistoryStore(tmp_path / "history").save(_record())
    captions = entry_captions(entry)
    footer = captions["footer"] + "  ·  " + "  ·  ".join(["a long part of the footer"] * 8)
    gated, vanilla = entry.load_images()
    assert vanilla is not None
    out = history_module.export_side_by_side(
        tmp_path / "pair.png",
        gated,
        vanilla,
        gated_caption=captions["gated_caption"],
        vanilla_caption=captions["vanilla_caption"],
        footer=footer,
    )
    scale = -(-384 // 32)
    tile_w, tile_h = 48 * scale, 32 * scale
    with Image.open(out) as image:
        width = image.size[0]
        pixels = np.asarray(image.convert("RGB"))
    assert width == 16 + 3 * (tile_w + 16)  # the tiles set the width, not the footer
    assert caption_font(15).getlength(footer) > width  # so the footer had to wrap
    # Every footer line sits inside the canvas: text reaches neither edge's padding.
    below = pixels[16 + 28 + tile_h + 16 :]
    assert (below[:, :16] == 250).all() and (below[:, width - 14 :] == 250).all()
    assert (below != 250).any(axis=2).any(axis=1).sum() > 22  # more than one line of text
    # The third tile is the difference, coloured as the window draws it.
    x3 = 16 + 2 * (tile_w + 16)
    tile = pixels[16 + 28 : 16 + 28 + tile_h : scale, x3 : x3 + tile_w : scale]
    diff = difference_image(gated, vanilla)
    expected = colormaps["viridis"](diff / max(8.0, float(diff.max())), bytes=True)[..., :3]
    assert np.array_equal(tile, expected)


def test_a_name_with_another_image_extension_becomes_a_png_name(tmp_path: Path) -> None:
    """Typing x.jpg gave x.jpg.png (#27 item 20)."""
    from app.storage.history import png_path

    assert png_path(Path("x.jpg")) == Path("x.png")
    assert png_path(Path("x.JPEG")) == Path("x.png")
    assert png_path(Path("render v1.2")) == Path("render v1.2.png")
    assert png_path(Path("x.png")) == Path("x.png")
    entry = HistoryStore(tmp_path / "history").save(_record())
    assert export_entry(entry, tmp_path / "x.jpg") == tmp_path / "x.png"
    assert not (tmp_path / "x.jpg.png").exists()
