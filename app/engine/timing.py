"""Timing rules that keep a Generate's two passes comparable, and the one speedup figure a run
reports. Qt-free, MLX-free.

* Warm-up: a discarded generation of ``WARMUP_STEPS`` steps under the registry's warm-up gate
  (``app.gate.kinds.warmup_gate``: computed, skipped, computed, whatever the weights: the body,
  the gate's signal, storing and reusing a residual all run once) before the first timed pass
  of a model and shape, so one-time costs land on neither pass.
* The ideal: skipping k of n active steps can make a run at most n / (n − k) times faster (a
  skipped step that costs nothing). :func:`measure_speedup` never reports more than that by more
  than the run's own measured spread:

  - nothing skipped: 1.00× ("nothing skipped"). Both passes did the same work, so the ratio of
    their times is timing noise; the times are still reported.
  - both passes timed in this run: the plain ratio of their loop times, *measured*, as long as it
    is at most the ideal × (1 + spread), where the spread is the half interquartile range of the
    paired step-time ratios (gated / vanilla, over the steps the gated pass really computed)
    relative to their median, and never more than ``MAX_TOLERANCE`` (5%). Above that the load
    changed between or during the passes: the figure is re-timed instead (below) and the label
    says why.
  - a cached vanilla (timed earlier, under whatever else the machine did then): re-timed. Every
    vanilla step, and every gated step replayed from the vanilla trajectory, is counted at this
    pass's mean computed-step time; the gated steps that ran count as measured. The figure is then
    n / (computed + skipped seconds / mean computed step): exactly the ideal where skipped steps
    cost nothing, below it by what they cost, never above it, whatever the load did. The spread
    reported is that of the computed steps' times around their median.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from app.gate import Decision, StepEvent

WARMUP_STEPS = 3
# Float headroom for "at most the ideal": a ratio computed two ways may differ in the last bits.
_ROUNDING = 1e-9
# A measured figure may sit above the ideal by its step ratios' spread, and never by more than
# this, however wide that spread (the bound tests/test_committed_speedups.py holds results to):
# under heavy load the paired step ratios spread ±40% (a 2-core host at load 12, measured), and a
# figure 40% above what skipping can deliver is load, not measurement.
MAX_TOLERANCE = 0.05


class SpeedupKind(StrEnum):
    nothing_skipped = "nothing skipped"  # 1.00 by definition: the same work on both sides
    measured = "measured"  # vanilla loop / gated loop, both timed in this run
    retimed = "re-timed"  # cached vanilla: counted at this run's computed-step time
    bounded = "bounded"  # measured above the ideal beyond its spread: re-timed instead
    not_retimed = "not re-timed"  # cached vanilla and no computed step to re-time it by


@dataclass(frozen=True, slots=True)
class Speedup:
    """The speedup of one run and how it was arrived at. ``value`` is
    ``vanilla_seconds / gated_seconds``: the times it is the ratio of (re-timed ones where the
    figure was re-timed)."""

    value: float
    kind: SpeedupKind
    measured: float  # vanilla loop / gated loop as timed, whatever ``kind`` says
    ideal: float  # active steps / computed steps
    spread: float  # relative half-IQR of the step ratios this figure used (0: one ratio)
    vanilla_seconds: float
    gated_seconds: float
    steps: int
    skipped: int

    @property
    def retimed(self) -> bool:
        return self.kind in (SpeedupKind.retimed, SpeedupKind.bounded)

    @property
    def basis(self) -> str:
        """One sentence: how ``value`` was obtained (report.json's ``speedup_basis``)."""
        return {
            SpeedupKind.nothing_skipped: "nothing skipped: both passes did the same work, so "
            "their time ratio is timing noise; reported as 1",
            SpeedupKind.measured: "both passes measured in this run",
            SpeedupKind.retimed: "cached vanilla: its steps (and replayed steps) counted at this "
            "run's mean computed-step time",
            SpeedupKind.bounded: "measured ratio above the ideal by more than its step-ratio "
            "spread (the load changed during the run): re-timed from this run's computed steps",
            SpeedupKind.not_retimed: "cached vanilla, not re-timed (no step computed in this run)",
        }[self.kind]


def ideal_speedup(steps: int, computed: int) -> float | None:
    """Active steps over computed steps: what skipping can deliver at most."""
    return steps / computed if computed > 0 else None


def measure_speedup(
    vanilla_steps: Sequence[StepEvent],
    vanilla_seconds: float,
    gated_steps: Sequence[StepEvent],
    gated_seconds: float,
    *,
    replayed: int = 0,
    vanilla_cached: bool = False,
) -> Speedup | None:
    """The run's speedup (see the module docstring); None where either loop time is missing.
    ``replayed``: the gated pass's first steps that carry vanilla's times (a resumed pass)."""
    if vanilla_seconds <= 0 or gated_seconds <= 0 or not gated_steps:
        return None
    steps = len(gated_steps)
    computed = sum(s.decision.computes for s in gated_steps)
    skipped = steps - computed
    measured = vanilla_seconds / gated_seconds
    ideal = ideal_speedup(steps, computed) or 1.0
    plain = Speedup(
        measured, SpeedupKind.measured, measured, ideal, 0.0, vanilla_seconds, gated_seconds,
        steps, skipped,
    )  # fmt: skip
    if skipped == 0:
        return replace(plain, value=1.0, kind=SpeedupKind.nothing_skipped)
    if not vanilla_cached:
        ratios = paired_ratios(vanilla_steps, gated_steps, first=replayed)
        spread = relative_spread(ratios)
        if measured <= ideal * (1 + min(spread, MAX_TOLERANCE)) + _ROUNDING:
            return replace(plain, spread=spread)
        retimed = retime(gated_steps, replayed=replayed)
        if retimed is None:
            return replace(plain, spread=spread)
        vanilla_now, gated_now, _ = retimed
        return replace(
            plain, value=vanilla_now / gated_now, kind=SpeedupKind.bounded, spread=spread,
            vanilla_seconds=vanilla_now, gated_seconds=gated_now,
        )  # fmt: skip
    retimed = retime(gated_steps, replayed=replayed)
    if retimed is None:
        return replace(plain, kind=SpeedupKind.not_retimed)
    vanilla_now, gated_now, spread = retimed
    return replace(
        plain, value=vanilla_now / gated_now, kind=SpeedupKind.retimed, spread=spread,
        vanilla_seconds=vanilla_now, gated_seconds=gated_now,
    )  # fmt: skip


def retime(gated: Sequence[StepEvent], *, replayed: int = 0) -> tuple[float, float, float] | None:
    """(vanilla seconds, gated seconds, spread) at this pass's load: every vanilla step and every
    replayed gated step counted at the mean time of the computed steps that ran (index ≥
    ``replayed``); the steps that ran as measured. None where no computed step ran."""
    ran = [s for s in gated if s.index >= replayed]
    computed = [s.seconds for s in ran if s.decision.computes and s.seconds > 0]
    if not computed:
        return None
    mean = statistics.fmean(computed)
    gated_now = mean * (len(gated) - len(ran)) + sum(s.seconds for s in ran)
    median = statistics.median(computed)
    return mean * len(gated), gated_now, relative_spread([t / median for t in computed])


def paired_ratios(
    vanilla: Sequence[StepEvent], gated: Sequence[StepEvent], first: int = 0
) -> list[float]:
    """Gated / vanilla step time over the steps the gated pass really computed (index ≥
    ``first``: earlier steps were replayed with vanilla's times); a numerical miss is left out."""
    by_index = {e.index: e for e in vanilla}
    ratios = []
    for step in gated:
        other = by_index.get(step.index)
        if step.index < first or other is None or not step.decision.computes:
            continue
        if step.decision is Decision.numerical_miss or other.seconds <= 0:
            continue
        ratios.append(step.seconds / other.seconds)
    return ratios


def relative_spread(values: Sequence[float]) -> float:
    """Half the interquartile range over the median (0 for fewer than two values): how far the
    middle half of the step ratios lies from their median."""
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    median = statistics.median(values)
    return (high - low) / (2 * median) if median > 0 else 0.0
