"""A small finished run for the history and export tests: random images, a six-step trace."""

from __future__ import annotations

import numpy as np

from app.engine.report import PassResult, RunReport
from app.engine.request import GenerationRequest, make_request
from app.gate import Decision, StepEvent
from tests.fakes.steps import tea_step


def steps(pattern: str, threshold: float = 0.1) -> tuple[StepEvent, ...]:
    letters = {
        "C": Decision.computed,
        "F": Decision.forced,
        "S": Decision.skipped,
        "N": Decision.numerical_miss,
    }
    n = len(pattern)
    return tuple(
        tea_step(
            i,
            n,
            letters[c],
            None if i == 0 else 0.05 + i / 1000,
            0.04,
            0.08,
            threshold,
            0.01 * (i + 1),
        )
        for i, c in enumerate(pattern)
    )


def run_report(
    seed: int = 7, vanilla: bool = True, request: GenerationRequest | None = None
) -> RunReport:
    """Gated "FCSSCF" in 0.5 s resumed from step 1, beside a cached vanilla of 0.75 s (its
    image the gated one inverted), SSIM 0.9812."""
    rng = np.random.default_rng(seed)
    gated = rng.integers(0, 256, size=(32, 48, 3), dtype=np.uint8)
    request = request or make_request("demo", "two red circles", seed=seed, steps=6, threshold=0.1)
    return RunReport(
        request=request,
        gated=PassResult(gated, steps("FCSSCF"), 0.5, resumed_from=1),
        vanilla=PassResult(255 - gated, steps("CCCCCC"), 0.75, cached=True) if vanilla else None,
        ssim=0.9812 if vanilla else None,
        engine="test",
    )
