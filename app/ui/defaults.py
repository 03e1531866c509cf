"""Qt-free defaults the window starts from."""

from __future__ import annotations

from app.engine.request import MAX_SIDE, SEED_RANGE
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.variants import VARIANTS, Variant

# The first-run prompt: inside the demo model's vocabulary, so the first Generate on a fresh
# machine draws something recognisable offline.
DEFAULT_PROMPT = "two red circles and a blue star on a yellow background"

MIN_SEED, MAX_SEED = SEED_RANGE  # the engine's: the seed box and Random take all of it


def default_threshold(variant: Variant, gate: str = DEFAULT_GATE) -> float:
    """The threshold field's default and what Reset sets: the variant's for this gate, else its
    base variant's (so a distilled variant's banner can compare real numbers), else the gate's
    typical value (``GateKind.fallback_threshold``: their scales differ)."""
    own = variant.default_threshold_for(gate)
    if own is not None:
        return own
    base = VARIANTS.get(variant.base_variant) if variant.base_variant else None
    if base is not None and base.default_threshold_for(gate) is not None:
        return float(base.default_threshold_for(gate))  # type: ignore[arg-type]
    return gate_kind(gate).fallback_threshold


def size_presets(variant: Variant) -> list[tuple[int, int]]:
    """The variant's default size first, then its family's sizes (``Family.sizes``)."""
    sizes = [variant.default_size]
    for size in variant.family.sizes:
        if size not in sizes:
            sizes.append(size)
    return sizes


def size_allowed(variant: Variant, size: tuple[int, int] | list[int]) -> bool:
    """Whether ``size`` may be offered for (and applied to) this variant: the demo draws its one
    trained size only; the others take any multiple of 16 up to ``MAX_SIDE`` per side."""
    if len(size) != 2:
        return False
    width, height = int(size[0]), int(size[1])
    if variant.family.fixed_size:
        return (width, height) in size_presets(variant)
    return all(0 < v <= MAX_SIDE and v % 16 == 0 for v in (width, height))
