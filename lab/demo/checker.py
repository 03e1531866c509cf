"""Automatic checker: does a picture show what its demo prompt asks for?

Per clause of the prompt it finds the pixels of the named colour, splits them into objects and
reads each object's shape from two geometric numbers; it also reads the background from the
border. Pure numpy/scipy/scikit-image, so it runs anywhere the app runs.

Colour: each pixel goes to the nearest palette prototype (every named colour and its texture
shade) *after* the best brightness scale in [0.7, 1.3], so the lighting gradient does not move a
pixel to another colour.

Shape, from the filled object mask: the ideal circle, square, triangle and star (the renderer's
own distance functions) are laid over the object — same centroid, same area, every rotation of
one symmetry period — and the best intersection-over-union names the shape.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import ndimage

from lab.demo.scenes import COLOURS, SHAPES, SIZE, Clause, PromptSpec, shade, signed_distance

_NAMES = list(COLOURS)
_PROTOTYPES = np.array(
    [COLOURS[n] for n in _NAMES] + [shade(COLOURS[n]) for n in _NAMES], dtype=np.float32
)
_PROTOTYPE_NAME = np.array(list(range(len(_NAMES))) * 2)
MIN_OBJECT_AREA = 40  # pixels; the smallest object drawn (small triangle) covers ≈ 110
_OPEN = np.ones((3, 3), dtype=bool)  # erosion by it removes 2-pixel outlines and fringes


def classify_pixels(image: np.ndarray) -> np.ndarray:
    """(H, W) colour index into ``list(COLOURS)`` for an (H, W, 3) image in [0, 1] or uint8."""
    pixels = _as_float(image).reshape(-1, 3)
    q = _PROTOTYPES  # (P, 3)
    scale = np.clip(pixels @ q.T / np.maximum((q * q).sum(1), 1e-6), 0.7, 1.3)  # (N, P)
    diff = pixels[:, None, :] - scale[:, :, None] * q[None, :, :]
    dist = (diff * diff).sum(-1)
    return _PROTOTYPE_NAME[dist.argmin(1)].reshape(image.shape[:2])


def _as_float(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype == np.uint8:
        return image.astype(np.float32) / 255.0
    return image.astype(np.float32)


@dataclass(frozen=True, slots=True)
class ObjectReading:
    shape: str
    area: int
    cx: float
    cy: float
    iou: float  # overlap with the best ideal shape
    scores: dict[str, float]  # best IoU per shape


def _template_area_factors() -> dict[str, float]:
    """Area of each shape at nominal radius 1 (measured on a fine grid)."""
    grid = (np.arange(400) + 0.5) / 100 - 2.0
    u, v = np.meshgrid(grid, grid)
    return {s: float((signed_distance(s, u, v, 1.0) < 0).mean() * 16.0) for s in SHAPES}


_AREA_FACTOR = _template_area_factors()
# Rotations tried per shape, over one symmetry period (a circle has none).
_ANGLES = {
    "circle": [0.0],
    "square": list(np.linspace(0, math.pi / 2, 9, endpoint=False)),
    "triangle": list(np.linspace(0, 2 * math.pi / 3, 12, endpoint=False)),
    "star": list(np.linspace(0, 2 * math.pi / 5, 8, endpoint=False)),
}


def classify_shape(mask: np.ndarray) -> ObjectReading:
    """Best-overlapping ideal shape: each candidate is drawn at the object's centroid, with the
    object's area, at every rotation of one symmetry period; the highest IoU wins."""
    mask = np.asarray(ndimage.binary_fill_holes(mask), dtype=bool)
    ys, xs = np.nonzero(mask)
    area = len(ys)
    cy, cx = ys.mean() + 0.5, xs.mean() + 0.5
    pad = 6
    y0, y1 = max(0, ys.min() - pad), min(mask.shape[0], ys.max() + pad + 1)
    x0, x1 = max(0, xs.min() - pad), min(mask.shape[1], xs.max() + pad + 1)
    window = mask[y0:y1, x0:x1]
    gy, gx = np.mgrid[y0:y1, x0:x1].astype(np.float32) + 0.5
    dx, dy = gx - cx, gy - cy
    best = ("circle", -1.0)
    scores = {}
    for shape in SHAPES:
        radius = math.sqrt(area / _AREA_FACTOR[shape])
        top = 0.0
        for angle in _ANGLES[shape]:
            ca, sa = math.cos(angle), math.sin(angle)
            u = ca * dx + sa * dy
            v = -sa * dx + ca * dy
            ideal = signed_distance(shape, u, v, radius) < 0
            inter = np.logical_and(ideal, window).sum()
            union = np.logical_or(ideal, window).sum()
            top = max(top, inter / max(union, 1))
        scores[shape] = top
        if top > best[1]:
            best = (shape, top)
    return ObjectReading(best[0], area, float(cx), float(cy), float(best[1]), scores)


