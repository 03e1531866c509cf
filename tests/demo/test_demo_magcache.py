"""The MagCache gate on the real trained demo models (CPU, float32).

Paired same-process oracles, as tests/demo/test_demo_gate.py does for TeaCache: every gated run
is compared with a vanilla run of the same process, prompt and seed; each quality assertion sits
next to an engagement assertion (skips > 0); the distilled model skips nothing by default on
purpose, and its table says exactly where skipping would begin.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from app.demo.pipeline import DemoFlux2Klein
from app.engine.notices import engagement_warning
from app.gate import Decision, kind_of, make_gate, simulate_magcache
from app.gate.magcache import onset
from app.variants import get_variant
from lab.demo.calibrate import SWEEP_SEED_BASE, prompts, ssim
from tests.demo.test_demo_gate import _run
from tests.fakes.params import magcache_params

# The demo's shipped MagCache default (0.02, resources/demo/demo.calibration.json) on 20 unseen
# prompts (lab/gates/results/compare-demo.json): 10 of 28 steps skipped, SSIM mean 0.987, worst
# 0.948. 0.90 is the bound the TeaCache default was chosen against (tests/demo/test_demo_gate.py);
# skipping the last steps, the failure MagCache shows at threshold 0.3, scores 0.81-0.87.
MIN_SSIM = 0.90


@pytest.fixture
def demo(demo_pipeline: DemoFlux2Klein) -> DemoFlux2Klein:
    return demo_pipeline  # loaded once per session (tests/conftest.py)


def test_threshold_zero_is_bit_exact_with_vanilla(demo: DemoFlux2Klein) -> None:
    prompt = prompts(SWEEP_SEED_BASE, 1)[0]
    _, before = _run(demo, prompt, 28)
    gate = make_gate(magcache_params(get_variant("demo"), 0.0))
    _, gated = _run(demo, prompt, 28, gate)
    assert gate.skipped == 0 and gate.pattern == "C" * 28
    assert mx.array_equal(before, gated)


@pytest.mark.slow
def test_default_threshold_skips_with_ssim(demo: DemoFlux2Klein) -> None:
    params = magcache_params(get_variant("demo"))
    assert params.threshold > 0
    expected = simulate_magcache(params, 28)
    scores = []
    for prompt in prompts(SWEEP_SEED_BASE, 2):
        vanilla, _ = _run(demo, prompt, 28)
        gate = make_gate(params)
        gated, _ = _run(demo, prompt, 28, gate)
        assert gate.pattern == "".join(v.decision.letter for v in expected)  # table-driven
        assert gate.skipped > 0  # engagement: the quality gate below is not passed by doing nothing
        scores.append(ssim(vanilla, gated))
    assert min(scores) >= MIN_SSIM, scores


def test_turbo_is_off_by_default_and_its_table_says_where_skipping_begins(
    turbo_pipeline: DemoFlux2Klein,
) -> None:
    variant = get_variant("demo-turbo")
    assert variant.magcache is not None and variant.magcache.default_threshold is None
    prompt = prompts(SWEEP_SEED_BASE, 1)[0]
    off = make_gate(magcache_params(variant))
    _run(turbo_pipeline, prompt, 4, off)
    assert off.pattern == "CCCC"  # zero skips on purpose: no default threshold
    _, first, step = onset(magcache_params(variant, 0.5), 4)
    assert first is not None and step is not None
    for threshold, skips in ((first - 1e-6, False), (first, True)):
        gate = make_gate(magcache_params(variant, threshold))
        _run(turbo_pipeline, prompt, 4, gate)
        assert (gate.skipped > 0) is skips, (threshold, gate.pattern)
        params = magcache_params(variant, threshold)
        notice = engagement_warning(0, params, kind_of(params).engagement(params, [None] * 4))
        assert notice.details["onset_threshold"] == first
        expected = "the gate skips on this schedule" if skips else "nothing is skipped"
        assert expected in notice.message, notice.message
    first_skip = next(e.index for e in gate.events if e.decision is Decision.skipped)
    assert first_skip == step
    assert np.isfinite(first)
