"""The application icon: the committed files, their generator, the spec, and the window icon.

The icon is drawn by packaging/make_icon.py into resources/icons/. These tests read the committed
PNG and .icns, re-run the generator into a temporary folder (it must reproduce them pixel for
pixel: deterministic, and the committed files are not stale), check the spec gives the .icns to
the macOS BUNDLE, and check the running app sets the PNG as its window icon, from a source tree
and from a frozen bundle's resources.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PIL.IcnsImagePlugin import IcnsFile
from test_packaging import _load, _run_spec

ROOT = Path(__file__).resolve().parents[2]
ICONS = ROOT / "resources" / "icons"
PNG = ICONS / "teacache-studio.png"
ICNS = ICONS / "teacache-studio.icns"
SPEC = ROOT / "packaging" / "teacache-studio.spec"

make_icon = _load("make_icon")


def _icns_entries(path: Path) -> dict[tuple[int, int, int], Image.Image]:
    """Every (width, height, scale) entry of an .icns, decoded to RGBA."""
    with path.open("rb") as handle:
        icns = IcnsFile(handle)
        return {size: icns.getimage(size).convert("RGBA") for size in icns.itersizes()}


def _pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGBA"))


# --- the committed files ------------------------------------------------------------------


def test_png_is_a_1024_rgba_tile_with_transparent_corners_and_an_opaque_centre() -> None:
    with Image.open(PNG) as image:
        assert image.format == "PNG"
        assert image.size == (1024, 1024)
        assert image.mode == "RGBA"
        alpha = _pixels(image)[..., 3]
    for corner in ((0, 0), (0, 1023), (1023, 0), (1023, 1023), (40, 40), (983, 983)):
        assert alpha[corner] == 0, corner
    assert (alpha[200:824, 200:824] == 255).all()  # well inside the 824 px tile
    assert (alpha[512, 102:922] == 255).all() and (alpha[102:922, 512] == 255).all()
    assert PNG.stat().st_size < 300_000


def test_icns_opens_with_pillow_and_holds_every_size_from_16_to_1024() -> None:
    with Image.open(ICNS) as image:
        assert image.format == "ICNS"
        image.load()
        assert image.size == (1024, 1024)  # Pillow opens the largest entry
    entries = _icns_entries(ICNS)
    assert (16, 16, 1) in entries  # a real 16 px entry (icp4), not only 16 pt @2x
    assert (512, 512, 2) in entries  # 1024 px
    for (width, height, scale), image in entries.items():
        assert image.size == (width * scale, height * scale)
    pixel_sizes = {image.width for image in entries.values()}
    assert pixel_sizes == {16, 32, 64, 128, 256, 512, 1024}
    assert ICNS.stat().st_size < 1_500_000


def test_icns_1024_entry_is_the_png() -> None:
    entries = _icns_entries(ICNS)
    with Image.open(PNG) as png:
        assert np.array_equal(_pixels(entries[(512, 512, 2)]), _pixels(png))


def test_small_entries_are_tiles_with_bright_computed_cells() -> None:
    # 16 and 32 px are drawn from their own pixel-aligned layout: still a tile, still amber cells.
    for size in ((16, 16, 1), (32, 32, 1)):
        pixels = _pixels(_icns_entries(ICNS)[size]).astype(int)
        assert pixels[0, 0, 3] == 0 and pixels[-1, -1, 3] == 0, size
        centre = size[0] // 2
        assert pixels[centre, centre, 3] == 255, size
        red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
        amber = (red > 200) & (green > 120) & (blue < 120) & (pixels[..., 3] == 255)
        assert amber.sum() >= size[0] // 4, size


# --- the generator ------------------------------------------------------------------------


def test_generator_reproduces_the_committed_icons(tmp_path: Path) -> None:
    png_path, icns_path = make_icon.write_icons(tmp_path)
    with Image.open(png_path) as fresh, Image.open(PNG) as committed:
        assert np.array_equal(_pixels(fresh), _pixels(committed)), (
            "resources/icons/ is stale: run `uv run python packaging/make_icon.py`"
        )
    fresh_entries = _icns_entries(icns_path)
    committed_entries = _icns_entries(ICNS)
    assert fresh_entries.keys() == committed_entries.keys()
    for size, image in fresh_entries.items():
        assert np.array_equal(_pixels(image), _pixels(committed_entries[size])), size


def test_rendering_twice_gives_the_same_pixels() -> None:
    assert np.array_equal(_pixels(make_icon.render(64)), _pixels(make_icon.render(64)))
    assert np.array_equal(_pixels(make_icon.render(16)), _pixels(make_icon.render(16)))


# --- the spec -----------------------------------------------------------------------------


def test_spec_gives_the_committed_icns_to_the_mac_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _run_spec(SPEC, "darwin", monkeypatch)
    ((_, bundle),) = recorder.of("BUNDLE")
    assert Path(bundle["icon"]) == ICNS
    assert ICNS.is_file()


def test_spec_gives_linux_executables_no_icon(monkeypatch: pytest.MonkeyPatch) -> None:
    # PyInstaller would only log "Ignoring icon" there; the window icon comes from Qt.
    recorder = _run_spec(SPEC, "linux", monkeypatch)
    assert all(kwargs.get("icon") is None for _, kwargs in recorder.of("EXE"))
    _, app_analysis = recorder.of("Analysis")[0]
    assert (str(PNG), "resources/icons") in app_analysis["datas"]  # shipped for the window icon


# --- the window icon ----------------------------------------------------------------------


def test_the_app_and_its_windows_get_the_icon(restored_app) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QWidget

    from app.ui import launch

    restored_app.setWindowIcon(QIcon())
    launch.configure_application(restored_app)
    assert not restored_app.windowIcon().isNull()
    assert restored_app.windowIcon().availableSizes()
    widget = QWidget()  # a top-level window without its own icon shows the application's
    assert not widget.windowIcon().isNull()
    widget.deleteLater()


def test_a_frozen_app_reads_the_icon_from_its_bundled_resources(
    restored_app,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from PySide6.QtGui import QIcon

    from app.ui import launch

    bundled = tmp_path / "bundle" / "resources" / "icons"
    bundled.mkdir(parents=True)
    shutil.copyfile(PNG, bundled / PNG.name)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "bundle"), raising=False)
    restored_app.setWindowIcon(QIcon())
    launch.configure_application(restored_app)
    assert not restored_app.windowIcon().isNull()

    # Without the file (an older bundle), the app starts anyway, with Qt's default icon.
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "empty"), raising=False)
    restored_app.setWindowIcon(QIcon())
    launch.configure_application(restored_app)
    assert restored_app.windowIcon().isNull()
