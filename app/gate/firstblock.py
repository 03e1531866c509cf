"""The first-block probe's rule on plain floats: shared by the live gate and the simulator.

The rule is the first-block cache (ParaAttention's "First Block Cache", diffusers
``FirstBlockCacheConfig``, nunchaku, krita-ai-diffusion), with cache-dit's guards: every step runs
the transformer's first block; ``r`` is that block's residual on the image stream (its output
minus its input) and

    d = mean|r − r_ref| / mean|r_ref|

compares it with ``r_ref``, the residual of the last *computed* step (a skipped step does not
replace it). Where ``d`` is below the threshold the remaining blocks are skipped and their cached
residual (the stack's output minus the first block's output, from the last computed step) is added
to this step's first-block output. Guards: the first ``warmup_steps`` steps compute, the last step
computes, and at most ``max_consecutive_skips`` steps are skipped in a row.

It needs no calibration: ``d`` is measured on the model itself, so it runs on every family, a
fine-tune, a model folder or under LoRAs alike.

The simulator replays the rule on a vanilla run's trace. A vanilla pass records, per step, ``d``
against each of the previous ``TRACE_DEPTH`` steps (nearest first): the rule compares with the last
computed step, which after ``k`` skips lies ``k + 1`` steps back, so with at most
``TRACE_DEPTH − 1`` skips in a row the simulator reads exactly the ``d`` a live gate would measure
*were its latents vanilla's*. That makes the simulation of the rule exact along the vanilla path;
what it cannot know is how the gated latents drift after the first skip (as for TeaCache), so a
real gated run is predicted exactly up to and including its first skip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from app.gate.decision import Decision, GateConfigError, Verdict, as_float, is_whole

GATE_NAME = "firstblock"

# The defaults, each with its basis (the published ones are in
# ../shared/research/turn3/peers.md §2; the demo's own curve is the probe's line of
# lab/gates/results/compare-demo.json: 20 prompts neither gate saw, 28 steps, CFG 3):
# - The threshold: 0.10, what the rule that chose the demo's TeaCache and MagCache defaults
#   (lab.demo.calibrate.choose_threshold; tests/lab/test_gates_compare.py) picks on that curve:
#   10.75 of 28 steps skipped (mean), SSIM mean 0.990, worst prompt 0.950. It lies between the
#   published values: diffusers' ``FirstBlockCacheConfig`` default 0.05 skips 0.8 on the demo
#   (its first block changes more per step than FLUX.1's), nunchaku's ``residual_diff_threshold``
#   and krita-ai-diffusion's "Dynamic Caching" 0.12 skip 12.8 with a worst prompt of 0.948.
DEFAULT_THRESHOLD = 0.1
# - Warm-up: cache-dit's DBCache warm-up as SGLang ships it (``SGLANG_CACHE_DIT_WARMUP`` 4;
#   cache-dit itself defaults to 8 of a 28–50-step run, sd.cpp's ``dbcache`` to 8): the first
#   steps lay out the composition, and their first block changes most.
DEFAULT_WARMUP_STEPS = 4
# - At most 3 skipped in a row: SGLang's cache-dit default ``SGLANG_CACHE_DIT_MC`` 3 (cache-dit's
#   bench reports MC 2–6; Draw Things' TeaCache "max skip" 3).
DEFAULT_MAX_CONSECUTIVE_SKIPS = 3
# How many previous steps a vanilla pass compares each step with: one more than the most skips in
# a row, so the step after the longest run of skips still finds its reference.
TRACE_DEPTH = DEFAULT_MAX_CONSECUTIVE_SKIPS + 1


@dataclass(frozen=True, slots=True)
class FirstBlockParams:
    """The probe's settings, validated on construction. ``forced`` is for timing only
    (``bench --forced-skips``): every step the guards allow is skipped whatever ``d`` is, with the
    same work per step as a real run (the first block, ``d``, its host sync)."""

    threshold: float
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    skip_last: int = 1
    max_consecutive_skips: int = DEFAULT_MAX_CONSECUTIVE_SKIPS
    forced: bool = False

    gate: ClassVar[str] = GATE_NAME

    def __post_init__(self) -> None:
        thresh = as_float(self.threshold)
        if not (math.isfinite(thresh) and 0.0 <= thresh <= 1.0):
            raise GateConfigError(f"threshold must be between 0 and 1, got {self.threshold!r}")
        object.__setattr__(self, "threshold", thresh)
        for name in ("warmup_steps", "skip_last"):
            value = getattr(self, name)
            if not is_whole(value) or value < 0:
                raise GateConfigError(f"{name} must be a whole number ≥ 0, got {value!r}")
        if not is_whole(self.max_consecutive_skips) or self.max_consecutive_skips < 1:
            raise GateConfigError("max_consecutive_skips must be a whole number ≥ 1")

    @property
    def enabled(self) -> bool:
        return self.threshold > 0.0 or self.forced

    def with_threshold(self, threshold: float) -> FirstBlockParams:
        return replace(self, threshold=threshold)

    def in_forced_window(self, index: int, num_steps: int) -> bool:
        return index < self.warmup_steps or index >= num_steps - self.skip_last

    def eligible_steps(self, num_steps: int) -> int:
        """Steps outside the warm-up and the last steps that have a reference to compare with."""
        window = max(0, num_steps - self.warmup_steps - self.skip_last)
        # With no warm-up, the first windowed step only seeds the reference.
        return window - 1 if window and self.warmup_steps == 0 else window


@dataclass(slots=True)
class FirstBlockScalars:
    """The rule's state between steps: skips in a row, and whether a reference residual (and the
    remaining blocks' residual beside it) is cached."""

    streak: int = 0
    has_reference: bool = False


