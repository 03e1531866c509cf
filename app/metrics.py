"""Image comparison shared by the engine, the benchmarks, the demo calibration and the window.

No Qt and no MLX; scikit-image is imported on first use (about 0.5 s), not at start-up.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two same-shape 8-bit images (RGB or grey), with the data range given explicitly:
    scikit-image's float default would guess it from the dtype."""
    from skimage.metrics import structural_similarity

    value: Any = structural_similarity(
        np.asarray(a, dtype=np.uint8),
        np.asarray(b, dtype=np.uint8),
        channel_axis=-1 if np.ndim(a) == 3 else None,
        data_range=255,
    )
    return float(value)


def ssimulacra2(reference: np.ndarray, test: np.ndarray) -> float:
    """SSIMULACRA2 of ``test`` against ``reference`` (two same-shape 8-bit RGB images): a
    perceptual score made for the changes people notice (colour included), 100 for identical
    images, 90 and above visually lossless, negative where much changed (``SSIMULACRA2_BANDS``).
    The ``ssimulacra2`` package (BSD-3; numpy and scipy, no weights) reads images through Pillow,
    so both are handed over as in-memory PNGs (lossless)."""
    from ssimulacra2 import compute_ssimulacra2

    return float(compute_ssimulacra2(_png(reference), _png(test)))


def _png(image: np.ndarray) -> io.BytesIO:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image, dtype=np.uint8)).save(buffer, format="PNG", compress_level=0)
    buffer.seek(0)
    return buffer


# The line below which a SSIMULACRA2 score says something visibly changed. Basis:
# lab/target/results/ssimulacra2-line.json (`uv run python -m lab.target.ssimulacra2_line`): the 55
# demo runs of the local-difference survey, whose runs were looked at side by side, re-run for
# their score: the 47 of ordinary drift scored 37.3 to 96.9, the 5 that lost or reshaped an object
# −56.1 to −52.3. Any line in that gap separates them; 0 is the round number near its midpoint
# (−7.5). (On 128-pixel images the scores run lower than on the photographs the scale below was
# made for: drift reached down to 37.)
VISIBLE_CHANGE = 0.0

# What a SSIMULACRA2 score means: the lowest score each sentence holds from, highest first. From its
# authors' scale (libjxl, tools/ssimulacra2/README.md): 90, no difference in a flicker test at 1:1;
# 70, hard to notice without the original beside it; 50, medium quality. Below that, down to
# ``VISIBLE_CHANGE``, "a clear difference"; below it, the demo's lost objects.
SSIMULACRA2_BANDS: tuple[tuple[float, str], ...] = (
    (90.0, "no visible difference, even flicking between the two"),
    (70.0, "hard to notice without the other beside it"),
    (50.0, "a difference you can see side by side"),
    (VISIBLE_CHANGE, "a clear difference"),
    (float("-inf"), "a large change: something was lost or reshaped"),
)


def ssimulacra2_words(score: float) -> str:
    """The band's sentence for ``score`` (``SSIMULACRA2_BANDS``)."""
    return next(words for floor, words in SSIMULACRA2_BANDS if score >= floor)


# The local-difference window: 1/8 of the shorter side, at least 16 px. On the demo's 128 × 128
# images that is 16 × 16, about the size of one drawn object (a circle is 12–20 px across), so a
# lost object fills most of one window while the image-wide SSIM barely moves.
LOCAL_WINDOW_MIN = 16
LOCAL_WINDOW_FRACTION = 8


@dataclass(frozen=True, slots=True)
class LocalDifference:
    """The worst window of the difference image: its mean absolute difference (0–1) and where."""

    value: float
    x: int
    y: int
    size: int


def local_window(height: int, width: int) -> int:
    return min(height, width, max(LOCAL_WINDOW_MIN, min(height, width) // LOCAL_WINDOW_FRACTION))


def difference_image(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The difference of two same-shape 8-bit images, the one definition the app has of it: per
    pixel, the largest absolute difference over the RGB channels (not luminance: a red object
    replaced by an equally bright green one is a lost object too), float32 H×W on the 0–255
    scale. The window draws it as the difference view; ``local_difference`` averages it over the
    worst window."""
    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {a.shape} against {b.shape}")
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    if diff.ndim == 3:
        diff = diff.max(axis=-1)
    return np.ascontiguousarray(diff, dtype=np.float32)


def local_difference(a: np.ndarray, b: np.ndarray) -> LocalDifference:
    """The mean of ``difference_image`` over the worst ``local_window`` square of two same-shape
    8-bit images, on a 0–1 scale."""
    diff = difference_image(a, b).astype(np.float64) / 255.0
    height, width = diff.shape
    size = local_window(height, width)
    # Window sums from the integral image: every window position, stride 1.
    integral = np.pad(diff.cumsum(axis=0).cumsum(axis=1), ((1, 0), (1, 0)))
    sums = (
        integral[size:, size:]
        - integral[:-size, size:]
        - integral[size:, :-size]
        + integral[:-size, :-size]
    )
    y, x = np.unravel_index(int(np.argmax(sums)), sums.shape)
    return LocalDifference(float(sums[y, x]) / (size * size), int(x), int(y), size)
