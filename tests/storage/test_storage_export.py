"""The captioned side-by-side export and a run's PNG text chunks (``app.storage.export``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFont
from storage_support import run_report

from app.storage.export import (
    caption_font,
    drawable,
    entry_captions,
    export_entry,
    export_side_by_side,
    missing_glyphs,
    png_path,
)
from app.storage.history import HistoryStore


def test_export_side_by_side(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history")
    entry = store.save(run_report())
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
    entry = HistoryStore(tmp_path).save(run_report(vanilla=False))
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
    entry = HistoryStore(tmp_path / "history").save(run_report())
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
    entry = HistoryStore(tmp_path).save(run_report())
    captions = entry_captions(entry)
    text = "".join(captions.values())
    assert "×" in text and "“" in text and "·" in text
    assert missing_glyphs(caption_font(15), text) == set()
    # The check can fail: Pillow's built-in font lacks '×', and the fallback then draws an 'x'.
    builtin = ImageFont.load_default(size=15)
    assert "×" in missing_glyphs(builtin, text)
    assert missing_glyphs(builtin, drawable(builtin, text)) == set()


def test_a_one_tile_export_is_wide_enough_for_its_footer(tmp_path: Path) -> None:
    entry = HistoryStore(tmp_path).save(run_report(vanilla=False))
    footer = entry_captions(entry)["footer"]
    out = export_entry(entry, tmp_path / "single.png")
    with Image.open(out) as image:
        width = image.size[0]
    assert width >= caption_font(15).getlength(footer) + 2 * 16


def test_the_export_is_three_tiles_wide_with_the_difference_and_a_wrapped_footer(
    tmp_path: Path,
) -> None:
    """The walk's export was 1537 px wide for two 384 px tiles: its width followed the footer's
    one line and ~700 px stayed empty; there was no difference panel (#27 item 20)."""
    from matplotlib import colormaps

    from app.metrics import difference_image

    entry = HistoryStore(tmp_path / "history").save(run_report())
    captions = entry_captions(entry)
    footer = captions["footer"] + "  ·  " + "  ·  ".join(["a long part of the footer"] * 8)
    gated, vanilla = entry.load_images()
    assert vanilla is not None
    out = export_side_by_side(
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
    assert png_path(Path("x.jpg")) == Path("x.png")
    assert png_path(Path("x.JPEG")) == Path("x.png")
    assert png_path(Path("render v1.2")) == Path("render v1.2.png")
    assert png_path(Path("x.png")) == Path("x.png")
    entry = HistoryStore(tmp_path / "history").save(run_report())
    assert export_entry(entry, tmp_path / "x.jpg") == tmp_path / "x.png"
    assert not (tmp_path / "x.jpg.png").exists()
