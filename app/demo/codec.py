"""The demo's latent codec: a linear PCA autoencoder on 16×16×3 pixel patches.

Why this and not a trained VAE: FLUX.2 packs its latents as (1, H·W/256, 128) — one 128-channel
token per 16×16 pixel patch (VAE factor 8, then 2×2 patchify). A PCA of 16×16×3 = 768-dimensional
patches down to 128 components produces *exactly* that layout, in closed form (one eigen-
decomposition, no training, no randomness), with an orthonormal basis: the encoder and decoder
are two matrix products and latent-space squared error equals pixel-space squared error. The
procedural scenes are smooth within a patch, so 128 of 768 components keep nearly all of the
variance (measured at fit time; recorded in the codec file's metadata).

Latents are (patch − mean) · basis / scale. ``scale`` is either one number that gives the latents
unit root-mean-square (run 1), or one number per channel that gives every channel unit variance
(``per_channel``, the way FLUX.2 normalises its VAE latents with batch-norm statistics). With one
global scale the fine components that carry shape edges have a standard deviation of about 0.07
against the unit noise, so they weigh almost nothing in the training loss; per-channel
normalisation gives every component the same weight.

Each 16-px patch is decoded on its own, so a flat area can show a faint grid where neighbouring
patches land a few levels apart. The app therefore draws its pictures with the seamless decoder
(``app.demo.decoder``) on these latents; this decode stays the latent space's definition (training
encodes with it) and the lab's before/after reference (``python -m lab.demo.evaluate --decode
pca``). A deblocking filter (``deblock``) softens the grid too, but it also ramps low-contrast
object edges that fall on a patch boundary, and it cost shape points in two of three measurements
(``--decode pca-deblocked``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.demo.prompt import SIZE

PATCH = 16
CHANNELS = 128
GRID = SIZE // PATCH  # 8 tokens per side at 128×128
# Deblocking thresholds in [0, 1] pixel units (H.264-style; chosen on run 6b's pictures). On the
# shipped run-8k demo they lower the patch-seam ratio 2.55 → 1.71 and cost 3 of 100 prompts their
# shape verdict (none gained); on run 7g 0, on run 6b 3 (lab/demo/training/README.md).
DEBLOCK_ALPHA, DEBLOCK_BETA = 0.1, 0.075


def patchify(images: Any, xp: Any = np) -> Any:
    """(B, H, W, 3) → (B, H/16 · W/16, 768), tokens row-major (FLUX.2's packed order)."""
    b, h, w, c = images.shape
    x = images.reshape(b, h // PATCH, PATCH, w // PATCH, PATCH, c)
    x = xp.transpose(x, (0, 1, 3, 2, 4, 5))
    return x.reshape(b, (h // PATCH) * (w // PATCH), PATCH * PATCH * c)


def unpatchify(tokens: Any, height: int, width: int, xp: Any = np) -> Any:
    """(B, H/16 · W/16, 768) → (B, H, W, 3)."""
    b = tokens.shape[0]
    x = tokens.reshape(b, height // PATCH, width // PATCH, PATCH, PATCH, 3)
    x = xp.transpose(x, (0, 1, 3, 2, 4, 5))
    return x.reshape(b, height, width, 3)


def deblock(images: np.ndarray, alpha: float, beta: float, width: int = 4) -> np.ndarray:
    """Soften the patch grid of decoded (B, H, W, C) images, in the manner of H.264's in-loop
    filter: at every 16-px boundary, a step smaller than ``alpha`` between flanks flatter than
    ``beta`` (pixel units of ``images``) is spread as an even ramp over ``width`` pixels each side;
    larger steps are edges and stay. ``PCACodec.decode`` ends with it when the codec is
    ``deblocked`` (off in the shipped decode; ``python -m lab.demo.evaluate --deblock``)."""
    x = np.array(images, dtype=np.float32)
    ramp = np.array([(width - j) / (2 * width + 1) for j in range(width)], dtype=np.float32)
    for axis in (2, 1):
        x = np.moveaxis(x, axis, -2)
        for b in range(PATCH, x.shape[-2], PATCH):
            p = x[..., b - width : b, :][..., ::-1, :]  # nearest pixel first
            q = x[..., b : b + width, :]
            step = q[..., 0, :] - p[..., 0, :]
            flat = (np.abs(p[..., -1, :] - p[..., 0, :]) < beta) & (
                np.abs(q[..., -1, :] - q[..., 0, :]) < beta
            )
            spread = np.where((np.abs(step) < alpha) & flat, step, 0.0)[..., None, :]
            x[..., b - width : b, :] += (spread * ramp[:, None])[..., ::-1, :]
            x[..., b : b + width, :] -= spread * ramp[:, None]
        x = np.moveaxis(x, -2, axis)
    return x


@dataclass(frozen=True)
class PCACodec:
    mean: np.ndarray  # (768,) in [-1, 1] pixel units
    basis: np.ndarray  # (768, 128), orthonormal columns
    scale: np.ndarray  # (1,) global or (128,) per channel
    explained_variance: float
    deblocked: bool = False  # decode ends with ``deblock`` (not stored: a decoding choice)

    def encode(self, images: Any, xp: Any = np) -> Any:
        """(B, H, W, 3) images in [0, 1] → latents (B, tokens, 128)."""
        mean, basis, scale = self._arrays(xp)
        patches = patchify(images * 2.0 - 1.0, xp)
        return ((patches - mean) @ basis) / scale

    def decode(self, latents: Any, height: int = SIZE, width: int = SIZE, xp: Any = np) -> Any:
        """latents (B, tokens, 128) → images (B, H, W, 3) in [-1, 1] (unclipped); with
        ``deblocked`` the result is filtered by ``deblock`` in NumPy (a few small slices, under a
        millisecond at 128²), so an MLX result is evaluated here."""
        mean, basis, scale = self._arrays(xp)
        patches = (latents * scale) @ basis.T + mean
        images = unpatchify(patches, height, width, xp)
        if not self.deblocked:
            return images
        # [-1, 1] units: twice the [0, 1] thresholds.
        soft = deblock(np.asarray(images), 2 * DEBLOCK_ALPHA, 2 * DEBLOCK_BETA)
        return soft if xp is np else xp.array(soft)

    def _arrays(self, xp: Any) -> tuple[Any, Any, Any]:
        if xp is np:
            return self.mean, self.basis, self.scale
        cache = self.__dict__.setdefault("_xp_cache", {})
        if id(xp) not in cache:
            cache[id(xp)] = (xp.array(self.mean), xp.array(self.basis), xp.array(self.scale))
        return cache[id(xp)]

    def tensors(self) -> dict[str, np.ndarray]:
        return {
            "mean": self.mean.astype(np.float32),
            "basis": self.basis.astype(np.float32),
            "scale": np.asarray(self.scale, dtype=np.float32).reshape(-1),
            "explained_variance": np.array([self.explained_variance], dtype=np.float32),
        }

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any]) -> PCACodec:
        return cls(
            mean=np.asarray(tensors["mean"], dtype=np.float32),
            basis=np.asarray(tensors["basis"], dtype=np.float32),
            scale=np.asarray(tensors["scale"], dtype=np.float32).reshape(-1),
            explained_variance=float(np.asarray(tensors["explained_variance"])[0]),
        )


def load_codec(path: Path) -> PCACodec:
    import mlx.core as mx

    tensors = mx.load(str(path))
    assert isinstance(tensors, dict)
    return PCACodec.from_tensors({k: np.array(v) for k, v in tensors.items()})
