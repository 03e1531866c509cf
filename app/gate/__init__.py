"""The TeaCache gate kernel: pure MLX, no Qt, no mflux."""

from app.gate.decision import (
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    Decision,
    GateConfigError,
    GateParams,
    Verdict,
    poly_eval,
    predict_change,
)
from app.gate.live import StepEvent, TeaCacheGate, rel_l1
from app.gate.simulator import Engagement, engagement, pattern, simulate, skip_curve

__all__ = [
    "DEFAULT_MAX_CONSECUTIVE_SKIPS",
    "Decision",
    "Engagement",
    "GateConfigError",
    "GateParams",
    "StepEvent",
    "TeaCacheGate",
    "Verdict",
    "engagement",
    "pattern",
    "poly_eval",
    "predict_change",
    "rel_l1",
    "simulate",
    "skip_curve",
]
