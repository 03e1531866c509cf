"""What a skipped step adds: the fill, chosen apart from the gate that decided to skip.

Every gate kind decides *when* to skip; on a skipped step the gated step asks the live gate for
the residual to add (``LiveGate.residual``), and the gate asks its fill. Each fill is a small
object in ``FILLS`` (a kind is a registry entry, not a branch):

- ``reuse``: the last computed step's residual, unchanged (TeaCache's, and every gate's before).
- ``forecast``: a finite-difference Taylor forecast of the residual from the last computed
  steps, spaced by the schedule's own step positions (the sigmas of the run's scheduler; evenly
  where a scheduler exposes none), forecast at most ``horizon`` steps past the last computed one
  and held there for the rest of the streak (a longer reach extrapolates into error:
  lab/gates/fill.py measured it).

After a streak, the step that computes shows how far the fill was off: ``FillMemory`` compares,
on the conditional branch, what the fill added on each skipped step with the straight line
between the residuals on either side of the streak (the best estimate of the true residual there
once both ends are known), relative to the closing residual's size, and records the streak's
worst step for the fill and for ``reuse`` beside it (``StepEvent.fill``). A guarded fill (the
shipped ``forecast``) uses that check: after a streak where forecasting was further off than
reuse would have been, it reuses for the next streak, and forecasts again once a check says it is
closer.

Plain Python (the command line lists the fills without loading MLX): a fill does arithmetic on
the arrays it is given; the live gate's kept history is ``app.gate.fill_memory.FillMemory``, dropped
with the residuals (``release``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

if TYPE_CHECKING:  # the fills do arithmetic on the arrays they are given: no MLX import
    import mlx.core as mx

DEFAULT_FILL: Final = "reuse"

# The per-step record's keys (``StepEvent.fill``): on a skipped step, how many steps past the
# last computed one the added change was forecast to (0: the last computed change as it was); on
# the computed step that closes a streak, the streak's worst estimated relative error of the fill
# and of reuse.
REACH: Final = "reach"
ERROR: Final = "error"
REUSE_ERROR: Final = "reuse_error"


@dataclass(frozen=True, slots=True)
class Kept:
    """A computed step's residual, with the step's index in the generation."""

    index: int
    residual: mx.array


class Fill(ABC):
    """One way to fill a skipped step."""

    name: ClassVar[str]
    choice: ClassVar[str]  # the window's words after "On a skipped step:"
    caption: ClassVar[str]  # after the skips in a caption: "10/28 skipped, forecast"

    @property
    def depth(self) -> int:
        """The computed residuals it reads, per branch (what ``FillMemory`` keeps)."""
        return 1

    @property
    def guarded(self) -> bool:
        """Whether it reuses for a streak after one where reuse would have been closer."""
        return False

    @abstractmethod
    def describe(self) -> str:
        """What it adds on a skipped step, in one sentence (Details, help, the README)."""

    @abstractmethod
    def reach(self, kept: Sequence[Kept], index: int) -> int:
        """Steps past the last kept one that step ``index``'s fill is forecast to (0: none)."""

    @abstractmethod
    def residual(self, kept: Sequence[Kept], positions: Sequence[float], index: int) -> mx.array:
        """What step ``index`` adds, from ``kept`` (oldest first, at least one) on the schedule's
        ``positions``."""


class Reuse(Fill):
    name = "reuse"
    choice = "reuse the last change"
    caption = "reused"

    def describe(self) -> str:
        return "adds the last computed step's change unchanged"

    def reach(self, kept: Sequence[Kept], index: int) -> int:
        return 0

    def residual(self, kept: Sequence[Kept], positions: Sequence[float], index: int) -> mx.array:
        return kept[-1].residual