def wants_change(params: FirstBlockParams, state: FirstBlockScalars, index: int, n: int) -> bool:
    """Whether step ``index`` reads ``d`` at all: the live gate measures it (one host sync) only
    where the rule would compare it with the threshold."""
    return params.enabled and state.has_reference and not params.in_forced_window(index, n)


def decide_firstblock(
    params: FirstBlockParams,
    state: FirstBlockScalars,
    index: int,
    num_steps: int,
    change: float | None,
) -> Verdict:
    """Decide step ``index`` and update ``state`` in place. ``change`` is ``d`` against the last
    computed step's first-block residual (None where there is none). The verdict's
    ``accumulated`` is the ``d`` compared with the threshold; a computed step that stores
    (``store_residual``) becomes the next steps' reference."""
    if not params.enabled:
        return Verdict(index, Decision.computed)
    if index < params.warmup_steps:
        state.streak = 0
        state.has_reference = True
        return Verdict(index, Decision.forced, store_residual=True)
    if index >= num_steps - params.skip_last:
        # Nothing after the last steps can reuse a residual, so none is stored.
        state.streak = 0
        state.has_reference = False
        return Verdict(index, Decision.forced)
    if not state.has_reference or change is None:
        state.streak = 0
        state.has_reference = True
        return Verdict(index, Decision.computed, store_residual=True)
    if not math.isfinite(change):
        state.streak = 0
        state.has_reference = False
        return Verdict(index, Decision.numerical_miss, accumulated=change)
    below = params.forced or change < params.threshold
    if below and state.streak < params.max_consecutive_skips:
        state.streak += 1
        return Verdict(index, Decision.skipped, accumulated=change)
    state.streak = 0
    return Verdict(index, Decision.computed, accumulated=change, store_residual=True)


# A vanilla run's trace for the probe: per step, ``d`` against each previous step, nearest first
# (``changes[k]`` compares with step ``index − 1 − k``); None where the step recorded none.
ProbeTrace = Sequence[Sequence[float] | None]


def change_against(changes: Sequence[float] | None, gap: int) -> float | None:
    """``d`` against the step ``gap`` steps back, where the trace holds it."""
    if changes is None or not 1 <= gap <= len(changes):
        return None
    value = changes[gap - 1]
    return None if value is None else float(value)


def simulate_firstblock(params: FirstBlockParams, trace: ProbeTrace) -> list[Verdict]:
    """The live gate's verdicts on a vanilla run's trace: each step's ``d`` is read against the
    last computed step the simulation itself kept as its reference (see the module docstring)."""
    state = FirstBlockScalars()
    num_steps = len(trace)
    reference: int | None = None
    verdicts = []
    for index, changes in enumerate(trace):
        change = None
        if reference is not None and wants_change(params, state, index, num_steps):
            change = change_against(changes, index - reference)
        verdict = decide_firstblock(params, state, index, num_steps, change)
        if verdict.store_residual:
            reference = index
        verdicts.append(verdict)
    return verdicts


def consecutive(trace: ProbeTrace) -> list[float | None]:
    """``d`` against the previous step, per step (the gate plot's vanilla series)."""
    return [change_against(changes, 1) for changes in trace]


def onset(params: FirstBlockParams, trace: ProbeTrace) -> tuple[int, float | None, int | None]:
    """(eligible steps, the onset, its step). Before the first skip every step computes, so each
    eligible step compares with the step before it: a threshold strictly above the smallest of
    those ``d`` skips that step (the rule compares with ``<``), none at or below it skips any."""
    probe = params.with_threshold(max(params.threshold, 1e-12))
    num_steps = len(trace)
    eligible = probe.eligible_steps(num_steps)
    best: tuple[float, int] | None = None
    first = max(probe.warmup_steps, 1)
    for index in range(first, max(first, num_steps - probe.skip_last)):
        change = change_against(trace[index], 1)
        if change is None or not math.isfinite(change):
            continue
        if best is None or change < best[0]:
            best = (change, index)
    if best is None:
        return eligible, None, None
    return eligible, best[0], best[1]


def firstblock_figures(verdict: Verdict) -> dict[str, float | None]:
    """The probe's figures of a step it decided (its section of ``StepEvent.signals``), the live
    gate's and the simulator's alike: the first blocks' change it compared, against the last
    computed step."""
    return {"change": verdict.accumulated}
