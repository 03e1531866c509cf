"""Every variant the app can run: the built-in table, then the user's calibrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.variants.builtin import BUILTIN_VARIANTS
from app.variants.catalog import UnknownVariantError, Variant
from app.variants.folders import folder_variants, is_folder_variant_id, user_folder_variant
from app.variants.user import split_user_variant_id, user_variant, user_variants

# The built-in table itself, not a copy: a variant added here is a base user calibrations can use.
VARIANTS: dict[str, Variant] = BUILTIN_VARIANTS
DEFAULT_VARIANT = "demo"


def all_variants() -> dict[str, Variant]:
    """The built-in variants, the user's calibrations (``<base>+<name>``), then the user's
    model folders (``<base>@<name>``)."""
    return {
        **VARIANTS,
        **{v.id: v for v in user_variants()},
        **{v.id: v for v in folder_variants()},
    }


def get_variant(variant_id: str) -> Variant:
    try:
        return VARIANTS[variant_id]
    except KeyError:
        pass
    if split_user_variant_id(variant_id) is None and is_folder_variant_id(variant_id):
        # "<base>@<name>": a model folder ("<base>@<name>+<cal>" is a calibration of one)
        folder = user_folder_variant(variant_id)
        if folder is None:
            raise UnknownVariantError(variant_id, known=VARIANTS)
        return folder
    variant = user_variant(variant_id)  # "<base>+<name>": a user calibration
    if variant is None:
        raise UnknownVariantError(variant_id, known=VARIANTS)
    return variant


@contextmanager
def registered(*variants: Variant) -> Iterator[tuple[Variant, ...]]:
    """``variants`` built-in for the block (a test's own family's rows), then gone again.
    ``ValueError`` where an id is taken."""
    taken = [v.id for v in variants if v.id in VARIANTS]
    if taken or len({v.id for v in variants}) != len(variants):
        raise ValueError(f"variant ids registered already or twice: {', '.join(taken)}")
    VARIANTS.update((v.id, v) for v in variants)
    try:
        yield variants
    finally:
        for variant in variants:
            VARIANTS.pop(variant.id, None)
