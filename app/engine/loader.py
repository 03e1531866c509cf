"""Building a real mflux pipeline: the memory check, then mflux's own constructor.

The model is built by mflux's constructor (``Flux1``, ``Flux2Klein``, ``ZImage``, ``QwenImage``)
from a local folder, so everything mflux does on load — weight mapping, quantization, tokenizers —
is mflux's. The folder comes from ``app.variants.weights`` (download, verification). What this
module adds: an estimate of the memory this variant needs at this quantization against the
machine's physical memory before loading, and one ``LoadError`` sentence for whatever mflux raises.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import DownloadCancelled
from app.variants.catalog import QUANTIZE_LEVELS, Family, Variant, quantize_label
from app.variants.folders import ModelFolderError, check_folder
from app.variants.weights import (
    LoadError,
    ModelNotFoundError,
    Progress,
    ensure_snapshot,
    require_real,
    say_progress,
)

if TYPE_CHECKING:
    from app.engine.request import LoraSpec


class NotEnoughMemoryError(LoadError):
    pass


class ModelLoadError(LoadError):
    pass


def model_config(variant: Variant) -> Any:
    from mflux.models.common.config.model_config import ModelConfig

    require_real(variant)
    return ModelConfig.from_name(model_name=variant.mflux_name)


def pipeline_class(variant: Variant) -> Any:
    """mflux's pipeline class for the variant's family."""
    require_real(variant)
    if variant.family is Family.flux1:
        from mflux.models.flux.variants.txt2img.flux import Flux1

        return Flux1
    if variant.family is Family.flux2:
        from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

        return Flux2Klein
    if variant.family is Family.z_image:
        from mflux.models.z_image.variants.z_image import ZImage

        return ZImage
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage

    return QwenImage


# -- memory -----------------------------------------------------------------------------------


def physical_memory_bytes() -> int | None:
    """Total physical memory (Linux and macOS through sysconf); None where unknown."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return int(pages) * int(page_size)


# A choice fits "with headroom" when its estimate leaves this share of the machine's memory to
# macOS and the other apps: the window's default quantization is the most precise such choice.
HEADROOM_SHARE = 0.15


def fits_with_headroom(need_gb: float, have_gb: float) -> bool:
    return need_gb <= have_gb * (1 - HEADROOM_SHARE)


def default_quantize(
    variant: Variant, size: tuple[int, int] | None = None, memory_bytes: int | None = None
) -> int | None:
    """The most precise choice (full precision, then 8, 6, 5, 4, 3 bits) whose estimate at
    ``size`` fits this machine with headroom; the smallest where none does; None where the
    machine's memory is unknown or the variant is embedded."""
    memory = physical_memory_bytes() if memory_bytes is None else memory_bytes
    if memory is None or variant.embedded:
        return None
    have_gb = memory / 1024**3
    choices: list[int | None] = [None, *sorted(QUANTIZE_LEVELS, reverse=True)]
    for quantize in choices:
        if fits_with_headroom(variant.memory_estimate_gb(quantize, size), have_gb):
            return quantize
    return choices[-1]


def check_memory(
    variant: Variant,
    quantize: int | None,
    memory_bytes: int | None = None,
    size: tuple[int, int] | None = None,
) -> None:
    """Refuse before loading when the estimate at ``size`` exceeds physical memory; name the most
    precise quantization that fits."""
    memory = physical_memory_bytes() if memory_bytes is None else memory_bytes
    if memory is None:
        return
    have_gb = memory / 1024**3
    need_gb = variant.memory_estimate_gb(quantize, size)
    if need_gb <= have_gb:
        return
    lower = sorted((q for q in QUANTIZE_LEVELS if quantize is None or q < quantize), reverse=True)
    fits = [q for q in lower if variant.memory_estimate_gb(q, size) <= have_gb]
    where = "" if size is None else f" at {size[0]} × {size[1]}"
    advice = (
        f"choose {fits[0]}-bit quantization (about "
        f"{variant.memory_estimate_gb(fits[0], size):.0f} GB)"
        if fits
        else "no quantization fits: choose a smaller variant or size"
    )
    raise NotEnoughMemoryError(
        f"{variant.display_name} at {quantize_label(quantize)}{where} needs about {need_gb:.0f} GB "
        f"of memory and this machine has {have_gb:.0f} GB; {advice}"
    )


# -- load ---------------------------------------------------------------------------------------


def load_pipeline(
    variant: Variant,
    *,
    quantize: int | None = None,
    model_path: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    token: str | None = None,
    cache_dir: str | Path | None = None,
    memory_bytes: int | None = None,
    loras: Sequence[LoraSpec] = (),
    size: tuple[int, int] | None = None,
) -> Any:
    """Build the mflux pipeline for ``variant`` with mflux's own constructor.

    ``model_path``: a local folder (a Hugging Face snapshot layout or an ``mflux-save`` output) or
    another Hugging Face repo id; default: the variant's repo at mflux's pinned revision.
    ``loras``: applied and baked by mflux's constructor (its key mapping, its loader).
    """
    require_real(variant)
    if quantize is not None and quantize not in QUANTIZE_LEVELS:
        levels = ", ".join(map(str, QUANTIZE_LEVELS))
        raise ModelLoadError(f"quantize must be one of {levels} or none, got {quantize}")
    check_memory(variant, quantize, memory_bytes, size)
    if model_path is not None and Path(model_path).expanduser().exists():
        root = Path(model_path).expanduser()
        say_progress(progress, f"checking the files in {root}")
        try:
            check_folder(root, variant)
        except ModelFolderError as exc:
            raise ModelLoadError(str(exc)) from None
    elif model_path is not None and model_path.count("/") == 1:
        root = ensure_snapshot(
            variant,
            repo_id=model_path,
            progress=progress,
            cancel=cancel,
            token=token,
            cache_dir=cache_dir,
        )
    elif model_path is not None:
        raise ModelNotFoundError(
            f"{model_path} is neither a folder nor a Hugging Face repo id (org/name)"
        )
    else:
        root = ensure_snapshot(
            variant, progress=progress, cancel=cancel, token=token, cache_dir=cache_dir
        )
    if cancel is not None and cancel.is_set():
        raise DownloadCancelled("loading cancelled")
    cls = pipeline_class(variant)
    bits = "" if quantize is None else f" ({quantize}-bit)"
    say_progress(progress, f"loading {variant.display_name}{bits} into memory")
    lora_kwargs: dict[str, Any] = {}
    if loras:
        lora_kwargs = {
            "lora_paths": [spec.path for spec in loras],
            "lora_scales": [spec.scale for spec in loras],
        }
    try:
        return cls(
            model_config=model_config(variant),
            quantize=quantize,
            model_path=str(root),
            **lora_kwargs,
        )
    except MemoryError:
        raise NotEnoughMemoryError(
            f"ran out of memory loading {variant.display_name}; close other apps or choose "
            "4-bit quantization"
        ) from None
    except Exception as exc:  # one line for the user, whatever mflux raised
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if len(reason) > 240:
            reason = reason[:237] + "…"
        if loras and "LoRA" in reason:  # mflux's LoRA loader names itself in every message
            names = ", ".join(spec.name for spec in loras)
            raise ModelLoadError(
                f"{variant.display_name} could not take the LoRA ({names}): {reason}"
            ) from None
        raise ModelLoadError(
            f"mflux could not load {variant.display_name} from {root}: {reason}"
        ) from None

