"""The shells' random weights (``app.adapters.shells._init_weights``): each matrix reads the shared
pool from its own offset, wrapping round, exactly as rolling the whole pool and tiling it did (so
every shell's weights, and every tolerance measured on them, stay as they were)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from app.adapters.shells import _POOL_SIZE, _pool_run


def _rolled_and_tiled(pool: mx.array, offset: int, size: int) -> mx.array:
    """The earlier formula: the whole pool rolled by ``offset``, tiled, cut to ``size``."""
    rolled = mx.concatenate([pool[offset:], pool[:offset]])
    repeats = -(-size // _POOL_SIZE)
    return (mx.tile(rolled, (repeats,)) if repeats > 1 else rolled)[:size]


@pytest.mark.parametrize(
    ("offset", "size"),
    [
        (5, 100),  # inside the pool
        (_POOL_SIZE - 10, 100),  # wraps once
        (_POOL_SIZE - 1, 1),
        (123, _POOL_SIZE),  # the whole pool
        (0, 2 * _POOL_SIZE),  # tiled
        (_POOL_SIZE - 3, 3 * _POOL_SIZE + 7),  # wraps, tiled, and a tail
    ],
)
def test_a_run_of_the_pool_is_the_rolled_and_tiled_pool(offset: int, size: int) -> None:
    pool = mx.array(np.random.default_rng(0).uniform(-1, 1, _POOL_SIZE).astype(np.float32))
    run = _pool_run(pool, offset, size)
    assert run.shape == (size,)
    assert mx.array_equal(run, _rolled_and_tiled(pool, offset, size)).item()
