"""Where a gate's calibration numbers come from: plain data every calibration carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Provenance:
    source: str
    fit_metric: str | None = None
    fit_value: float | None = None
    data_size: str | None = None
    reference: str | None = None
    notes: str | None = None
