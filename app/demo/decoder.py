"""The demo's picture decoder: packed latents → pixels, with no patch grid.

The PCA codec (``app.demo.codec``) stays the demo's latent space: it encodes the training scenes,
and the transformer was trained on its latents. Decoding each 16-px patch from its own token
alone, though, leaves a faint 8×8 grid wherever neighbouring tokens disagree by a few levels (the
model's tokens do: patch-seam ratio 2.55 on the shipped demo; on 48 held-out renders 1.14, their
codec round trip 1.75). This decoder replaces only that last step:

- optionally, residual 3×3 convolutions over the token grid (so each token's features see its
  neighbours; none in the shipped file), then
- each token paints a 32×32 window centred on its own patch (its patch plus half of each
  neighbour's), weighted by a separable Hann window; neighbouring windows overlap by half and
  the Hann weights of overlapping windows sum to one, so every pixel is a smooth blend of the
  four nearest tokens' paintings. The picture is continuous across patch boundaries by
  construction: no token's contribution starts or stops at a boundary. (Where only one window
  reaches, the outer 8 pixels of the image, the blend is normalised by the weight that is there.)

Fitted in ``lab/demo/train_decoder.py`` on what the shipped models actually produce, against the
clean scene (reasoning and measurements: ``lab/demo/training/README.md``). The residual blocks
are optional (the shipped file has none: its closed-form fit left them adding zero), so the
decode is one matrix product, about a millisecond on the CPU, and step previews decode with it
exactly as the final image does.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from app.demo.codec import CHANNELS, PATCH

WINDOW = 2 * PATCH  # each token paints its patch and half of each neighbour's
OVERLAP = 8  # px either side of a patch boundary over which neighbouring paintings blend
WIDTH = 64  # inner width of a residual block
BLOCKS = 2  # residual blocks over the token grid


class ResidualBlock(nn.Module):
    """x + conv(silu(conv(silu(x)))): two 3×3 convolutions over the token grid, 128 → width →
    128 channels."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(CHANNELS, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, CHANNELS, 3, padding=1)

    def __call__(self, x: mx.array) -> mx.array:
        return x + self.conv2(nn.silu(self.conv1(nn.silu(x))))


class SeamlessDecoder(nn.Module):
    """(B, h·w, 128) packed latents, tokens row-major → (B, 16h, 16w, 3) in [−1, 1] (unclipped),
    the PCA codec's decode convention.

    ``head`` maps a token's features to its 32×32×3 painting (row, column, colour). The blend is
    computed without materialising the paintings: every 16×16 cell of a grid shifted by half a
    patch receives one quarter of each of the four paintings that overlap it, so the cells are a
    2×2 convolution over the (padded) token grid whose four taps are the painting's four quarters,
    Hann weights folded in — one matrix product. :func:`overlap_add` is the literal sum it equals
    (tests hold the two together)."""

    def __init__(self, width: int = WIDTH, blocks: int = BLOCKS, edge: bool = False) -> None:
        super().__init__()
        self.edge = edge
        self.blocks = [ResidualBlock(width) for _ in range(blocks)]
        self.head = nn.Linear(CHANNELS, WINDOW * WINDOW * 3)

    def features(self, latents: mx.array, h: int, w: int) -> mx.array:
        """(B, h, w, 128): each token's latents, refined by the residual blocks from its
        neighbourhood of tokens (2 tokens each way per block)."""
        x = latents.reshape(latents.shape[0], h, w, latents.shape[-1])
        for block in self.blocks:
            x = block(x)
        return x

    def paintings(self, latents: mx.array, height: int, width: int) -> mx.array:
        """(B, h, w, 32, 32, 3): what each token paints, before the Hann weights."""
        h, w = height // PATCH, width // PATCH
        x = self.head(self.features(latents, h, w))
        return x.reshape(*x.shape[:3], WINDOW, WINDOW, 3)

    def __call__(self, latents: mx.array, height: int, width: int) -> mx.array:
        batch = latents.shape[0]
        h, w = height // PATCH, width // PATCH
        x = self.features(latents, h, w)
        # A ones channel carries each painting's bias, and pads to zero where no token is.
        x = mx.concatenate([x, mx.ones((*x.shape[:3], 1), dtype=x.dtype)], axis=-1)
        x = mx.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="edge" if self.edge else "constant")
        # Cell (i, j) of the shifted grid: quarter (0, 0) of token (i, j), (0, 1) of token
        # (i, j − 1), (1, 0) of token (i − 1, j), (1, 1) of token (i − 1, j − 1).
        taps = [x[:, 1 - a : h + 2 - a, 1 - d : w + 2 - d] for a in (0, 1) for d in (0, 1)]
        cells = mx.concatenate(taps, axis=-1) @ self._quarters()
        cells = cells.reshape(batch, h + 1, w + 1, PATCH, PATCH, 3)
        canvas = cells.transpose(0, 1, 3, 2, 4, 5).reshape(
            batch, (h + 1) * PATCH, (w + 1) * PATCH, 3
        )
        half = PATCH // 2
        canvas = canvas[:, half : half + h * PATCH, half : half + w * PATCH]
        return canvas if self.edge else canvas / _norm(h, w)

    def _quarters(self) -> mx.array:
        """(4·(hidden + 1), 768): the head's weights and bias, times the Hann window, split into
        the four 16×16 quarters of the painting (in the taps' order)."""
        weight = mx.concatenate([self.head.weight, self.head.bias[:, None]], axis=1)
        weight = weight.reshape(WINDOW, WINDOW, 3, -1) * _hann()
        quarters = [
            weight[a * PATCH : (a + 1) * PATCH, d * PATCH : (d + 1) * PATCH]
            .reshape(PATCH * PATCH * 3, -1)
            .T
            for a in (0, 1)
            for d in (0, 1)
        ]
        return mx.concatenate(quarters, axis=0)