def position_of(cx: float, cy: float) -> set[str]:
    """Every position word that describes a point (a corner is both left and top)."""
    out = set()
    if cx < 0.42 * SIZE:
        out.add("left")
    if cx > 0.58 * SIZE:
        out.add("right")
    if cy < 0.42 * SIZE:
        out.add("top")
    if cy > 0.58 * SIZE:
        out.add("bottom")
    if abs(cx - SIZE / 2) < 0.18 * SIZE and abs(cy - SIZE / 2) < 0.18 * SIZE:
        out.add("centre")
    return out


@dataclass(frozen=True, slots=True)
class ClauseVerdict:
    colour: bool | None  # None: the clause names no colour
    shape: bool
    position: bool | None
    count: bool | None
    objects: tuple[ObjectReading, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    background: bool | None
    clauses: tuple[ClauseVerdict, ...]

    @property
    def colour(self) -> bool:
        return self.background is not False and all(c.colour is not False for c in self.clauses)

    @property
    def shape(self) -> bool:
        return all(c.shape for c in self.clauses)

    @property
    def position(self) -> bool:
        return all(c.position is not False for c in self.clauses)

    @property
    def count(self) -> bool:
        return all(c.count is not False for c in self.clauses)

    @property
    def all(self) -> bool:
        return self.colour and self.shape and self.position and self.count

    def summary(self) -> dict[str, bool]:
        return {
            "colour": self.colour,
            "shape": self.shape,
            "position": self.position,
            "count": self.count,
            "all": self.all,
        }

    def as_dict(self) -> dict[str, object]:
        return {
            **self.summary(),
            "background": self.background,
            "clauses": [asdict(c) for c in self.clauses],
        }


def check(image: np.ndarray, prompt: PromptSpec) -> Verdict:
    labels = classify_pixels(image)
    background = None
    if prompt.background is not None:
        border = np.concatenate(
            [labels[:2].ravel(), labels[-2:].ravel(), labels[:, :2].ravel(), labels[:, -2:].ravel()]
        )
        found = _NAMES[int(np.bincount(border, minlength=len(_NAMES)).argmax())]
        background = found == prompt.background
    return Verdict(background, tuple(_check_clause(labels, c) for c in prompt.clauses))


def _check_clause(labels: np.ndarray, clause: Clause) -> ClauseVerdict:
    if clause.colour is None:
        return ClauseVerdict(None, True, None, None, ())
    raw = labels == _NAMES.index(clause.colour)
    # Opening by reconstruction: erosion drops thin outlines and fringes, propagation restores
    # the full outline of every object that survived (a plain opening blunts small tips).
    mask = ndimage.binary_propagation(ndimage.binary_erosion(raw, structure=_OPEN), mask=raw)
    labelled: Any = ndimage.label(mask)
    components, n = labelled[0], int(labelled[1])
    objects = []
    for index in range(1, n + 1):
        component = components == index
        if component.sum() >= MIN_OBJECT_AREA:
            objects.append(classify_shape(component))
    if not objects:
        return ClauseVerdict(
            False, False, False if clause.position else None, False if clause.count else None, ()
        )
    total = sum(o.area for o in objects)
    right_shape = sum(o.area for o in objects if o.shape == clause.shape)
    cx = sum(o.cx * o.area for o in objects) / total
    cy = sum(o.cy * o.area for o in objects) / total
    position = clause.position in position_of(cx, cy) if clause.position else None
    count = len(objects) == clause.count if clause.count else None
    return ClauseVerdict(True, right_shape * 2 > total, position, count, tuple(objects))


def score(verdicts: list[Verdict]) -> dict[str, float]:
    """Share of prompts followed, per criterion."""
    n = max(1, len(verdicts))
    keys = ("colour", "shape", "position", "count", "all")
    return {k: sum(v.summary()[k] for v in verdicts) / n for k in keys}
