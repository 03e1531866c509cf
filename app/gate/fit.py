"""Fitting TeaCache's rescaling polynomial: pure numpy, no MLX, no mflux.

TeaCache predicts how much the transformer output will change between two steps from how much its
cheap input signal changed: y ≈ poly(x) with x = rel-L1 change of the gate signal and y = rel-L1
change of the transformer output, both between consecutive steps of vanilla runs. The recipe
(mlx-teacache's, see research/anchor-mlx-teacache.md §8): 10+ prompts, every consecutive-step pair,
a degree-4 polynomial fitted either freely or through the origin (poly(0) = 0: no input change
predicts no output change), reported with R² and a held-out R² from a fit on part of the prompts.

Coefficients are stored high → low (``numpy.polyval`` order), as ``TeaCacheParams`` reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

FitMode = Literal["free", "origin"]
DEGREE = 4


def fit_polynomial(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    degree: int = DEGREE,
    mode: FitMode = "free",
) -> np.ndarray:
    """Least-squares coefficients, high → low, ``degree + 1`` of them (the constant is exactly 0
    in ``origin`` mode)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be 1-D and the same length")
    lowest = 1 if mode == "origin" else 0
    if len(xs) < degree + 1 - lowest:
        raise ValueError(f"need at least {degree + 1 - lowest} points for a degree-{degree} fit")
    powers = np.arange(degree, lowest - 1, -1)
    design = xs[:, None] ** powers[None, :]
    coefficients, *_ = np.linalg.lstsq(design, ys, rcond=None)
    if mode == "origin":
        coefficients = np.append(coefficients, 0.0)
    return coefficients


def r_squared(coefficients: Sequence[float] | np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """1 − SS_res / SS_tot (can be negative on held-out data)."""
    ys = np.asarray(y, dtype=np.float64)
    residual = ys - np.polyval(np.asarray(coefficients, dtype=np.float64), np.asarray(x))
    total = ((ys - ys.mean()) ** 2).sum()
    return float(1.0 - (residual**2).sum() / total) if total > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class PolynomialFit:
    mode: str
    coefficients: tuple[float, ...]  # high → low
    r2: float  # on all pairs
    heldout_r2: float | None  # fit on the fit groups, scored on the held-out groups
    data_size: int
    x_range: tuple[float, float]
    y_range: tuple[float, float]

    def predict(self, x: float | np.ndarray) -> np.ndarray:
        return np.polyval(np.asarray(self.coefficients), x)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def fit(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    mode: FitMode = "free",
    groups: Sequence[int] | np.ndarray | None = None,
    heldout: Sequence[int] = (),
    degree: int = DEGREE,
) -> PolynomialFit:
    """Fit on every pair; with ``groups`` (one id per pair, e.g. the prompt index) and ``heldout``
    group ids, also refit without the held-out groups and score that fit on them."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    coefficients = fit_polynomial(xs, ys, degree, mode)
    heldout_r2 = None
    if groups is not None and len(heldout):
        mask = np.isin(np.asarray(groups), np.asarray(list(heldout)))
        if mask.all() or not mask.any():
            raise ValueError("held-out groups must leave some pairs on both sides")
        partial = fit_polynomial(xs[~mask], ys[~mask], degree, mode)
        heldout_r2 = r_squared(partial, xs[mask], ys[mask])
    return PolynomialFit(
        mode=mode,
        coefficients=tuple(float(c) for c in coefficients),
        r2=r_squared(coefficients, xs, ys),
        heldout_r2=heldout_r2,
        data_size=len(xs),
        x_range=(float(xs.min()), float(xs.max())),
        y_range=(float(ys.min()), float(ys.max())),
    )


def choose(fits: dict[str, PolynomialFit]) -> PolynomialFit:
    """The origin fit unless the free fit is clearly better on held-out data (by 0.02 R²): an
    intercept predicts change where the input did not move, which mlx-teacache learned to avoid.

    A fit that dips below zero inside its calibrated range prices a real change as negative (the
    gate's running sum would fall, and its prediction floor is 0), so it loses to one that
    stays non-negative whatever the R²."""
    origin, free = fits["origin"], fits["free"]
    sane = [f for f in (origin, free) if minimum_on(f.coefficients, *f.x_range) >= 0.0]
    if len(sane) == 1:
        return sane[0]
    score_origin = origin.heldout_r2 if origin.heldout_r2 is not None else origin.r2
    score_free = free.heldout_r2 if free.heldout_r2 is not None else free.r2
    return free if score_free > score_origin + 0.02 else origin


def minimum_on(coefficients: Sequence[float], lo: float, hi: float, points: int = 2001) -> float:
    """Smallest value of the polynomial on [lo, hi] (dense grid)."""
    grid = np.linspace(lo, hi, points)
    return float(np.polyval(np.asarray(coefficients, dtype=np.float64), grid).min())
