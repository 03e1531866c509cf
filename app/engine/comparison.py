"""Compare thresholds: one request, 4–8 thresholds, one vanilla pass and a gated pass per threshold
resumed from it (issue #20). Plain data and the checks on it; ``app.engine.jobs`` runs it (a job).

Qt-free and MLX-free. Every check raises ``RequestError`` with one sentence for the user.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.engine.report import RunReport
from app.engine.request import GenerationRequest, RequestError
from app.gate.kinds import DEFAULT_GATE, GateParamsLike, gate_kind, kind_of
from app.variants import Variant, check_schedule

MIN_THRESHOLDS = 4
MAX_THRESHOLDS = 8
DEFAULT_COUNT = 6
# Multiples of the variant's default threshold when no vanilla trace says where skips change; the
# larger ones stand in for small ones the calibration says cannot skip (#27 item 21).
_SPREAD = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
_EXAMPLE = "0.05, 0.1, 0.2, 0.3"


@dataclass(frozen=True, slots=True)
class ThresholdComparison:
    """The one frozen object a comparison hands the engine thread: the request every entry shares
    (its threshold is the one the user had) and the thresholds, checked and in ascending order."""

    base: GenerationRequest
    thresholds: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", check_thresholds(self.thresholds))

    def requests(self) -> tuple[GenerationRequest, ...]:
        """One request per threshold; every gated pass resumes from the shared vanilla."""
        return tuple(
            replace(self.base, threshold=t, resume=True, compare_vanilla=True)
            for t in self.thresholds
        )


@dataclass(frozen=True, slots=True)
class ComparisonResult:
    """What a comparison produced: one report per finished threshold, in threshold order.

    ``cancelled`` or ``failure`` say why it stopped early; the finished entries are kept."""

    comparison: ThresholdComparison
    reports: tuple[RunReport, ...]
    cancelled: bool = False
    failure: str | None = None

    @property
    def complete(self) -> bool:
        return len(self.reports) == len(self.comparison.thresholds)


def check_thresholds(values: Sequence[float]) -> tuple[float, ...]:
    """4–8 distinct values in [0, 1], returned in ascending order."""
    count = len(values)
    if not MIN_THRESHOLDS <= count <= MAX_THRESHOLDS:
        raise RequestError(
            f"compare {MIN_THRESHOLDS} to {MAX_THRESHOLDS} thresholds, got {count}"
            f" (for example {_EXAMPLE})"
        )
    seen: set[float] = set()
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RequestError(f"threshold {value!r} is not a number")
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise RequestError(f"threshold {value:g} is outside 0 to 1")
        if float(value) in seen:
            raise RequestError(f"threshold {value:g} appears twice; list each threshold once")
        seen.add(float(value))
    return tuple(sorted(float(v) for v in values))


def parse_thresholds(text: str) -> tuple[float, ...]:
    """``"0.05, 0.1 0.2; 0.3"`` → checked thresholds (commas, spaces or semicolons between)."""
    parts = [p for p in re.split(r"[,;\s]+", text.strip()) if p]
    values: list[float] = []
    for part in parts:
        try:
            values.append(float(part))
        except ValueError:
            raise RequestError(
                f"{part!r} is not a number; write thresholds like {_EXAMPLE}"
            ) from None
    return check_thresholds(values)


def format_thresholds(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def default_thresholds(
    variant: Variant,
    steps: int,
    trace: Sequence[float | None] | None = None,
    *,
    around: float | None = None,
    count: int = DEFAULT_COUNT,
    gate: str = DEFAULT_GATE,
) -> tuple[float, ...]:
    """``count`` thresholds around ``around`` (else the variant's default).

    With the vanilla trace of this schedule, each pick skips a different number of steps on it
    (the simulator is exact up to the first skip, so the picks really differ there): the range
    where skipping happens is split at every change of the simulated skip count, and ``count``
    of those bands are taken evenly, the one holding ``around`` among them. Without a trace (or
    where the trace never skips) they are multiples of ``around``. MagCache needs no trace: its
    simulation is exact from its table and ``steps``."""
    count = max(MIN_THRESHOLDS, min(MAX_THRESHOLDS, count))
    centre = around if around is not None and around > 0 else _fallback_centre(variant, gate)
    if gate_kind(gate).exact_simulation:  # reads no trace: exact from its calibration
        trace = [None] * steps
    if trace is not None and len(trace) == steps:
        params = variant.params_for(gate, max(centre, 1e-9))
        picked = _from_trace(params, trace, centre, count)
        if picked is not None:
            return picked

    # Each default must teach something: none the gate's calibration says cannot skip a step
    # here (the dialog would flag it "cannot skip any step"), unless no threshold can.
    def skips(value: float) -> bool:
        return check_schedule(variant, steps, value, gate=gate).can_skip

    spread = [_round(min(1.0, centre * factor)) for factor in _SPREAD]
    values: list[float] = []
    for value in [v for v in spread if skips(v)] or spread:
        if value not in values:
            values.append(value)
        if len(values) == count:
            break
    low = min(values)
    while len(values) < count:  # a centre near 1 runs out upwards: continue downwards,
        lower = _round(low / 2)  # while a smaller threshold still skips (or never did)
        if lower in values or (skips(low) and not skips(lower)):
            break
        values.append(low := lower)
    while len(values) < MIN_THRESHOLDS:  # too few that skip: smaller ones after all
        values.append(low := _round(low / 2))
    return check_thresholds(values)


def _fallback_centre(variant: Variant, gate: str = DEFAULT_GATE) -> float:
    default = variant.default_threshold_for(gate)
    if default is not None:
        return default
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    floor = (
        None if calibration is None else kind.calibration_floor(calibration, variant.default_steps)
    )
    if floor is not None:  # a distilled schedule: just above its floor
        return min(1.0, floor * 1.2)
    return 0.1


def _skips(params: GateParamsLike, trace: Sequence[float | None], threshold: float) -> int:
    return kind_of(params).skipped(params.with_threshold(threshold), trace)


def _from_trace(
    params: GateParamsLike, trace: Sequence[float | None], centre: float, count: int
) -> tuple[float, ...] | None:
    onset = kind_of(params).engagement(params, trace).onset_threshold
    if onset is None or onset >= 1.0:
        return None
    onset = max(onset, 1e-6)  # a MagCache ratio of exactly 1 drifts by 0
    # A geometric grid from just above the onset to 1: fine where small thresholds differ.
    n = 240
    grid = [onset * (1.0 / onset) ** (i / (n - 1)) * (1 + 1e-6) for i in range(n)]
    grid = [min(1.0, g) for g in grid]
    bands: list[tuple[int, list[float]]] = []  # (skips, thresholds giving it)
    for threshold in grid:
        skips = _skips(params, trace, threshold)
        if bands and bands[-1][0] == skips:
            bands[-1][1].append(threshold)
        else:
            bands.append((skips, [threshold]))
    if len(bands) < count:
        return None
    # The band's geometric middle, rounded: away from both edges, so rounding stays inside it.
    middles = [math.sqrt(b[1][0] * b[1][-1]) for b in bands]
    home = min(range(len(bands)), key=lambda i: abs(math.log(middles[i] / centre)))
    chosen = {round(i * (len(bands) - 1) / (count - 1)) for i in range(count)}
    if home not in chosen:
        chosen.remove(min(chosen, key=lambda i: abs(i - home)))
        chosen.add(home)
    picks = [middles[i] for i in sorted(chosen)]
    wanted = [bands[i][0] for i in sorted(chosen)]
    for digits in (2, 3, 4):  # the fewest digits that keep every pick inside its band
        values = [min(1.0, float(f"{v:.{digits}g}")) for v in picks]
        got = [_skips(params, trace, v) for v in values]
        if got == wanted and len(set(values)) == count:
            return check_thresholds(values)
    return None


def _round(value: float) -> float:
    """Two significant digits: thresholds a person can read and type back."""
    if value <= 0:
        return 0.0
    return float(f"{value:.2g}")
