"""Timing rules that keep a Generate's two passes comparable. Qt-free, MLX-free.

* Warm-up: a discarded generation of ``WARMUP_STEPS`` steps under :func:`warmup_params`
  (computed, skipped, computed: the body, the gate's signal, storing and reusing a residual all
  run once) before the first timed pass of a model and shape, so one-time costs land on neither
  pass.
* A cached vanilla was timed earlier, under whatever else the machine was doing then. The gated
  pass's computed steps do the same work as vanilla's steps at the same index, so the median of
  their paired ratios (:func:`load_factor`) measures how much slower (or faster) the machine is
  now; the report (``RunReport.speedup``) re-times the cached vanilla time, and the vanilla step
  times a resumed pass replays, by it. The raw ratio stays in the report (``speedup_unscaled``)
  next to the factor.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from app.gate import Decision, GateParams, StepEvent

WARMUP_STEPS = 3


def warmup_params() -> GateParams:
    """A constant polynomial that predicts 0.1 per step against a threshold of 0.5: over three
    steps the gate computes (forced first), skips, computes (forced last), whatever the weights."""
    return GateParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.1), rel_l1_thresh=0.5)


def load_factor(
    vanilla: Sequence[StepEvent], gated: Sequence[StepEvent], first: int
) -> float | None:
    """Median of gated/vanilla step-time ratios over the steps the gated pass really computed
    (index ≥ ``first``: earlier steps were replayed with vanilla's times); None if none."""
    by_index = {e.index: e for e in vanilla}
    ratios = []
    for step in gated:
        other = by_index.get(step.index)
        if step.index < first or other is None or not step.decision.computes:
            continue
        if step.decision is Decision.numerical_miss or other.seconds <= 0:
            continue
        ratios.append(step.seconds / other.seconds)
    return statistics.median(ratios) if ratios else None
