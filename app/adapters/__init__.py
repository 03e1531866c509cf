"""Per-family mflux adapters that put a ``LiveGate`` between a transformer's body and tail.

``install_gate(pipeline, gate)`` picks the adapter of the pipeline's family (by mflux class, from
``app.families``); the returned installation is a context manager whose exit restores the
pipeline exactly::

    with install_gate(pipeline, gate):
        pipeline.generate_image(...)

Importing this package does not import mflux; the family modules are loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.adapters.base import GateLifecycle, Installation
from app.adapters.common import AdapterError, AlreadyInstalledError, UnsupportedPipelineError
from app.families import FAMILIES, Family, load
from app.gate import LiveGate

__all__ = [
    "AdapterError",
    "AlreadyInstalledError",
    "GateLifecycle",
    "Installation",
    "UnsupportedPipelineError",
    "detect_family",
    "install_gate",
]


def _mflux_families() -> list[tuple[type, Family]]:
    """(mflux's pipeline class, its family) for every mflux family: imports mflux."""
    return [(f.mflux.pipeline(), f) for f in FAMILIES.values() if f.mflux is not None]


def detect_family(pipeline: Any) -> Family:
    """The family of an mflux pipeline: the first class in its MRO that is a family's pipeline
    class (its own before a base's), or ``UnsupportedPipelineError``."""
    families = _mflux_families()
    by_class = dict(families)
    for cls in type(pipeline).__mro__:
        if cls in by_class:
            return by_class[cls]
    supported = ", ".join(f"{f.display_name} ({cls.__name__})" for cls, f in families)
    raise UnsupportedPipelineError(
        f"TeaCache has no adapter for {type(pipeline).__name__}; supported: {supported}"
    )


def _installer(family: Family) -> Callable[[Any, LiveGate], Installation]:
    """The ``install`` of the family's adapter module (``Family.adapter``)."""
    if family.adapter is None:
        raise UnsupportedPipelineError(f"TeaCache has no adapter for {family.display_name}")
    return load(family.adapter).install


def install_gate(pipeline: Any, gate: LiveGate) -> Installation:
    """Install ``gate`` on ``pipeline`` (transactional: on any error nothing is left behind)."""
    return _installer(detect_family(pipeline))(pipeline, gate)
