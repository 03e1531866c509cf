"""The registry of gate kinds: one small module per decision rule, looked up by name.

``GATE_KINDS`` maps a gate's name to its ``GateKind`` (``base.py``; see the registry below): its
label, what its threshold means, its parameters from the variant's calibration for it, its
simulator, engagement onset, target-search candidates, live gate, its record of a vanilla pass,
its figures on a step and in a report, and how the plot, the timeline, Details, exports and the
history word it. Code outside ``app/gate`` asks ``gate_kind(name)`` or ``kind_of(params)`` and
never branches on a gate's name nor imports a kind's own classes
(``tests/gate/test_gate_kinds.py``).

Adding a kind: a module here (its rule on floats beside it in ``app/gate``), its live subclass of
``LiveGate`` and its ``TapRecorder``, its entry below (or ``registered`` for a block), and its
calibration on ``Variant`` (where it needs one: ``Variant.calibrations``; the kind's
``calibration_type`` says which it reads). ``docs/architecture.md`` has the recipe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from app.gate.events import VANILLA, Figure, Figures, StepEvent, figures_from_json
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

# In the picker's order; the first is the default where a variant has its calibration. Every
# lookup reads this one dict, so a kind added by ``registered`` (a test's toy kind) is asked as the
# shipped ones are.
GATE_KINDS: Final[dict[str, AnyGateKind]] = {
    kind.name: kind for kind in (TEACACHE_KIND, MAGCACHE_KIND, FIRSTBLOCK_KIND)
}
GATES: Final = tuple(GATE_KINDS)  # the shipped kinds' names (``GATE_KINDS`` holds every one)
DEFAULT_GATE: Final = TEACACHE_KIND.name
# Where TeaCache has no calibration for the model that runs (a variant without one, a model
# folder's fine-tune, a LoRA set): the kind that needs none (``Variant.default_gate``).
UNCALIBRATED_GATE: Final = FIRSTBLOCK_KIND.name


class UnknownGateError(ValueError):
    def __init__(self, name: object) -> None:
        super().__init__(f"unknown gate {name!r}; choose one of: {', '.join(GATE_KINDS)}")


@contextmanager
def registered(kind: AnyGateKind) -> Iterator[AnyGateKind]:
    """``kind`` in the registry for the block, after the shipped kinds (what adding a kind module
    to ``GATE_KINDS`` does, from outside the package: a test's toy kind); taken out again after.
    ``ValueError`` where its name is taken."""
    if kind.name in GATE_KINDS or kind.name == VANILLA:
        raise ValueError(f"a gate kind named {kind.name!r} is registered already")
    GATE_KINDS[kind.name] = kind
    try:
        yield kind
    finally:
        GATE_KINDS.pop(kind.name, None)


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


def make_gate(
    params: GateParamsLike,
    *,
    on_step: Callable[[StepEvent], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    fill: Fill | None = None,
) -> LiveGate:
    """The live gate for ``params`` (its kind's). ``fill``: what a skipped step adds
    (``app.gate.fill``; None: reuse)."""
    gate = kind_of(params).make_live(params, on_step=on_step, clock=clock)
    if fill is not None:
        gate.fill = fill
    return gate


def warmup_gate(*, clock: Callable[[], float] = time.perf_counter) -> LiveGate:
    """The engine's untimed warm-up gate: the first kind's that forces computed, skipped,
    computed over three steps whatever the weights, with no calibration (``GateKind.warmup``)."""
    for kind in GATE_KINDS.values():
        params = kind.warmup()
        if params is not None:
            return kind.make_live(params, clock=clock)
    raise LookupError("no gate kind has a warm-up pattern")


def vanilla_recorder(
    variant: Calibrated,
    *,
    calibrating: bool = False,
    on_step: Callable[[StepEvent], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> LiveGate:
    """The vanilla pass's gate for ``variant``: every step computes, and every registered kind
    records its own trace (``GateKind.recorder``; ``calibrating``: the data its calibration is
    measured from too). One vanilla pass so serves every kind's simulator, plot and calibration,
    and the vanilla cache stays valid across a gate switch."""
    from app.gate.live import VanillaRecorder

    recorders = [
        recorder
        for kind in GATE_KINDS.values()
        if (recorder := kind.recorder(kind.calibration_of(variant), calibrating=calibrating))
        is not None
    ]
    return VanillaRecorder(recorders, on_step=on_step, clock=clock)


# -- each kind's sections in JSON (``app.engine.report``, ``app.storage.migrate``) ----------------
def signals_from_json(value: object) -> dict[str, Figures]:
    """A step's ``signals`` as ``StepEvent.as_dict`` wrote them, each section read by its kind
    (``GateKind.figures_from_json``; a kind this build lacks, as plain figures)."""
    if not isinstance(value, Mapping):
        return {}
    found: dict[str, Figures] = {}
    for name, section in value.items():
        kind = GATE_KINDS.get(str(name))
        found[str(name)] = (
            kind.figures_from_json(section) if kind is not None else figures_from_json(section)
        )
    return found


def legacy_signals(row: Mapping[str, Any], *, vanilla: bool) -> dict[str, dict[str, Figure]]:
    """The sections of a step row written before steps had them (each kind's figures were flat
    keys of the row; every kind reads its own, ``GateKind.legacy_figures``)."""
    deciding = recorded_gate(row.get("gate"))
    found: dict[str, dict[str, Figure]] = {}
    for name, kind in GATE_KINDS.items():
        section = kind.legacy_figures(row, deciding=name == deciding, vanilla=vanilla)
        if section is not None:
            found[name] = section
    return found


def gate_fields_to_json(fields: Mapping[str, Mapping[str, Any]]) -> dict[str, object]:
    """``RunReport.gate_fields`` in JSON, each section by its kind."""
    return {
        name: gate_kind(name).report_fields_to_json(section)
        if name in GATE_KINDS
        else dict(section)
        for name, section in fields.items()
    }


def gate_fields_from_json(value: object) -> dict[str, dict[str, Any]]:
    """``gate_fields_to_json`` read back, each section by its kind (a kind this build lacks, as
    it was written)."""
    if not isinstance(value, Mapping):
        return {}
    return {
        str(name): GATE_KINDS[str(name)].report_fields_from_json(section)
        if str(name) in GATE_KINDS
        else dict(section)
        for name, section in value.items()
        if isinstance(section, Mapping)
    }


def legacy_gate_fields(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's gate fields from before they had sections (flat keys; each kind reads its
    own, ``GateKind.legacy_report_fields``)."""
    found: dict[str, dict[str, Any]] = {}
    for name, kind in GATE_KINDS.items():
        fields = kind.legacy_report_fields(report)
        if fields is not None:
            found[name] = fields
    return found


__all__ = [
    "DEFAULT_GATE",
    "FIRSTBLOCK_KIND",
    "GATES",
    "GATE_KINDS",
    "MAGCACHE_KIND",
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
    "gate_fields_from_json",
    "gate_fields_to_json",
    "gate_kind",
    "kind_of",
    "legacy_gate_fields",
    "legacy_signals",
    "magcache_from_document",
    "magcache_from_json",
    "make_gate",
    "recorded_gate",
    "registered",
    "signals_from_json",
    "vanilla_recorder",
    "warmup_gate",
]
