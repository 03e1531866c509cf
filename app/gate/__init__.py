"""The gate kernel (every gate kind: see the registry, ``app.gate.kinds``): pure MLX, no Qt, no
mflux.

The decision rules (``decision``, ``magcache``), the telemetry record (``events``), the simulator
(``simulator``) and the registry of gate kinds (``kinds``) are plain Python; only the live gates
(``live``) need MLX. Their names are loaded on first use, so ``import app.variants`` (which reads
``app.gate.decision``) and the command line stay free of MLX — and MLX is imported only after
``app.blas.preload_openblas()`` had its chance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.gate.decision import (
    DEFAULT_MAX_CONSECUTIVE_SKIPS,
    Decision,
    GateConfigError,
    TeaCacheParams,
    Verdict,
    decide,
    poly_eval,
    predict_change,
    prediction_floor,
)
from app.gate.events import StepEvent
from app.gate.kinds import (
    DEFAULT_GATE,
    GATE_KINDS,
    GATES,
    GateKind,
    GateParamsLike,
    UnknownGateError,
    check_gate,
    gate_kind,
    kind_of,
    make_gate,
)
from app.gate.magcache import MagCacheParams, simulate_magcache
from app.gate.simulator import Engagement, engagement, pattern, simulate, skip_curve

if TYPE_CHECKING:
    from app.gate.live import (
        LiveGate,
        MagCacheGate,
        TeaCacheGate,
        VanillaRecorder,
        rel_l1,
        rel_l1_pair,
    )

_LIVE_NAMES = frozenset(
    {"LiveGate", "MagCacheGate", "TeaCacheGate", "VanillaRecorder", "rel_l1", "rel_l1_pair"}
)

__all__ = [
    "DEFAULT_GATE",
    "DEFAULT_MAX_CONSECUTIVE_SKIPS",
    "GATES",
    "GATE_KINDS",
    "Decision",
    "Engagement",
    "GateConfigError",
    "GateKind",
    "GateParamsLike",
    "LiveGate",
    "MagCacheGate",
    "MagCacheParams",
    "StepEvent",
    "TeaCacheGate",
    "TeaCacheParams",
    "UnknownGateError",
    "VanillaRecorder",
    "Verdict",
    "check_gate",
    "decide",
    "engagement",
    "gate_kind",
    "kind_of",
    "make_gate",
    "pattern",
    "poly_eval",
    "predict_change",
    "prediction_floor",
    "rel_l1",
    "rel_l1_pair",
    "simulate",
    "simulate_magcache",
    "skip_curve",
]


def __getattr__(name: str) -> Any:
    if name in _LIVE_NAMES:
        from app.gate import live

        value = getattr(live, name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LIVE_NAMES})
