"""Per-family mflux adapters that put a ``LiveGate`` between a transformer's body and tail.

``install_gate(pipeline, gate)`` picks the adapter for the pipeline's family; the returned
installation is a context manager whose exit restores the pipeline exactly::

    with install_gate(pipeline, gate):
        pipeline.generate_image(...)

Importing this package does not import mflux; the family modules are loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.adapters.base import GateLifecycle, Installation
from app.adapters.common import AdapterError, AlreadyInstalledError, UnsupportedPipelineError
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

SUPPORTED = "FLUX.1 (Flux1), FLUX.2 Klein (Flux2Klein), Z-Image (ZImage), Qwen-Image (QwenImage)"


def _families() -> list[tuple[type, str]]:
    from mflux.models.flux.variants.txt2img.flux import Flux1
    from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage
    from mflux.models.z_image.variants.z_image import ZImage

    return [(Flux1, "flux1"), (Flux2Klein, "flux2"), (ZImage, "z-image"), (QwenImage, "qwen-image")]


def detect_family(pipeline: Any) -> str:
    """The adapter family of an mflux pipeline (by class), or ``UnsupportedPipelineError``."""
    for cls, family in _families():
        if isinstance(pipeline, cls):
            return family
    raise UnsupportedPipelineError(
        f"TeaCache has no adapter for {type(pipeline).__name__}; supported: {SUPPORTED}"
    )


def _installer(family: str) -> Callable[[Any, LiveGate], Installation]:
    if family == "flux1":
        from app.adapters import flux1

        return flux1.install
    if family == "flux2":
        from app.adapters import flux2

        return flux2.install
    if family == "z-image":
        from app.adapters import z_image

        return z_image.install
    from app.adapters import qwen_image

    return qwen_image.install


def install_gate(pipeline: Any, gate: LiveGate) -> Installation:
    """Install ``gate`` on ``pipeline`` (transactional: on any error nothing is left behind)."""
    return _installer(detect_family(pipeline))(pipeline, gate)
