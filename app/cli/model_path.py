"""``--model-path DIR``: run a local model folder (an ``mflux-save`` output or a Hugging Face
snapshot layout) instead of the variant's Hugging Face weights, for generate, bench and sweep."""

from __future__ import annotations

import argparse

from app.cli.errors import UserError

HELP = (
    "a local model folder (an mflux-save output or a Hugging Face snapshot); its base variant "
    "is read from its files, or give it with --variant"
)


def add_model_path_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-path", metavar="DIR", help=HELP)


def resolve_model_path(variant_id: str | None, model_path: str | None) -> tuple[str, str | None]:
    """The variant id to run and the checked folder (None without ``--model-path``). A folder
    that is missing, incomplete, damaged or of another family is one ``UserError`` line, before
    any work."""
    from app.errors import UserFacingError
    from app.variants import UnknownVariantError, get_variant
    from app.variants.folders import any_folder_base, check_folder, inspect_folder

    if model_path is None:
        if not variant_id:
            raise UserError("--variant is required (see `teacache-studio variants`)")
        return variant_id, None
    info = inspect_folder(model_path)
    if not variant_id:
        if not info.path.is_dir():
            raise UserError(f"the model folder {info.path} does not exist or is not a folder")
        variant_id = info.detected
        if variant_id is None and info.candidates:
            raise UserError(
                f"{info.path} could be any of {', '.join(info.candidates)}: say which with "
                "--variant"
            )
        if variant_id is None:
            variant_id = any_folder_base().id  # the check below says what is wrong
    try:
        variant = get_variant(variant_id)
    except UnknownVariantError as exc:
        raise UserError(str(exc)) from None
    if variant.family.folders is None:
        shipped = " ships with the app and" if variant.family.weights_shipped else ""
        raise UserError(f"{variant.id}{shipped} takes no --model-path")
    try:
        check_folder(model_path, variant)
    except UserFacingError as exc:
        raise UserError(str(exc)) from None
    return variant.id, str(info.path.resolve())