@dataclass(frozen=True, slots=True)
class Forecast(Fill):
    """A Taylor forecast by finite differences over the schedule's positions: ``order`` 1 (the
    last two computed residuals) or 2 (three), forecast at most ``horizon`` steps past the last
    computed step and held beyond it (None: unbounded), the difference terms scaled by
    ``damping``. ``corrected`` (first order): the slope is the mean of the last two intervals'
    slopes (three computed residuals), a Heun-style correction of the last difference after
    FoCa's predictor–corrector (our reading of the idea, not its code). ``guarded``: reuse for a
    streak after one where forecasting was further off than reuse (``FillMemory``)."""

    order: int = 1
    horizon: int | None = 1
    damping: float = 1.0
    guard: bool = False
    corrected: bool = False

    name: ClassVar[str] = "forecast"
    choice: ClassVar[str] = "forecast it"
    caption: ClassVar[str] = "forecast"

    def __post_init__(self) -> None:
        if self.order not in (1, 2):
            raise ValueError(f"a forecast's order is 1 or 2, got {self.order!r}")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"a forecast's horizon is at least 1 step, got {self.horizon!r}")
        if self.corrected and self.order != 1:
            raise ValueError("a corrected slope is a first-order forecast's")

    @property
    def depth(self) -> int:
        return self.order + 2 if self.corrected else self.order + 1

    @property
    def guarded(self) -> bool:
        return self.guard

    def describe(self) -> str:
        order = "first" if self.order == 1 else "second"
        reach = (
            "as far as the skipped step"
            if self.horizon is None
            else f"{self.horizon} step{'s' if self.horizon != 1 else ''} past the last computed "
            "one, then held"
        )
        guard = "; after a streak where reuse would have been closer, it reuses" * self.guard
        return (
            f"adds a {order}-order forecast of the change from the last computed steps over the "
            f"schedule's sigmas, {reach}{guard}"
        )

    def reach(self, kept: Sequence[Kept], index: int) -> int:
        if len(kept) < 2:
            return 0
        ahead = index - kept[-1].index
        return ahead if self.horizon is None else min(ahead, self.horizon)

    def residual(self, kept: Sequence[Kept], positions: Sequence[float], index: int) -> mx.array:
        reach = self.reach(kept, index)
        last = kept[-1]
        if reach == 0:
            return last.residual
        used = kept[-self.depth :]
        s = [position_of(positions, k.index) for k in used]
        target = position_of(positions, last.index + reach)
        residuals = [k.residual for k in used]
        h1 = s[-1] - s[-2]
        if h1 == 0.0 or not math.isfinite(h1):
            return last.residual
        x = (target - s[-1]) / h1  # in units of the last computed interval
        slope = residuals[-1] - residuals[-2]
        if len(residuals) < 3:
            return last.residual + (self.damping * x) * slope
        h0 = s[-2] - s[-3]
        if h0 == 0.0 or not math.isfinite(h0):
            return last.residual + (self.damping * x) * slope
        previous = (residuals[-2] - residuals[-3]) * (h1 / h0)  # in the last interval's units
        if self.corrected:
            return last.residual + (self.damping * x * 0.5) * (slope + previous)
        # Newton's divided differences on uneven spacing: the quadratic through the three.
        curvature = (x * (target - s[-2]) / (s[-1] - s[-3])) * (slope - previous)
        return last.residual + (self.damping * x) * slope + self.damping * curvature


def position_of(positions: Sequence[float], index: int) -> float:
    """Step ``index``'s position on the schedule; evenly spaced past its end (or with none)."""
    if 0 <= index < len(positions):
        return positions[index]
    if len(positions) >= 2:
        return positions[-1] + (index - len(positions) + 1) * (positions[-1] - positions[-2])
    return float(index)


REUSE: Final = Reuse()
# Chosen on the demo's development scenes (``lab.gates.fill dev``; its rows, stopped in the 25th
# of 40 scenes, in lab/gates/results/fill-dev.partial.jsonl): first order, one step past the last
# computed step then held, guarded. It raised mean SSIM over reuse at all five settings tried (by
# 0.003-0.009) and was within 0.005 of the best variant at each; a two-step horizon, damping 0.75
# and the Heun-style slope each won somewhere and lost elsewhere.
FORECAST: Final = Forecast(order=1, horizon=1, guard=True)
FILLS: Final[dict[str, Fill]] = {fill.name: fill for fill in (REUSE, FORECAST)}


class UnknownFillError(ValueError):
    def __init__(self, name: object) -> None:
        super().__init__(f"unknown fill {name!r}; choose one of: {', '.join(FILLS)}")


def check_fill(name: object) -> str:
    """The fill's name, or ``UnknownFillError`` with one sentence."""
    if not isinstance(name, str) or name not in FILLS:
        raise UnknownFillError(name)
    return name


def get_fill(name: str) -> Fill:
    return FILLS[check_fill(name)]


def recorded_fill(value: object) -> str:
    """A fill's name as a file recorded it: reuse where none is recorded (every run before there
    was a choice reused) or where it names a fill this version lacks."""
    return value if isinstance(value, str) and value in FILLS else DEFAULT_FILL


def even_positions(num_steps: int) -> tuple[float, ...]:
    """Evenly spaced positions, for a scheduler that exposes none."""
    return tuple(float(i) for i in range(num_steps))
