"""The demo's PCA patch codec: FLUX.2's packed layout, and a measured round-trip error."""

from __future__ import annotations

import numpy as np

from app.demo.codec import CHANNELS, PATCH, load_codec, patchify, unpatchify
from app.demo.model import CODEC_FILE
from app.paths import DEMO_DIR
from lab.demo import scenes as S

# Measured 2026-11-30 on 200 held-out scenes (seeds 2,000,000+) with the shipped codec (fitted on
# 4,096 other scenes): MSE 0.0025 on [-1, 1] pixels, 99.56% of the patch variance kept. The
# bounds leave room for scene-to-scene spread, and are far below what a wrong layout gives (≈0.3).
ROUND_TRIP_MSE_BOUND = 0.004
EXPLAINED_VARIANCE_FLOOR = 0.99


def test_patch_order_matches_flux2_packed_latents() -> None:
    """Token i*8+j holds the 16×16 patch at row i, column j (mflux's pack_latents order)."""
    import mlx.core as mx
    from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator

    images = np.random.default_rng(0).random((1, 128, 128, 3)).astype(np.float32)
    tokens = patchify(images)
    assert tokens.shape == (1, 64, PATCH * PATCH * 3)
    assert np.array_equal(tokens[0, 1 * 8 + 2].reshape(16, 16, 3), images[0, 16:32, 32:48])
    assert np.array_equal(unpatchify(tokens, 128, 128), images)
    grid = np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8)  # channel-first latent grid
    packed = np.array(Flux2LatentCreator.pack_latents(mx.array(grid)))[0, :, 0]
    assert np.array_equal(packed, np.arange(64))


def test_shipped_codec_round_trip_error_is_bounded() -> None:
    codec = load_codec(DEMO_DIR / CODEC_FILE)
    assert codec.basis.shape == (PATCH * PATCH * 3, CHANNELS)
    # Orthonormal as float32 stores it: each Gram entry is a 768-term float32 dot product, whose
    # worst-case rounding is 768 × 6e-8 ≈ 4.6e-5 (measured 4.8e-7; 1.3e-8 in float64); a basis
    # that is not orthonormal is off by far more.
    gram_atol = 1e-4
    assert np.allclose(codec.basis.T @ codec.basis, np.eye(CHANNELS), atol=gram_atol)
    assert codec.explained_variance >= EXPLAINED_VARIANCE_FLOOR
    images = S.render_batch([S.scene_from_seed(2_000_000 + i) for i in range(48)])
    latents = codec.encode(images)
    assert latents.shape == (48, 64, CHANNELS)
    assert 0.5 < float(np.sqrt((latents**2).mean())) < 2.0  # latents near unit scale
    decoded = codec.decode(latents)
    mse = float(((np.clip(decoded, -1, 1) - (images * 2 - 1)) ** 2).mean())
    assert mse < ROUND_TRIP_MSE_BOUND


def test_deblock_ramps_small_patch_steps_and_keeps_edges() -> None:
    from app.demo.codec import deblock
    from lab.demo.evaluate import patch_seam_ratio

    rng = np.random.default_rng(0)
    # A flat picture whose 16-px patches each carry a small offset: a pure patch grid.
    offsets = rng.uniform(-0.03, 0.03, size=(2, 8, 8, 3)).astype(np.float32)
    grid = 0.5 + np.repeat(np.repeat(offsets, 16, axis=1), 16, axis=2)
    soft = deblock(grid, alpha=0.1, beta=0.075)
    assert patch_seam_ratio(soft) < 0.5 * patch_seam_ratio(grid)
    # Pixels more than 4 px from every boundary are untouched.
    inner = np.r_[4:12]
    assert np.array_equal(soft[:, inner][:, :, inner], grid[:, inner][:, :, inner])
    # A step larger than alpha is an edge: a half-black, half-white picture split on a boundary.
    edge = np.zeros((1, 128, 128, 3), dtype=np.float32)
    edge[:, :, 64:] = 1.0
    assert np.array_equal(deblock(edge, alpha=0.1, beta=0.075), edge)


def test_deblocked_decode_changes_pixels_near_patch_boundaries_only() -> None:
    import dataclasses

    import mlx.core as mx

    from lab.demo.evaluate import patch_seam_ratio

    codec = load_codec(DEMO_DIR / CODEC_FILE)
    assert not codec.deblocked  # off in the shipped decode (it cost shape points: see codec.py)
    smooth_codec = dataclasses.replace(codec, deblocked=True)
    images = S.render_batch([S.scene_from_seed(2_000_000 + i) for i in range(16)])
    latents = codec.encode(images)
    smooth, raw = smooth_codec.decode(latents), codec.decode(latents)
    assert not np.array_equal(smooth, raw)
    # Only the 4 pixels either side of each 16-px boundary may change.
    inner = np.concatenate([tile + np.r_[4:12] for tile in range(0, 128, PATCH)])
    assert np.array_equal(smooth[:, inner][:, :, inner], raw[:, inner][:, :, inner])
    assert patch_seam_ratio(smooth) < patch_seam_ratio(raw)
    # The MLX path (the pipeline's) gives the same picture: both filter the same decoded floats.
    through_mlx = np.array(smooth_codec.decode(mx.array(latents), xp=mx))
    assert np.allclose(through_mlx, smooth, atol=1e-4)
