"""Draw TeaCache Studio's application icon and write it as a PNG and a macOS .icns.

    uv run python packaging/make_icon.py            # rewrites resources/icons/
    uv run python packaging/make_icon.py --out-dir /tmp/icons

The icon is drawn procedurally (no source artwork to keep in sync): a charcoal macOS-style
squircle tile on Apple's icon grid (an 824 px tile centred in 1024 px, with a soft drop shadow in
the transparent margin), a row of step cells like the app's timeline (filled amber cells ran the
transformer, hollow ones were skipped) above a teacup. Every shape is sampled on a supersampled
grid and box-filtered down, so edges are anti-aliased; nothing is random, so the output is the
same on every run. The small sizes (16 and 32 px) are drawn from a simpler layout, with fewer,
bolder cells, so they stay legible in Finder lists and the menu bar.

Pillow's ICNS writer has no 1x 16 px or 32 px entries, so this file writes the container itself
(the same PNG-in-ICNS entries ``iconutil`` writes); Pillow reads every entry back.

Standard library, numpy and Pillow only. Load it by path: ``packaging/`` is not a package.
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageFilter

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUTPUT_DIR = PROJECT_ROOT / "resources" / "icons"
PNG_NAME = "teacache-studio.png"
ICNS_NAME = "teacache-studio.icns"

GRID = 1024.0  # every coordinate below is in units of a 1024 px icon
CENTRE = GRID / 2
TILE_HALF = 412.0  # Apple's macOS icon grid: an 824 px tile, 100 px margin each side
SQUIRCLE_EXPONENT = 5.0  # a superellipse this round is close to Apple's continuous-corner tile
SUPERSAMPLE = 4  # samples per pixel along each axis at full size (16 per pixel)
SMALL_SIZE_LIMIT = 32  # this size and below use the simpler layout

# (type code, pixel size): the PNG entries iconutil writes for a full .iconset.
ICNS_ENTRIES: tuple[tuple[bytes, int], ...] = (
    (b"icp4", 16),  # 16 pt
    (b"icp5", 32),  # 32 pt
    (b"ic07", 128),  # 128 pt
    (b"ic08", 256),  # 256 pt
    (b"ic09", 512),  # 512 pt
    (b"ic10", 1024),  # 512 pt @2x
    (b"ic11", 32),  # 16 pt @2x
    (b"ic12", 64),  # 32 pt @2x
    (b"ic13", 256),  # 128 pt @2x
    (b"ic14", 512),  # 256 pt @2x
)
ICNS_SIZES: tuple[int, ...] = tuple(sorted({size for _, size in ICNS_ENTRIES}))

FloatArray = NDArray[np.float64]
Inside = Callable[[FloatArray, FloatArray], NDArray[np.bool_]]
Paint = Callable[[FloatArray, FloatArray], FloatArray]  # (x, y) -> (h, w, 3) RGB in 0..1


def rgb(hex_colour: str) -> FloatArray:
    value = int(hex_colour.lstrip("#"), 16)
    return np.array([(value >> 16) & 255, (value >> 8) & 255, value & 255], float) / 255.0


# Palette: charcoal tile, tea amber (computed cells, the tea), cream porcelain.
TILE_TOP = rgb("#41454d")
TILE_BOTTOM = rgb("#17191c")
AMBER_LIGHT = rgb("#ffc25a")
AMBER_DARK = rgb("#e08a12")
TEA_LIGHT = rgb("#c9791a")
TEA_DARK = rgb("#8a4a0c")
CREAM_LIGHT = rgb("#fbf5ea")
CREAM_DARK = rgb("#d8c7ad")
SAUCER_LIGHT = rgb("#e9dcc6")
SAUCER_DARK = rgb("#b9a68a")


# --- shapes: predicates on design coordinates ---------------------------------------------


def squircle(cx: float, cy: float, half: float, exponent: float = SQUIRCLE_EXPONENT) -> Inside:
    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        return np.abs((x - cx) / half) ** exponent + np.abs((y - cy) / half) ** exponent <= 1.0

    return inside


def rounded_rect(x0: float, y0: float, x1: float, y1: float, radius: float) -> Inside:
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx, hy = (x1 - x0) / 2 - radius, (y1 - y0) / 2 - radius

    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        qx = np.abs(x - cx) - hx
        qy = np.abs(y - cy) - hy
        outside = np.hypot(np.maximum(qx, 0.0), np.maximum(qy, 0.0))
        return outside + np.minimum(np.maximum(qx, qy), 0.0) <= radius

    return inside


def ellipse(cx: float, cy: float, rx: float, ry: float) -> Inside:
    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1.0

    return inside


def union(*shapes: Inside) -> Inside:
    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        result = shapes[0](x, y)
        for shape in shapes[1:]:
            result = result | shape(x, y)
        return result

    return inside


def minus(shape: Inside, hole: Inside) -> Inside:
    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        return shape(x, y) & ~hole(x, y)

    return inside


def clip(shape: Inside, x0: float, y0: float, x1: float, y1: float) -> Inside:
    def inside(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        return shape(x, y) & (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)

    return inside


def vertical(top: FloatArray, bottom: FloatArray, y0: float, y1: float) -> Paint:
    def paint(x: FloatArray, y: FloatArray) -> FloatArray:
        t = np.clip((y - y0) / (y1 - y0), 0.0, 1.0)[..., None]
        return top + (bottom - top) * t

    return paint


# --- the canvas: premultiplied RGBA in floats ---------------------------------------------


class Canvas:
    def __init__(self, size: int, supersample: int) -> None:
        self.size = size
        self.supersample = supersample
        self.scale = size / GRID
        self.colour = np.zeros((size, size, 3))  # premultiplied
        self.alpha = np.zeros((size, size))

    def _pixels(self, box: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
        x0, y0, x1, y1 = box
        return (
            max(0, int(np.floor(x0 * self.scale)) - 1),
            max(0, int(np.floor(y0 * self.scale)) - 1),
            min(self.size, int(np.ceil(x1 * self.scale)) + 1),
            min(self.size, int(np.ceil(y1 * self.scale)) + 1),
        )

    def coverage(self, shape: Inside, box: tuple[float, float, float, float]) -> FloatArray:
        """The fraction of each pixel inside ``shape`` (box-filtered supersamples), full size."""
        px0, py0, px1, py1 = self._pixels(box)
        n = self.supersample
        xs = (np.arange(px0 * n, px1 * n) + 0.5) / n / self.scale
        ys = (np.arange(py0 * n, py1 * n) + 0.5) / n / self.scale
        mask = shape(xs[None, :], ys[:, None]).astype(np.float64)
        full = np.zeros((self.size, self.size))
        full[py0:py1, px0:px1] = mask.reshape(py1 - py0, n, px1 - px0, n).mean(axis=(1, 3))
        return full

    def fill(
        self,
        shape: Inside,
        box: tuple[float, float, float, float],
        paint: Paint | FloatArray,
        opacity: float | FloatArray = 1.0,
    ) -> FloatArray:
        cover = self.coverage(shape, box)
        self.composite(cover * opacity, paint)
        return cover

    def composite(self, alpha: FloatArray, paint: Paint | FloatArray) -> None:
        """Source-over: ``paint`` (a colour or a gradient) through ``alpha``."""
        centres = (np.arange(self.size, dtype=np.float64) + 0.5) / self.scale
        if callable(paint):
            colour = paint(centres[None, :], centres[:, None])
        else:
            colour = np.broadcast_to(paint, (self.size, self.size, 3))
        a = alpha[..., None]
        self.colour = colour * a + self.colour * (1.0 - a)
        self.alpha = alpha + self.alpha * (1.0 - alpha)

    def image(self) -> Image.Image:
        alpha = np.clip(self.alpha, 0.0, 1.0)
        safe = np.where(alpha > 0.0, alpha, 1.0)[..., None]
        colour = np.clip(self.colour / safe, 0.0, 1.0)
        pixels = np.dstack([colour, alpha[..., None]])
        return Image.fromarray(np.round(pixels * 255.0).astype(np.uint8), "RGBA")


def blur(cover: FloatArray, radius: float) -> FloatArray:
    """A Gaussian-blurred copy of a coverage map (Pillow's blur, on 8 bits: enough for shadows)."""
    mask = Image.fromarray(np.round(cover * 255.0).astype(np.uint8), "L")
    return np.asarray(mask.filter(ImageFilter.GaussianBlur(radius)), dtype=np.float64) / 255.0


# --- the drawing ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the motif sits. The small layouts put every cell edge on a pixel edge."""

    cells: str  # one letter a step: C computed (filled), S skipped (hollow, or dim when tiny)
    cells_box: tuple[float, float, float, float]
    cell_gap: float
    cell_stroke: float  # 0: too small to hollow out, so a skipped cell is drawn dim instead
    cell_radius: float
    cup_top: float  # the rim's centre line
    cup_half_width: float
    cup_depth: float
    details: bool  # shadow, glow, highlights: lost (or muddy) below 64 px


FULL_LAYOUT = Layout(
    cells="CSCSSC",
    cells_box=(262.0, 236.0, 762.0, 420.0),
    cell_gap=24.0,
    cell_stroke=13.0,
    cell_radius=20.0,
    cup_top=508.0,
    cup_half_width=198.0,
    cup_depth=204.0,
    details=True,
)
# 32 px (32 design units a pixel): five 2 px cells, 1 px apart; outlines would blur together.
LAYOUT_32 = Layout(
    cells="CSCSC",
    cells_box=(288.0, 224.0, 736.0, 448.0),
    cell_gap=32.0,
    cell_stroke=0.0,
    cell_radius=0.0,
    cup_top=520.0,
    cup_half_width=210.0,
    cup_depth=200.0,
    details=False,
)
# 16 px (64 design units a pixel): three 2 px cells, 1 px apart; the skipped one is dim.
LAYOUT_16 = Layout(
    cells="CSC",
    cells_box=(256.0, 256.0, 768.0, 448.0),
    cell_gap=64.0,
    cell_stroke=0.0,
    cell_radius=0.0,
    cup_top=544.0,
    cup_half_width=208.0,
    cup_depth=200.0,
    details=False,
)


def layout_for(size: int) -> Layout:
    if size <= 16:
        return LAYOUT_16
    if size <= SMALL_SIZE_LIMIT:
        return LAYOUT_32
    return FULL_LAYOUT


def _draw_tile(canvas: Canvas, details: bool) -> None:
    lo, hi = CENTRE - TILE_HALF, CENTRE + TILE_HALF
    tile_box = (lo, lo, hi, hi)
    tile = squircle(CENTRE, CENTRE, TILE_HALF)
    cover = canvas.coverage(tile, tile_box)
    centres = (np.arange(canvas.size, dtype=np.float64) + 0.5) / canvas.scale
    if details:  # Apple's template shadow: straight down and soft, in the transparent margin
        shadow = blur(cover, 14.0 * canvas.scale)
        shift = round(12.0 * canvas.scale)
        shadow = np.roll(shadow, shift, axis=0)
        shadow[:shift] = 0.0
        canvas.composite(shadow * 0.32, np.zeros(3))
    canvas.composite(cover, vertical(TILE_TOP, TILE_BOTTOM, lo, hi))
    if not details:
        return
    # A warm glow behind the cup, as if lit by the tea.
    distance = np.hypot(centres[None, :] - CENTRE, centres[:, None] - 610.0) / 360.0
    canvas.composite(cover * 0.16 * np.clip(1.0 - distance, 0.0, 1.0) ** 2, AMBER_DARK)
    # A hairline light edge along the top of the tile, fading out towards the middle.
    rim = minus(tile, squircle(CENTRE, CENTRE + 2.0, TILE_HALF - 2.5))
    rim_cover = canvas.coverage(rim, tile_box)
    fade = np.clip(1.0 - (centres[:, None] - lo) / TILE_HALF, 0.0, 1.0)
    canvas.composite(rim_cover * 0.16 * fade, rgb("#ffffff"))


def _draw_cells(canvas: Canvas, layout: Layout) -> None:
    x0, y0, x1, y1 = layout.cells_box
    count = len(layout.cells)
    width = (x1 - x0 - layout.cell_gap * (count - 1)) / count
    amber = vertical(AMBER_LIGHT, AMBER_DARK, y0, y1)
    for index, kind in enumerate(layout.cells):
        left = x0 + index * (width + layout.cell_gap)
        box = (left, y0, left + width, y1)
        cell = rounded_rect(*box, layout.cell_radius)
        if kind == "C":
            canvas.fill(cell, box, amber)
        elif layout.cell_stroke <= 0.0:
            canvas.fill(cell, box, amber, opacity=0.38)
        else:
            # A hollow outline over a faint fill, so it still reads as a dim cell when tiny.
            s = layout.cell_stroke
            inner_radius = max(layout.cell_radius - s, 0.0)
            hole = rounded_rect(left + s, y0 + s, left + width - s, y1 - s, inner_radius)
            canvas.fill(cell, box, amber, opacity=0.10)
            canvas.fill(minus(cell, hole), box, amber, opacity=0.62)


def _draw_cup(canvas: Canvas, layout: Layout) -> None:
    top, half, depth = layout.cup_top, layout.cup_half_width, layout.cup_depth
    left, right, bottom = CENTRE - half, CENTRE + half, top + depth
    rim_ry = half * 0.16
    porcelain = vertical(CREAM_LIGHT, CREAM_DARK, top - rim_ry, bottom)

    # Saucer: a flat ellipse under the cup, with the cup's contact shadow on it.
    saucer_y, saucer_rx, saucer_ry = bottom + 6.0, half * 1.42, 34.0
    saucer_box = (
        CENTRE - saucer_rx,
        saucer_y - saucer_ry,
        CENTRE + saucer_rx,
        saucer_y + saucer_ry,
    )
    saucer_paint = vertical(SAUCER_LIGHT, SAUCER_DARK, saucer_y - saucer_ry, saucer_y + saucer_ry)
    canvas.fill(ellipse(CENTRE, saucer_y, saucer_rx, saucer_ry), saucer_box, saucer_paint)
    if layout.details:
        contact_rx, contact_ry = half * 0.55, 10.0
        contact_box = (CENTRE - contact_rx, bottom - 10, CENTRE + contact_rx, bottom + 14)
        contact = canvas.coverage(
            ellipse(CENTRE, bottom + 2.0, contact_rx, contact_ry), contact_box
        )
        canvas.composite(blur(contact, 8.0 * canvas.scale) * 0.30, TEA_DARK)

    # Handle: a ring on the right, behind the body.
    handle_cx, handle_cy = right - 6.0, top + depth * 0.36
    outer, inner = depth * 0.36, depth * 0.20
    ring = minus(
        ellipse(handle_cx, handle_cy, outer, outer), ellipse(handle_cx, handle_cy, inner, inner)
    )
    handle_box = (handle_cx - outer, handle_cy - outer, handle_cx + outer, handle_cy + outer)
    canvas.fill(clip(ring, CENTRE, top, GRID, GRID), handle_box, porcelain)

    # Body: the lower half of a superellipse bowl, topped by the rim's ellipse.
    def bowl(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
        inside = np.abs((x - CENTRE) / half) ** 2.6 + np.abs((y - top) / depth) ** 2.6 <= 1.0
        return inside & (y >= top)

    body = union(bowl, ellipse(CENTRE, top, half, rim_ry))
    body_box = (left, top - rim_ry, right, bottom)
    canvas.fill(body, body_box, porcelain)
    if layout.details:
        # A soft shade on the right of the bowl and a glint on the left: it reads as round.
        centres = (np.arange(canvas.size, dtype=np.float64) + 0.5) / canvas.scale
        across = np.clip((centres[None, :] - CENTRE) / half, -1.0, 1.0)
        shade = np.clip(across, 0.0, 1.0) ** 2 * 0.22
        canvas.composite(canvas.coverage(body, body_box) * shade, CREAM_DARK * 0.7)

    # The tea, seen over the rim.
    tea_rx, tea_ry = half - 16.0, rim_ry - 9.0
    tea = ellipse(CENTRE, top + 1.0, tea_rx, tea_ry)
    tea_box = (CENTRE - tea_rx, top - tea_ry, CENTRE + tea_rx, top + tea_ry + 2.0)
    canvas.fill(tea, tea_box, vertical(TEA_DARK, TEA_LIGHT, top - tea_ry, top + tea_ry))


def render(size: int = 1024) -> Image.Image:
    """The icon at ``size`` px, drawn at that size (never a resampled copy of another size)."""
    layout = layout_for(size)
    # Small sizes get more samples per pixel: 16 levels of coverage are too coarse there.
    supersample = max(SUPERSAMPLE, 256 // size)
    canvas = Canvas(size, supersample)
    _draw_tile(canvas, layout.details)
    _draw_cells(canvas, layout)
    _draw_cup(canvas, layout)
    return canvas.image()


def render_sizes(full: Image.Image | None = None) -> dict[int, Image.Image]:
    """Every size the .icns holds: small ones drawn directly, the rest resampled from 1024."""
    full = full if full is not None else render(1024)
    images: dict[int, Image.Image] = {}
    for size in ICNS_SIZES:
        if size <= SMALL_SIZE_LIMIT:
            images[size] = render(size)
        elif size == full.width:
            images[size] = full
        else:
            images[size] = full.resize((size, size), Image.Resampling.LANCZOS, reducing_gap=3.0)
    return images


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def icns_bytes(images: dict[int, Image.Image]) -> bytes:
    """An .icns container of PNG entries (big-endian ``type, length`` headers, then a TOC)."""
    streams = {size: _png_bytes(image) for size, image in images.items()}
    entries = [(code, streams[size]) for code, size in ICNS_ENTRIES]
    toc = b"".join(code + struct.pack(">I", 8 + len(data)) for code, data in entries)
    body = b"TOC " + struct.pack(">I", 8 + len(toc)) + toc
    body += b"".join(code + struct.pack(">I", 8 + len(data)) + data for code, data in entries)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def write_icons(out_dir: Path = OUTPUT_DIR) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    full = render(1024)
    png_path = out_dir / PNG_NAME
    png_path.write_bytes(_png_bytes(full))
    icns_path = out_dir / ICNS_NAME
    icns_path.write_bytes(icns_bytes(render_sizes(full)))
    return png_path, icns_path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out-dir", type=Path, default=OUTPUT_DIR, help="default: %(default)s")
    args = parser.parse_args(argv)
    for path in write_icons(args.out_dir):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
