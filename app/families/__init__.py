"""The model families: one module per family, each holding all the app knows of it.

Each family module (every module here but ``spec`` and ``latent_rgb``: see ``FAMILIES``) defines
``FAMILY``, a ``Family`` (``app.families.spec``): label and order, mflux's classes and package, the
gate's adapter, latent unpacking and preview projection, the random-weight shell and real
dimensions, model-folder detection, memory per megapixel, and its capabilities (weights shipped
or from the Hub, quantizable, LoRA, a prompt check, a loader of its own). Every other package asks
this registry; none spells a family out, nor branches on one. Adding a family is one module here
(found by walking this package), its variants' rows in ``app.variants.builtin`` and its tests
(``tests/families/`` checks the module is complete).

Data only: importing this package imports neither MLX nor mflux.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from types import MappingProxyType

from app.families.spec import (
    GENERAL_SIZES,
    Family,
    FamilyError,
    FolderDetection,
    LatentPreview,
    Mflux,
    PromptFormat,
    RandomWeights,
    UnknownFamilyError,
    join_names,
    load,
)

__all__ = [
    "FAMILIES",
    "GENERAL_SIZES",
    "Family",
    "FamilyError",
    "FolderDetection",
    "LatentPreview",
    "Mflux",
    "PromptFormat",
    "RandomWeights",
    "UnknownFamilyError",
    "family_names",
    "get_family",
    "join_names",
    "load",
    "mflux_packages",
]


def _discover() -> dict[str, Family]:
    """Every module of this package that defines ``FAMILY``, in the picker's order."""
    found: list[Family] = []
    for module in pkgutil.iter_modules(__path__):
        family = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    by_id: dict[str, Family] = {}
    for family in sorted(found, key=lambda f: (f.order, f.id)):
        if family.id in by_id:
            raise FamilyError(f"two family modules define the family {family.id!r}")
        by_id[family.id] = family
    return by_id


FAMILIES: Mapping[str, Family] = MappingProxyType(_discover())


def get_family(family_id: str) -> Family:
    """The family with this id; ``UnknownFamilyError`` naming the known ones otherwise."""
    try:
        return FAMILIES[family_id]
    except KeyError:
        raise UnknownFamilyError(
            f"unknown model family {family_id!r}; known: {', '.join(FAMILIES)}"
        ) from None


def family_names(has: Callable[[Family], bool], conjunction: str) -> str:
    """The short names of the families that ``has``, in order: "FLUX.1, FLUX.2 and Z-Image"."""
    return join_names([f.short_name for f in FAMILIES.values() if has(f)], conjunction)


def mflux_packages() -> tuple[str, ...]:
    """Every family's mflux packages, each once, in the registry's order: what the bundle
    collects (``packaging/hooks/hook-mflux.py``, ``packaging/bundle_config.py``)."""
    return tuple(dict.fromkeys(p for f in FAMILIES.values() for p in f.mflux_packages))
