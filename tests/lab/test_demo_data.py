"""The training pool's batch sampler: uniform by default (the stream runs 1–3 used), or
oversampling scenes that draw a given shape."""

from __future__ import annotations

import numpy as np

from lab.demo import scenes as S
from lab.demo.data import BatchSampler, ScenePool, build_pool, scene_weights


def _pool() -> ScenePool:
    return build_pool(seed=7, size=600, workers=1)


def test_uniform_weights_keep_the_earlier_stream() -> None:
    pool = _pool()
    assert scene_weights(pool, {"star": 1.0}) is None
    draw = BatchSampler(len(pool), None)
    a, b = np.random.default_rng([1, 2, 3]), np.random.default_rng([1, 2, 3])
    assert np.array_equal(draw(a, 256), b.integers(len(pool), size=256))


def test_star_weight_marks_exactly_the_scenes_that_draw_a_star() -> None:
    pool = _pool()
    weights = scene_weights(pool, {"star": 3.0})
    assert weights is not None
    for i in range(len(pool)):
        # The pool's captions name the shapes its scenes draw.
        words = {S.VOCAB[t - 1] for t in pool.tokens[i] if t > 0}
        has_star = bool(words & {"star", "stars"})
        assert weights[i] == (3.0 if has_star else 1.0), (i, words)


def test_weighted_draws_follow_the_weights() -> None:
    pool = _pool()
    weights = scene_weights(pool, {"star": 3.0})
    assert weights is not None
    star = weights > 1.0
    p = star.mean()
    expected = 3 * p / (3 * p + (1 - p))
    draws = BatchSampler(len(pool), weights)(np.random.default_rng(0), 200_000)
    assert draws.min() >= 0 and draws.max() < len(pool)
    share = star[draws].mean()
    # Binomial standard error at 200k draws is ~0.001; 0.01 is ten of them.
    assert abs(share - expected) < 0.01, (share, expected, p)
    assert share > p + 0.1  # and it really oversamples
