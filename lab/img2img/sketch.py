"""The demo's starting picture: a crayon sketch in the demo's own world, drawn by hand in code.

``resources/demo/sketch.png`` (128 × 128) is what the README's image-to-image example, the window's
"Use the sample picture" and the tests start from: a red circle at the left, scribbled over a blue
scribbled ground on white paper, wobbly and uneven as a child's drawing is. The demo was trained on
clean procedural scenes (``lab/demo/scenes.py``), so the sketch is a picture it never saw that
still names things it knows: at a low strength the result keeps the scribbles and the wobble, at a
high one it redraws the scene its own way (``lab/img2img/strength.py`` measures it).

Deterministic: ``python -m lab.img2img.sketch`` writes the same bytes every time.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from app.paths import DEMO_SKETCH

SIZE = 128
SEED = 41
PAPER = (246, 242, 232)
BLUE_CRAYON = (38, 78, 214)
RED_CRAYON = (212, 36, 30)


def _wobbly_circle(
    rng: np.random.Generator, cx: float, cy: float, radius: float, points: int = 48
) -> list[tuple[float, float]]:
    """A hand-drawn circle: the radius wanders a little around the loop."""
    phase = rng.uniform(0, 2 * math.pi, 3)
    outline = []
    for i in range(points):
        a = 2 * math.pi * i / points
        wobble = 1 + 0.07 * math.sin(3 * a + phase[0]) + 0.04 * math.sin(5 * a + phase[1])
        r = radius * wobble + rng.normal(0, 0.6)
        outline.append((cx + r * math.cos(a), cy + r * math.sin(a)))
    return outline


def _scribble(
    draw: ImageDraw.ImageDraw,
    rng: np.random.Generator,
    inside: Image.Image,
    colour: tuple[int, int, int],
    spacing: float,
    width: int,
) -> None:
    """Crayon strokes at a slant across the whole canvas, kept where ``inside`` is white."""
    layer = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    strokes = ImageDraw.Draw(layer)
    offset = -SIZE
    while offset < 2 * SIZE:
        jitter = rng.normal(0, 1.2, 2)
        shade = tuple(int(np.clip(c + rng.normal(0, 10), 0, 255)) for c in colour)
        strokes.line(
            [(offset + jitter[0], 0), (offset + 0.45 * SIZE + jitter[1], SIZE)],
            fill=(*shade, 255),
            width=width,
        )
        offset += spacing * rng.uniform(0.7, 1.3)
    canvas = draw._image  # type: ignore[attr-defined]
    canvas.paste(layer, (0, 0), Image.composite(layer, Image.new("RGBA", layer.size), inside))


def draw_sketch(seed: int = SEED) -> Image.Image:
    rng = np.random.default_rng(seed)
    canvas = Image.new("RGBA", (SIZE, SIZE), (*PAPER, 255))
    draw = ImageDraw.Draw(canvas)
    circle = _wobbly_circle(rng, 40.0, 62.0, 21.0)
    ground = Image.new("L", (SIZE, SIZE), 255)
    ImageDraw.Draw(ground).polygon(circle, fill=0)
    _scribble(draw, rng, ground, BLUE_CRAYON, spacing=2.4, width=2)
    disc = Image.new("L", (SIZE, SIZE), 0)
    ImageDraw.Draw(disc).polygon(circle, fill=255)
    _scribble(draw, rng, disc, RED_CRAYON, spacing=2.2, width=2)
    draw.line([*circle, circle[0]], fill=(150, 20, 18, 255), width=2)  # the outline, drawn last
    return canvas.convert("RGB").filter(ImageFilter.SMOOTH)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw the demo's starting sketch.")
    parser.add_argument("--out", type=Path, default=DEMO_SKETCH)
    args = parser.parse_args(argv)
    draw_sketch().save(args.out, optimize=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
