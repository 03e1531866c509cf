"""Building a real mflux pipeline: the memory check, then mflux's own constructor.

The model is built by mflux's constructor (its family's class, ``app.families``) from a local
folder, so everything mflux does on load — weight mapping, quantization, tokenizers — is mflux's.
The folder comes from ``app.variants.weights`` (download, verification). What this module adds:
the memory check before loading (refused only where the weights alone cannot fit;
``memory_warning`` where the estimated peak, an upper bound, is over the machine's memory), and
one ``LoadError`` sentence for whatever mflux raises.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import hardware
from app.errors import DownloadCancelled
from app.hardware import memory_gb_text, physical_memory_bytes
from app.variants.catalog import QUANTIZE_LEVELS, Variant, quantize_label
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
    """mflux's pipeline class for the variant's family (``Family.mflux``)."""
    require_real(variant)
    return variant.family.require_mflux().pipeline()


# -- memory -----------------------------------------------------------------------------------


# A choice fits "with headroom" when its realistic need (``Variant.realistic_memory_gb``) leaves
# this share of the machine's memory to macOS and the other apps: the window's default
# quantization is the most precise such choice.
HEADROOM_SHARE = 0.15
# What macOS, the app and its window need beside the weights: loading is refused only when the
# weights alone plus this floor exceed physical memory (that cannot work); above the estimate of
# the peak, which is an upper bound, the run goes ahead with a warning.
OS_FLOOR_GB = 1.5
MEMORY_WARNING = "memory"  # the RunWarning kind of ``memory_warning``


def fits_with_headroom(need_gb: float, have_gb: float) -> bool:
    return need_gb <= have_gb * (1 - HEADROOM_SHARE)


def weights_fit(variant: Variant, quantize: int | None, have_gb: float) -> bool:
    """The weights at ``quantize`` plus ``OS_FLOOR_GB`` fit in ``have_gb``: loading can work."""
    return variant.weights_gb(quantize) + OS_FLOOR_GB <= have_gb


def _choices() -> list[int | None]:
    return [None, *sorted(QUANTIZE_LEVELS, reverse=True)]


def _have_gb(memory_bytes: int | None) -> float | None:
    memory = physical_memory_bytes() if memory_bytes is None else memory_bytes
    return None if memory is None else memory / 1024**3


def default_quantize(
    variant: Variant, size: tuple[int, int] | None = None, memory_bytes: int | None = None
) -> int | None:
    """The most precise choice (full precision, then 8, 6, 5, 4, 3 bits) whose weights plus the
    realistic working memory at ``size`` fit this machine with headroom; the smallest where none
    does; None where the machine's memory is unknown or the family is not quantizable."""
    have_gb = _have_gb(memory_bytes)
    if have_gb is None or not variant.family.quantizable:
        return None
    choices = _choices()
    for quantize in choices:
        if fits_with_headroom(variant.realistic_memory_gb(quantize, size), have_gb):
            return quantize
    return choices[-1]


def lower_quantize(
    variant: Variant,
    quantize: int | None,
    size: tuple[int, int] | None,
    have_gb: float,
    *,
    refused: bool,
) -> int | None:
    """The fix to offer: the most precise level below ``quantize`` whose estimated peak (the
    upper bound) fits; else, for a refusal, the most precise lower one whose weights fit, and for
    a warning, the default rule's level where it is lower (no chain of "use one bit less");
    None where none is."""
    lower = [q for q in QUANTIZE_LEVELS if quantize is None or q < quantize]
    loadable = sorted((q for q in lower if weights_fit(variant, q, have_gb)), reverse=True)
    safe = [q for q in loadable if variant.memory_estimate_gb(q, size) <= have_gb]
    if safe:
        return safe[0]
    if refused:
        return loadable[0] if loadable else None
    default = default_quantize(variant, size, int(have_gb * 1024**3))
    return default if default in loadable else None


def check_memory(
    variant: Variant,
    quantize: int | None,
    memory_bytes: int | None = None,
    size: tuple[int, int] | None = None,
) -> None:
    """Refuse before loading only when the weights at ``quantize`` plus ``OS_FLOOR_GB`` exceed
    physical memory (that cannot work), naming the quantization to choose instead."""
    have_gb = _have_gb(memory_bytes)
    if have_gb is None or variant.family.weights_shipped or weights_fit(variant, quantize, have_gb):
        return
    fix = lower_quantize(variant, quantize, size, have_gb, refused=True)
    advice = (
        f"choose {fix}-bit quantization ({variant.weights_gb(fix):.1f} GB of weights)"
        if fix is not None
        else "no quantization fits: choose a smaller variant"
    )
    raise NotEnoughMemoryError(
        f"{variant.display_name} at {quantize_label(quantize)} cannot load on this machine: its "
        f"weights alone need {variant.weights_gb(quantize):.1f} GB plus {OS_FLOOR_GB} GB for "
        f"{hardware.os_name()} and the app, and it has {memory_gb_text(have_gb)} GB; {advice}"
    )


def memory_warning(
    variant: Variant,
    quantize: int | None,
    memory_bytes: int | None = None,
    size: tuple[int, int] | None = None,
) -> str | None:
    """Where the weights fit but the estimated peak at ``size`` (an upper bound) exceeds physical
    memory: the sentence to warn with (the run is allowed); None otherwise."""
    have_gb = _have_gb(memory_bytes)
    shipped = variant.family.weights_shipped
    if have_gb is None or shipped or not weights_fit(variant, quantize, have_gb):
        return None
    peak = variant.memory_estimate_gb(quantize, size)
    if peak <= have_gb:
        return None
    width, height = size if size is not None else variant.default_size
    fix = lower_quantize(variant, quantize, size, have_gb, refused=False)
    if fix is None:
        advice = " A smaller image needs less."
    else:
        fix_peak = variant.memory_estimate_gb(fix, size)
        verdict = "would fit" if fix_peak <= have_gb else "needs less"
        advice = f" {fix}-bit quantization (up to {fix_peak:.1f} GB) {verdict}."
    return (
        f"{variant.display_name} at {quantize_label(quantize)} at {width} × {height} may need up "
        f"to {peak:.1f} GB and this machine has {memory_gb_text(have_gb)} GB: that figure is an "
        f"upper bound measured with MLX on CUDA, so {hardware.os_name()} may swap or the run may "
        f"stop with an out-of-memory message.{advice}"
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
