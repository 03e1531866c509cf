"""The registry of gate kinds: one small module per decision rule, looked up by name.

``GATE_KINDS`` maps a gate's name ("teacache", "magcache", "firstblock") to its ``GateKind``
(``base.py``): its label, what its threshold means, its parameters from the variant's calibration
for it, its simulator, engagement onset, target-search candidates, live gate, and how the plot,
the timeline, Details, exports and the history word it. Code outside ``app/gate`` asks
``gate_kind(name)`` or ``kind_of(params)`` and never branches on a gate's name
(``tests/gate/test_gate_kinds.py``).

Adding a kind: a module here (its rule on floats beside it in ``app/gate``), its live subclass of
``LiveGate`` in ``live.py``, its entry below, and its calibration on ``Variant`` (where it needs
one: ``Variant.calibrations``; the kind's ``calibration_type`` says which it reads).
``docs/architecture.md`` has the recipe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from app.gate.decision import GateConfigError, TeaCacheParams
from app.gate.events import StepEvent
from app.gate.kinds.base import (
    THRESHOLD_DECIMALS,
    Calibrated,
    CalibrationMethod,
    Candidate,
    GateKind,
    GateParamsLike,
    PlotSpec,
    ScheduleFacts,
    Signal,
    format_threshold,
)
from app.gate.kinds.firstblock import (
    FIRSTBLOCK_KIND,
    FirstBlockCalibration,
)
from app.gate.kinds.magcache import (
    MAGCACHE_KIND,
    MagCacheCalibration,
    magcache_from_document,
    magcache_from_json,
)
from app.gate.kinds.teacache import TEACACHE_KIND, TeaCacheCalibration

if TYPE_CHECKING:
    from app.gate.fill import Fill
    from app.gate.live import LiveGate

AnyGateKind = GateKind[Any, Any, Any]

# In the picker's order; the first is the default where a variant has its calibration.
GATE_KINDS: Final[dict[str, AnyGateKind]] = {
    kind.name: kind for kind in (TEACACHE_KIND, MAGCACHE_KIND, FIRSTBLOCK_KIND)
}
GATES: Final = tuple(GATE_KINDS)
DEFAULT_GATE: Final = TEACACHE_KIND.name
# Where TeaCache has no calibration for the model that runs (a variant without one, a model
# folder's fine-tune, a LoRA set): the kind that needs none (``Variant.default_gate``).
UNCALIBRATED_GATE: Final = FIRSTBLOCK_KIND.name
# The kind whose observing live gate records the vanilla pass: it measures every kind's signal
# (TeaCache's rel-L1 and prediction, MagCache's magnitude ratio, the probe's first-block changes),
# so one vanilla pass serves every gate's simulator, plot and calibration, and the vanilla cache
# stays valid across a gate switch.
OBSERVER: Final = TEACACHE_KIND
# The observer's polynomial where the variant has no TeaCache calibration: it never skips, so its
# polynomial only prices the recorded signal for TeaCache's plot, which such a variant never shows;
# the identity keeps the recorded ``predicted`` equal to the measured change.
_UNPRICED = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 1.0, 0.0), rel_l1_thresh=0.0)


class UnknownGateError(ValueError):
    def __init__(self, name: object) -> None:
        super().__init__(f"unknown gate {name!r}; choose one of: {', '.join(GATES)}")


def check_gate(name: object) -> str:
    """The gate's name, or ``UnknownGateError`` with one sentence."""
    if not isinstance(name, str) or name not in GATE_KINDS:
        raise UnknownGateError(name)
    return name


def recorded_gate(value: object) -> str:
    """A gate's name as a file recorded it: the default where none is recorded (files from
    before there was a second gate) or where it names a gate this version lacks."""
    return value if isinstance(value, str) and value in GATE_KINDS else DEFAULT_GATE


def gate_kind(name: str) -> AnyGateKind:
    """The kind called ``name``; ``UnknownGateError`` with one sentence for any other."""
    return GATE_KINDS[check_gate(name)]


def kind_of(params: GateParamsLike) -> AnyGateKind:
    """The kind whose parameters ``params`` are."""
    return gate_kind(params.gate)


def calibrated_gates() -> tuple[str, ...]:
    """The kinds ``teacache-studio calibrate`` can measure a calibration for."""
    return tuple(name for name, kind in GATE_KINDS.items() if kind.calibration_method is not None)


def observer_params(variant: Calibrated, gate: str, threshold: float) -> TeaCacheParams:
    """The vanilla pass's observer parameters for a run of ``gate`` at ``threshold``: the
    observer's own threshold where it is also the gate that runs (its events record it), else its
    calibration's default."""
    calibration = OBSERVER.calibration_of(variant)
    if calibration is None:  # a variant TeaCache has no numbers for: it runs another gate
        return _UNPRICED
    return OBSERVER.params(calibration, threshold if gate_kind(gate) is OBSERVER else None)


def make_gate(
    params: GateParamsLike,
    *,
    on_step: Callable[[StepEvent], None] | None = None,
    observe: bool = False,
    capture_output: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    fill: Fill | None = None,
) -> LiveGate:
    """The live gate for ``params`` (its kind's); ``observe`` gives the vanilla pass's observer,
    which records every kind's trace and never skips. ``fill``: what a skipped step adds
    (``app.gate.fill``; None: reuse)."""
    if observe:
        if not isinstance(params, TeaCacheParams):  # the observer's (``OBSERVER``)
            raise GateConfigError(
                f"a vanilla (observe) pass is recorded by the {OBSERVER.label} gate"
            )
        return OBSERVER.make_observer(
            params, on_step=on_step, capture_output=capture_output, clock=clock
        )
    gate = kind_of(params).make_live(params, on_step=on_step, clock=clock)
    if fill is not None:
        gate.fill = fill
    return gate


@contextmanager
def registered(kind: AnyGateKind) -> Iterator[AnyGateKind]:
    """``kind`` in ``GATE_KINDS`` for the block (a test's own gate kind), then gone again; the
    built-in ``GATES`` tuple stays as it is. ``ValueError`` where the name is taken."""
    if kind.name in GATE_KINDS:
        raise ValueError(f"a gate kind {kind.name!r} is registered already")
    GATE_KINDS[kind.name] = kind
    try:
        yield kind
    finally:
        del GATE_KINDS[kind.name]


__all__ = [
    "DEFAULT_GATE",
    "FIRSTBLOCK_KIND",
    "GATES",
    "GATE_KINDS",
    "MAGCACHE_KIND",
    "OBSERVER",
    "TEACACHE_KIND",
    "THRESHOLD_DECIMALS",
    "UNCALIBRATED_GATE",
    "AnyGateKind",
    "Calibrated",
    "CalibrationMethod",
    "Candidate",
    "FirstBlockCalibration",
    "GateKind",
    "GateParamsLike",
    "MagCacheCalibration",
    "PlotSpec",
    "ScheduleFacts",
    "Signal",
    "TeaCacheCalibration",
    "UnknownGateError",
    "calibrated_gates",
    "check_gate",
    "format_threshold",
    "gate_kind",
    "kind_of",
    "magcache_from_document",
    "magcache_from_json",
    "make_gate",
    "observer_params",
    "recorded_gate",
    "registered",
]
