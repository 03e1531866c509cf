"""The kept residuals of a live gate and the fill that reads them (``app.gate.fill``), MLX."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import cast

import mlx.core as mx

from app.gate.fill import ERROR, REACH, REUSE, REUSE_ERROR, Fill, Kept, position_of

COND = "cond"  # the branch a check follows (under CFG both branches share the verdict)
_EPS = 1e-12


class FillMemory:
    """The kept residuals of one generation, per branch, and the fill that reads them: what the
    live gate holds in place of one residual per branch (``LiveGate``'s residual cache).

    ``keep`` adds a computed step's residual; ``residual`` answers a skipped step; ``clear`` drops
    everything (a step that may not be bridged); ``release`` also drops the pending check. On the
    conditional branch the computed step that closes a streak checks the fill (lazily: its
    reductions are evaluated with the step's latents, ``unevaluated``); ``record`` reads the
    step's record at its end."""

    def __init__(self, fill: Fill = REUSE) -> None:
        self.fill = fill
        self.positions: tuple[float, ...] = ()
        self._kept: dict[str, list[Kept]] = {}
        self._skipped: list[int] = []  # this streak's skipped steps (conditional branch)
        self._check: mx.array | None = None
        self._reach: int | None = None
        self._unevaluated: list[mx.array] = []
        self._trusted = True  # a guarded fill forecasts while the last check found it closer

    def begin(self, positions: Sequence[float]) -> None:
        self.release()
        self.positions = tuple(float(p) for p in positions)
        self._trusted = True

    def release(self) -> None:
        self.clear()
        self._check = None
        self._reach = None
        self._unevaluated = []

    def clear(self) -> None:
        self._kept.clear()
        self._skipped = []

    # -- the residual cache's face (``LiveGate``) ----------------------------------------------
    def __contains__(self, branch: object) -> bool:
        return branch in self._kept

    def __iter__(self) -> Iterator[str]:
        return iter(self._kept)

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, branch: str) -> mx.array | None:
        kept = self._kept.get(branch)
        return kept[-1].residual if kept else None

    def __getitem__(self, branch: str) -> mx.array:
        kept = self._kept.get(branch)
        if not kept:
            raise KeyError(branch)
        return kept[-1].residual

    # -- per step ------------------------------------------------------------------------------
    @property
    def _active(self) -> Fill:
        return self.fill if self._trusted or not self.fill.guarded else REUSE

    def residual(self, branch: str, index: int) -> mx.array:
        """What skipped step ``index`` adds on ``branch``; ``KeyError`` where nothing is kept."""
        kept = self._kept.get(branch)
        if not kept:
            raise KeyError(branch)
        fill = self._active
        added = fill.residual(kept, self.positions, index)
        if branch == COND and index not in self._skipped:
            self._skipped.append(index)
            self._reach = fill.reach(kept, index)
        return added

    def keep(self, branch: str, index: int, residual: mx.array) -> None:
        """A computed step's residual; on the conditional branch after a streak, the check."""
        kept = self._kept.setdefault(branch, [])
        if branch == COND and self._skipped and kept:
            self._check = self._checked(kept, index, residual)
            self._unevaluated.append(self._check)
        if branch == COND:
            self._skipped = []
        kept.append(Kept(index, residual))
        del kept[: -self.fill.depth]

    def _checked(self, kept: Sequence[Kept], index: int, after: mx.array) -> mx.array:
        """``[fill's worst, reuse's worst, size]``: over the streak's skipped steps, the largest
        mean |added − line| with ``line`` the straight line (over the positions) between the
        residuals on either side, and the mean |after| they are relative to (float32). What
        each step added is recomputed (the fill is a function of what is kept), not held."""
        fill = self._active
        before = kept[-1]
        s0 = position_of(self.positions, before.index)
        span = position_of(self.positions, index) - s0
        start = before.residual.astype(mx.float32)
        change = after.astype(mx.float32) - start
        change_size = mx.mean(mx.abs(change))
        fill_errors, reuse_errors = [], []
        for step in self._skipped:
            theta = (position_of(self.positions, step) - s0) / span if span else 0.0
            reuse_errors.append(abs(theta) * change_size)
            if fill.reach(kept, step) == 0:  # it added ``before`` as it was: reuse's error
                fill_errors.append(reuse_errors[-1])
                continue
            added = fill.residual(kept, self.positions, step).astype(mx.float32)
            fill_errors.append(mx.mean(mx.abs(added - (start + theta * change))))
        size = mx.mean(mx.abs(after.astype(mx.float32)))
        return mx.stack([mx.max(mx.stack(fill_errors)), mx.max(mx.stack(reuse_errors)), size])

    def unevaluated(self) -> list[mx.array]:
        pending, self._unevaluated = self._unevaluated, []
        return pending

    def record(self) -> Mapping[str, float]:
        """The step's record (``StepEvent.fill``), read once at its end (evaluated already)."""
        out: dict[str, float] = {}
        if self._reach is not None:
            out[REACH] = float(self._reach)
        if self._check is not None:
            worst, reuse_worst, size = cast(list[float], self._check.tolist())
            out[ERROR] = _ratio(worst, size)
            out[REUSE_ERROR] = _ratio(reuse_worst, size)
            if self.fill.guarded:
                self._trusted = not out[ERROR] > out[REUSE_ERROR]
        self._check = None
        self._reach = None
        return out


def _ratio(num: float, den: float) -> float:
    value = num / max(den, _EPS)
    return value if math.isfinite(value) else math.nan
