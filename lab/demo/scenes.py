"""Procedural 128×128 scenes, their captions and their rasteriser: the training data of the demo
model (research code; the app itself only parses prompts, ``app.demo.prompt``).

A scene is one or two *clauses* ("two small striped red stars at the left") over a coloured
background with a lighting gradient. Objects are drawn from signed distance functions with one pixel
of anti-aliasing, so the same rasteriser runs on numpy (tests, checker validation, codec fitting)
and on MLX (batched on the GPU during training): :func:`rasterize` takes the array module.

Everything is deterministic from a seed: ``scene_from_seed(seed)`` always gives the same scene and
``render(scene)`` the same pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.demo.prompt import *  # noqa: F403 (re-exported: the vocabulary and prompt types are part of a scene)
from app.demo.prompt import (
    COLOURS,
    MAX_OBJECTS,
    NUMBER_WORDS,
    POSITIONS,
    SHAPES,
    SIZE,
    SIZES,
    TEXTURES,
    Clause,
    PromptSpec,
    _plural,
)

_SIZE_RADIUS = {"small": (8.0, 11.0), "large": (15.0, 19.0)}
_SHAPE_INDEX = {name: i for i, name in enumerate(SHAPES)}
_TEXTURE_INDEX = {name: i for i, name in enumerate(TEXTURES)}


def shade(colour: tuple[float, float, float]) -> tuple[float, float, float]:
    """The texture colour of an object: towards black for light colours, towards white for dark
    ones, so the pattern stays visible and still reads as the same colour family."""
    r, g, b = colour
    lum = 0.299 * r + 0.587 * g + 0.114 * b
    if lum > 0.9:
        k, target = 0.35, 0.0  # white → light grey
    elif lum > 0.4:
        k, target = 0.5, 0.0
    elif lum < 0.1:
        k, target = 0.35, 1.0  # black → dark grey
    else:
        k, target = 0.5, 1.0
    return (r + (target - r) * k, g + (target - g) * k, b + (target - b) * k)


def outline_colour_for(colour: str) -> str:
    r, g, b = COLOURS[colour]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.4 else "white"


@dataclass(frozen=True, slots=True)
class PlacedObject:
    shape: str
    colour: str
    cx: float
    cy: float
    radius: float
    angle: float  # radians
    texture: str
    texture_period: float
    texture_angle: float
    outline: str | None  # outline colour name


@dataclass(frozen=True, slots=True)
class Scene:
    clauses: tuple[Clause, ...]
    background: str
    objects: tuple[PlacedObject, ...]
    light_angle: float
    light_strength: float
    seed: int | None = None


# --------------------------------------------------------------------------------------------
# Sampling


def _region_axis(position: str) -> str:
    return "y" if position in ("left", "right") else "x"


def _place_clause(
    rng: np.random.Generator, clause: Clause, radius: float
) -> list[tuple[float, float]]:
    assert clause.count is not None and clause.position is not None
    n = clause.count
    margin = radius + 3.0
    lo, hi = margin, SIZE - margin
    # Offset across the spread axis: near the named edge (or the middle for centre).
    near = (max(margin, 18.0), 40.0)
    if clause.position == "left":
        fixed = rng.uniform(*near)
    elif clause.position == "right":
        fixed = SIZE - rng.uniform(*near)
    elif clause.position == "top":
        fixed = rng.uniform(*near)
    elif clause.position == "bottom":
        fixed = SIZE - rng.uniform(*near)
    else:
        fixed = SIZE / 2 + rng.uniform(-5.0, 5.0)
    if clause.position == "centre":
        spacing = 2 * radius + rng.uniform(4.0, 8.0)
        start = SIZE / 2 - spacing * (n - 1) / 2 + rng.uniform(-5.0, 5.0)
        along = [start + spacing * i for i in range(n)]
    elif n == 1:
        along = [rng.uniform(lo, hi)]
    else:
        slot = (hi - lo) / n
        jitter = max(0.0, (slot - (2 * radius + 3.0)) / 2)
        along = [lo + slot * (i + 0.5) + rng.uniform(-jitter, jitter) for i in range(n)]
    if _region_axis(clause.position) == "y":
        return [(fixed, a) for a in along]
    return [(a, fixed) for a in along]


def _sample_clause(rng: np.random.Generator, colour: str, position: str) -> Clause:
    size = SIZES[int(rng.integers(len(SIZES)))]
    max_count = 3 if size == "small" else 2
    weights = np.array([0.45, 0.3, 0.25][:max_count])
    count = int(rng.choice(np.arange(1, max_count + 1), p=weights / weights.sum()))
    texture = TEXTURES[int(rng.choice(4, p=[0.4, 0.2, 0.2, 0.2]))]
    return Clause(
        shape=SHAPES[int(rng.integers(len(SHAPES)))],
        colour=colour,
        count=count,
        size=size,
        position=position,
        texture=texture,
        outlined=bool(rng.random() < 0.25),
    )


def sample_scene(rng: np.random.Generator, seed: int | None = None) -> Scene:
    """One random scene: 1–2 clauses of 1–3 objects, distinct colours and positions."""
    for _ in range(200):
        names = list(COLOURS)
        background = names[int(rng.integers(len(names)))]
        n_clauses = 1 if rng.random() < 0.4 else 2
        others = [c for c in names if c != background]
        colours = [others[i] for i in rng.permutation(len(others))[:n_clauses]]
        positions = [POSITIONS[i] for i in rng.permutation(len(POSITIONS))[:n_clauses]]
        clauses = [_sample_clause(rng, c, p) for c, p in zip(colours, positions, strict=True)]
        used = {background, *colours}
        objects: list[PlacedObject] = []
        ok = True
        for index, clause in enumerate(clauses):
            assert clause.size is not None and clause.colour is not None
            assert clause.shape is not None and clause.texture is not None
            base_r = float(rng.uniform(*_SIZE_RADIUS[clause.size]))
            outline = outline_colour_for(clause.colour) if clause.outlined else None
            if outline in used:
                outline = None  # an outline in a named colour would confuse the checker
            period = float(rng.uniform(6.0, 8.0))
            tex_angle = float(rng.choice([0.0, 0.25, 0.5, 0.75]) * math.pi)
            # Every shape tilts a little (±20°) about its upright pose; stars used to turn freely
            # and a model this small then drew the average over rotations, a filled blob.
            angle_span = {"circle": 0.0, "square": 0.35, "triangle": 0.35, "star": 0.35}
            for cx, cy in _place_clause(rng, clause, base_r):
                objects.append(
                    PlacedObject(
                        shape=clause.shape,
                        colour=clause.colour,
                        cx=float(cx),
                        cy=float(cy),
                        radius=base_r + float(rng.uniform(-0.7, 0.7)),
                        angle=float(rng.uniform(-1, 1) * angle_span[clause.shape]),
                        texture=clause.texture,
                        texture_period=period,
                        texture_angle=tex_angle,
                        outline=outline,
                    )
                )
            clauses[index] = Clause(**{**_clause_dict(clause), "outlined": outline is not None})
        for i, a in enumerate(objects):
            for b in objects[i + 1 :]:
                if a.colour == b.colour:
                    continue
                # Objects of different clauses may touch and overlap a little, never hide.
                if math.hypot(a.cx - b.cx, a.cy - b.cy) < 0.85 * (a.radius + b.radius):
                    ok = False
        if ok:
            return Scene(
                clauses=tuple(clauses),
                background=background,
                objects=tuple(objects),
                light_angle=float(rng.uniform(0, 2 * math.pi)),
                light_strength=float(rng.uniform(0.05, 0.18)),
                seed=seed,
            )
    raise RuntimeError("could not place a scene")  # pragma: no cover - 200 tries never fail


def _clause_dict(clause: Clause) -> dict[str, Any]:
    return {name: getattr(clause, name) for name in Clause.__slots__}  # type: ignore[attr-defined]


def scene_from_seed(seed: int) -> Scene:
    return sample_scene(np.random.default_rng(seed), seed=seed)


# --------------------------------------------------------------------------------------------
# Captions


def _clause_text(clause: Clause, rng: np.random.Generator | None) -> str:
    """Full caption when ``rng`` is None; otherwise optional words are sometimes left out (the
    model then learns to fill them in, so short prompts such as "a red star" work)."""

    def keep(p_drop: float) -> bool:
        return rng is None or rng.random() >= p_drop

    count = clause.count or 1
    words: list[str] = []
    if clause.size and keep(0.1):
        words.append(clause.size)
    if clause.texture and clause.texture != "plain":
        words.append(clause.texture)
    elif clause.texture == "plain" and rng is not None and rng.random() < 0.15:
        words.append("plain")
    if clause.outlined:
        words.append("outlined")
    if clause.colour:
        words.append(clause.colour)
    assert clause.shape is not None
    words.append(clause.shape if count == 1 else _plural(clause.shape))
    if count == 1:
        lead = "one" if rng is not None and rng.random() < 0.2 else _article(words[0])
    else:
        lead = NUMBER_WORDS[count]
    text = " ".join([lead, *words])
    if clause.position and keep(0.1):
        text += f" at the {clause.position}"
    return text


def _article(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"


def caption(scene: Scene | PromptSpec, rng: np.random.Generator | None = None) -> str:
    text = " and ".join(_clause_text(c, rng) for c in scene.clauses)
    if scene.background and (rng is None or rng.random() >= 0.1):
        text += f" on a {scene.background} background"
    return text


def prompt_of(scene: Scene) -> PromptSpec:
    return PromptSpec(clauses=scene.clauses, background=scene.background, text=caption(scene))


# --------------------------------------------------------------------------------------------
# Rendering

OBJECT_FIELDS = 14  # per-object row in the packed array, see pack_scenes


def pack_scenes(scenes: list[Scene]) -> tuple[np.ndarray, np.ndarray]:
    """Scenes as arrays for :func:`rasterize`.

    objects (B, MAX_OBJECTS, 14): active, shape index, cx, cy, radius, angle, r, g, b, texture
    index, texture period, texture angle, outline grey level, outlined flag.
    background (B, 6): r, g, b, light direction x, y, light strength."""
    objects = np.zeros((len(scenes), MAX_OBJECTS, OBJECT_FIELDS), dtype=np.float32)
    # Empty slots get harmless geometry (far away, non-zero radius and period): their coverage is
    # zero, and no division by zero can put a NaN into the picture.
    objects[:, :, 2:4] = -1000.0
    objects[:, :, 4] = 1.0
    objects[:, :, 10] = 7.0
    background = np.zeros((len(scenes), 6), dtype=np.float32)
    for b, scene in enumerate(scenes):
        background[b, :3] = COLOURS[scene.background]
        background[b, 3] = math.cos(scene.light_angle)
        background[b, 4] = math.sin(scene.light_angle)
        background[b, 5] = scene.light_strength
        for k, o in enumerate(scene.objects):
            objects[b, k] = (
                1.0,
                _SHAPE_INDEX[o.shape],
                o.cx,
                o.cy,
                o.radius,
                o.angle,
                *COLOURS[o.colour],
                _TEXTURE_INDEX[o.texture],
                o.texture_period,
                o.texture_angle,
                COLOURS[o.outline][0] if o.outline else 0.0,  # outlines are black or white
                1.0 if o.outline else 0.0,
            )
    return objects, background


def rasterize(objects: Any, background: Any, xp: Any = np) -> Any:
    """Render packed scenes to (B, SIZE, SIZE, 3) in [0, 1]; ``xp`` is numpy or mlx.core.

    Only operations both libraries share are used, so the GPU training batches and the numpy
    renders are the same pictures (equal to float32 rounding)."""
    coords = xp.arange(SIZE).astype(xp.float32) + 0.5
    px = coords.reshape(1, 1, SIZE)
    py = coords.reshape(1, SIZE, 1)
    bg = background
    light_x = bg[:, 3].reshape(-1, 1, 1)
    light_y = bg[:, 4].reshape(-1, 1, 1)
    strength = bg[:, 5].reshape(-1, 1, 1)
    # Lighting gradient across the canvas: brighter towards the light, multiplicative plus a
    # small additive term so black and white backgrounds show it too.
    proj = ((px - SIZE / 2) * light_x + (py - SIZE / 2) * light_y) / (SIZE / 2)
    gain = 1.0 + strength * proj
    planes = [
        xp.clip(bg[:, c].reshape(-1, 1, 1) * gain + 0.25 * strength * proj, 0.0, 1.0)
        for c in range(3)
    ]
    for k in range(MAX_OBJECTS):
        o = objects[:, k, :]

        def col(i: int, o: Any = o) -> Any:
            return o[:, i].reshape(-1, 1, 1)

        active, kind, cx, cy, r, angle = (col(i) for i in range(6))
        dx = px - cx
        dy = py - cy
        ca, sa = xp.cos(angle), xp.sin(angle)
        u = ca * dx + sa * dy
        v = -sa * dx + ca * dy
        d = xp.where(
            kind < 0.5,
            signed_distance("circle", u, v, r, xp),
            xp.where(
                kind < 1.5,
                signed_distance("square", u, v, r, xp),
                xp.where(
                    kind < 2.5,
                    signed_distance("triangle", u, v, r, xp),
                    signed_distance("star", u, v, r, xp),
                ),
            ),
        )
        outlined = col(13)
        cover = xp.clip(0.5 - d, 0.0, 1.0) * active
        inner = xp.clip(0.5 - (d + 2.0 * outlined), 0.0, 1.0) * active
        pattern = _texture(col(9), col(10), col(11), u, v, px, py, dx, dy, xp)
        shading = 1.0 + 0.08 * (dx * light_x + dy * light_y) / r
        for c in range(3):
            base = col(6 + c)
            base_shade = _shade_channel(col(6), col(7), col(8), c, xp)
            fill = xp.clip((base * (1 - pattern) + base_shade * pattern) * shading, 0.0, 1.0)
            line = col(12)  # outline grey level (black or white)
            planes[c] = planes[c] * (1 - cover) + line * cover
            planes[c] = planes[c] * (1 - inner) + fill * inner
    return xp.stack(planes, axis=-1)


def signed_distance(shape: str, u: Any, v: Any, r: Any, xp: Any = np) -> Any:
    """Distance (pixels, negative inside) from object-local coordinates to the shape's edge; ``r``
    is the object's nominal radius (the circle's radius)."""
    if shape == "circle":
        return xp.sqrt(u * u + v * v) - r
    if shape == "square":
        return xp.maximum(xp.abs(u), xp.abs(v)) - 0.8 * r
    if shape == "triangle":  # equilateral, pointing up, centred on its incentre
        edges = xp.maximum(xp.maximum(v, 0.8660254 * u - 0.5 * v), -0.8660254 * u - 0.5 * v)
        return edges - 0.575 * r
    if shape == "star":
        return _star_distance(u, v, 1.25 * r, xp)
    raise ValueError(shape)


def _shade_channel(r: Any, g: Any, b: Any, channel: int, xp: Any) -> Any:
    lum = 0.299 * r + 0.587 * g + 0.114 * b
    half, third = (
        xp.full(lum.shape, 0.5, dtype=xp.float32),
        xp.full(lum.shape, 0.35, dtype=xp.float32),
    )
    k = xp.where(lum > 0.9, third, xp.where(lum > 0.4, half, xp.where(lum < 0.1, third, half)))
    target = (lum <= 0.4).astype(xp.float32)
    value = (r, g, b)[channel]
    return value + (target - value) * k


def _star_distance(u: Any, v: Any, outer: float | Any, xp: Any) -> Any:
    """Signed distance (to the edge lines) of a five-pointed star, tips at angle 0 (up)."""
    inner = 0.45 * outer
    sector = 2 * math.pi / 5
    theta = xp.arctan2(u, -v)
    a = xp.abs(xp.remainder(theta + sector / 2, sector) - sector / 2)
    rho = xp.sqrt(u * u + v * v)
    qx = rho * xp.cos(a)
    qy = rho * xp.sin(a)
    c, s = math.cos(math.pi / 5), math.sin(math.pi / 5)
    # Edge from the tip (outer, 0) to the inner corner (inner·c, inner·s), outward normal n.
    nx = inner * s
    ny = outer - inner * c
    norm = xp.sqrt(nx * nx + ny * ny)
    return (nx * (qx - outer) + ny * qy) / norm


def _texture(
    kind: Any,
    period: Any,
    tex_angle: Any,
    u: Any,
    v: Any,
    px: Any,
    py: Any,
    dx: Any,
    dy: Any,
    xp: Any,
) -> Any:
    """Pattern weight in [0, 1] (1 = shade colour): 0 plain, 1 stripes, 2 dots, 3 checks."""
    two_pi = 2 * math.pi
    along = dx * xp.cos(tex_angle) + dy * xp.sin(tex_angle)
    stripes = xp.clip(0.5 + xp.sin(two_pi * along / period) * period / (2 * math.pi), 0.0, 1.0)
    gu = dx - period * xp.floor(dx / period + 0.5)
    gv = dy - period * xp.floor(dy / period + 0.5)
    dots = xp.clip(2.2 + 0.5 - xp.sqrt(gu * gu + gv * gv), 0.0, 1.0)
    checks = xp.clip(
        0.5 + xp.sin(two_pi * dx / period) * xp.sin(two_pi * dy / period) * period / 2.5,
        0.0,
        1.0,
    )
    return xp.where(
        kind < 0.5,
        xp.zeros_like(stripes),
        xp.where(kind < 1.5, stripes, xp.where(kind < 2.5, dots, checks)),
    )


def render(scene: Scene) -> np.ndarray:
    """One scene as float32 (SIZE, SIZE, 3) in [0, 1]."""
    return render_batch([scene])[0]


def render_batch(scenes: list[Scene]) -> np.ndarray:
    objects, background = pack_scenes(scenes)
    return np.asarray(rasterize(objects, background, np), dtype=np.float32)


def render_uint8(scene: Scene) -> np.ndarray:
    return np.round(render(scene) * 255).astype(np.uint8)
