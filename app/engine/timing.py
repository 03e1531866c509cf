"""Timing rules that keep a Generate's two passes comparable. Qt-free, MLX-free.

* Warm-up: a discarded generation of ``WARMUP_STEPS`` steps under :func:`warmup_params`
  (computed, skipped, computed: the body, the gate's signal, storing and reusing a residual all
  run once) before the first timed pass of a model and shape, so one-time costs land on neither
  pass.
* A cached vanilla was timed earlier, under whatever else the machine was doing then. The gated
  pass's computed steps do the same work as vanilla's steps at the same index, so the median of
  their paired ratios measures how much slower (or faster) the machine is now; the cached vanilla
  time, and the vanilla step times a resumed pass replays, are rescaled by it. The raw ratio stays
  in the report (``speedup_unscaled``) next to the factor.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Protocol

from app.gate import Decision, StepEvent, TeaCacheParams

WARMUP_STEPS = 3


def warmup_params() -> TeaCacheParams:
    """A constant polynomial that predicts 0.1 per step against a threshold of 0.5: over three
    steps the gate computes (forced first), skips, computes (forced last), whatever the weights."""
    return TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.1), rel_l1_thresh=0.5)


class _Pass(Protocol):
    events: list[StepEvent]
    loop_seconds: float
    resumed_from: int | None


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


def cached_vanilla_timing(vanilla: _Pass, gated: _Pass, *, cached: bool) -> dict[str, object]:
    """Report fields for the speedup's basis. A vanilla measured in this run: the plain ratio.
    A cached vanilla: vanilla's times (and the replayed steps' times inside the gated pass)
    rescaled by :func:`load_factor`; the plain ratio kept as ``speedup_unscaled``."""
    raw = vanilla.loop_seconds / gated.loop_seconds if gated.loop_seconds else None
    if not cached:
        return {"speedup_basis": "measured in this run", "load_factor": None}
    first = gated.resumed_from or 0
    factor = load_factor(vanilla.events, gated.events, first)
    fields: dict[str, object] = {"speedup_unscaled": raw, "load_factor": factor}
    if factor is None:
        fields["speedup_basis"] = "cached vanilla, not rescaled (no step to compare)"
        return fields
    replayed = sum(e.seconds for e in gated.events if e.index < first)
    ran = gated.loop_seconds - replayed
    gated_now = ran + factor * replayed
    vanilla_now = factor * vanilla.loop_seconds
    fields.update(
        speedup=vanilla_now / gated_now if gated_now else None,
        vanilla_seconds_rescaled=vanilla_now,
        gated_seconds_rescaled=gated_now,
        speedup_basis="cached vanilla, rescaled to this run by paired computed steps",
    )
    return fields
