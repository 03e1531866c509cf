"""Training data for the demo: a pool of random scenes as packed arrays plus caption tokens.

numpy only (no MLX), so worker processes that build the pool in parallel stay light. Every chunk is
seeded from (seed, chunk index): the pool is the same whatever the number of workers.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass

import numpy as np

from lab.demo.scenes import SHAPES, caption, pack_scenes, sample_scene, tokenize

CHUNK = 5000


@dataclass(frozen=True)
class ScenePool:
    objects: np.ndarray  # (N, MAX_OBJECTS, 14) float32
    background: np.ndarray  # (N, 6) float32
    tokens: np.ndarray  # (N, MAX_TOKENS) int32

    def __len__(self) -> int:
        return len(self.tokens)


def pool_chunk(
    seed: int, index: int, size: int = CHUNK
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, index])
    scenes = [sample_scene(rng) for _ in range(size)]
    # Training captions leave optional words out now and then (see scenes._clause_text).
    tokens = np.array([tokenize(caption(s, rng)) for s in scenes], dtype=np.int32)
    objects, background = pack_scenes(scenes)
    return objects, background, tokens


def _chunk_job(args: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return pool_chunk(*args)


def build_pool(seed: int, size: int, workers: int = 1) -> ScenePool:
    jobs = [(seed, i, min(CHUNK, size - i * CHUNK)) for i in range((size + CHUNK - 1) // CHUNK)]
    if workers > 1:
        # spawn: the parent may already hold a GPU context, which must not be forked
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            parts = pool.map(_chunk_job, jobs)
    else:
        parts = [_chunk_job(job) for job in jobs]
    return ScenePool(
        objects=np.concatenate([p[0] for p in parts]),
        background=np.concatenate([p[1] for p in parts]),
        tokens=np.concatenate([p[2] for p in parts]),
    )


def scene_weights(pool: ScenePool, shape_weights: dict[str, float]) -> np.ndarray | None:
    """Per-scene sampling weight: the largest weight among the shapes a scene draws (1 for the
    rest), or None when every weight is 1 (uniform sampling, the stream earlier runs used)."""
    if all(w == 1.0 for w in shape_weights.values()):
        return None
    active = pool.objects[:, :, 0] > 0.5
    kind = np.rint(pool.objects[:, :, 1]).astype(np.int64)
    weights = np.ones(len(pool), dtype=np.float64)
    for shape, weight in shape_weights.items():
        has = (active & (kind == SHAPES.index(shape))).any(axis=1)
        weights = np.where(has, np.maximum(weights, weight), weights)
    return weights


class BatchSampler:
    """Scene indices for a training batch: uniform, or proportional to ``weights`` (inverse CDF
    on one precomputed cumulative sum, so a batch costs O(batch · log N), not O(N))."""

    def __init__(self, size: int, weights: np.ndarray | None = None) -> None:
        self.size = size
        self.cumulative = None if weights is None else np.cumsum(weights / weights.sum())

    def __call__(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        if self.cumulative is None:
            return rng.integers(self.size, size=batch)
        picks = np.searchsorted(self.cumulative, rng.random(batch), side="right")
        return np.minimum(picks, self.size - 1)