def overlap_add(windows: mx.array) -> mx.array:
    """(B, h, w, 32, 32, C) windows, one per token, centred on its patch → (B, 16h, 16w, C): the
    sum of the windows, each at its place (the outer 8 pixels of a window that reach past the
    image are dropped)."""
    b, h, w, _, _, c = windows.shape
    quarters = windows.reshape(b, h, w, 2, PATCH, 2, PATCH, c)
    canvas = None
    for a in (0, 1):
        for d in (0, 1):
            cell = quarters[:, :, :, a, :, d, :, :]
            cell = mx.pad(cell, [(0, 0), (a, 1 - a), (d, 1 - d), (0, 0), (0, 0), (0, 0)])
            canvas = cell if canvas is None else canvas + cell
    assert canvas is not None
    canvas = canvas.transpose(0, 1, 3, 2, 4, 5).reshape(b, (h + 1) * PATCH, (w + 1) * PATCH, c)
    half = PATCH // 2
    return canvas[:, half : half + h * PATCH, half : half + w * PATCH, :]


def hann_window() -> np.ndarray:
    """(32, 32) separable Hann weights, cos² of the distance to the window's centre: two windows
    16 px apart sum to exactly one (cos² + sin²)."""
    return np.outer(hann_1d(), hann_1d()).astype(np.float32)


def hann_1d() -> np.ndarray:
    """(32,) the window's weights along one axis: one within ``8 − OVERLAP`` px of the token's
    centre, a cos² ramp over the ``2·OVERLAP`` px around each patch boundary, zero beyond (at
    OVERLAP 8, cos² of the distance to the centre over the whole window). Windows 16 px apart
    sum to one: cos² + sin²."""
    distance = np.abs(np.arange(WINDOW) + 0.5 - WINDOW / 2)
    ramp = np.clip((distance - (PATCH // 2 - OVERLAP)) / (2 * OVERLAP), 0.0, 1.0)
    return np.cos(math.pi / 2 * ramp) ** 2


@functools.cache
def _hann() -> mx.array:
    return mx.array(hann_window()[:, :, None, None])


@functools.cache
def _norm(h: int, w: int) -> mx.array:
    """(16h, 16w, 1): the summed Hann weight at every pixel of an h×w token grid — one inside,
    0.55–1 on the outer 8 pixels, where only one window reaches across."""

    def one_axis(n: int) -> np.ndarray:
        total = np.zeros((n + 1) * PATCH)
        for k in range(n):
            total[k * PATCH : k * PATCH + WINDOW] += hann_1d()
        return total[PATCH // 2 : PATCH // 2 + n * PATCH]

    return mx.array(np.outer(one_axis(h), one_axis(w))[:, :, None].astype(np.float32))


def load_decoder(path: Path) -> SeamlessDecoder:
    """The decoder in a float16 safetensors file, as float32, its size read from the file."""
    weights = mx.load(str(path))
    assert isinstance(weights, dict)
    blocks = len({key.split(".")[1] for key in weights if key.startswith("blocks.")})
    width = int(weights["blocks.0.conv1.weight"].shape[0]) if blocks else WIDTH
    decoder = SeamlessDecoder(width, blocks)
    decoder.load_weights([(k, v.astype(mx.float32)) for k, v in weights.items()], strict=True)
    mx.eval(decoder.parameters())
    return decoder
