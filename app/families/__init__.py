"""The model families: one module per family, each holding all the app knows of it.

Each family module (every module here but ``spec`` and ``latent_rgb``: see ``FAMILIES``) defines
``FAMILY``, a ``Family`` (``app.families.spec``): label and order, mflux's classes and package, the
gate's adapter, latent unpacking and preview projection, the random-weight shell and real
dimensions, model-folder detection, memory per megapixel, and its capabilities (weights shipped
or from the Hub, quantizable, LoRA, a prompt check, a loader of its own). Every other package asks
this registry; none spells a family out, nor branches on one. Adding a family is one module here
(found by walking this package), its anatomy and shell in ``app.adapters``, its variants' rows in
``app.variants.builtin`` and its tests (``tests/families/`` checks the module is complete). A test
may register a family of its own for a block (``registered``).

Data only: importing this package imports neither MLX nor mflux.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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
    ShellCase,
    ShellTest,
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
    "ShellCase",
    "ShellTest",
    "UnknownFamilyError",
    "family_names",
    "get_family",
    "join_names",
    "load",
    "mflux_packages",
    "registered",
    "shell_cases",
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


_BY_ID = _discover()
FAMILIES: Mapping[str, Family] = MappingProxyType(_BY_ID)


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


def shell_cases(test: ShellTest) -> tuple[tuple[Family, ShellCase], ...]:
    """Every family's shell cases that ``test`` runs (``RandomWeights.cases``), in the registry's
    order: what the generic tests iterate. A family without random weights has none (the
    registry says which: ``Family.random_weights`` is None)."""
    return tuple(
        (family, case)
        for family in FAMILIES.values()
        if family.random_weights is not None
        for case in family.random_weights.cases_for(test)
    )


@contextmanager
def registered(family: Family) -> Iterator[Family]:
    """``family`` in the registry for the block, in the picker's order, then gone again: a test's
    own family (one a test module defines) runs through every layer as a module of this package
    would. ``FamilyError`` where the id is taken."""
    if family.id in _BY_ID:
        raise FamilyError(f"a family {family.id!r} is registered already")
    ordered = sorted([*_BY_ID.values(), family], key=lambda f: (f.order, f.id))
    _BY_ID.clear()
    _BY_ID.update((f.id, f) for f in ordered)
    try:
        yield family
    finally:
        del _BY_ID[family.id]
