"""Quantization choices for the window, Qt-free: each level's estimated peak memory at the chosen
size (an upper bound) beside this machine's memory, whether it fits, may not fit or cannot load,
the default, and the banner with its one-click fix.

The rules are the engine's own (``app.engine.loader``): a level "cannot load" where its weights
plus ``OS_FLOOR_GB`` exceed the machine's memory (the load check refuses it); it "may not fit"
where only the estimated peak does (the run goes ahead with a warning); the default is the most
precise level whose weights plus the realistic working memory fit with headroom."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app import hardware
from app.engine.loader import (
    NotEnoughMemoryError,
    check_memory,
    default_quantize,
    lower_quantize,
    memory_warning,
    weights_fit,
)
from app.hardware import memory_gb_text
from app.ui.analysis import BannerFix, Notice, NoticeAction, NoticeKind
from app.variants import QUANTIZE_LEVELS, Variant

MEMORY_NOTICE = "memory"


class Fit(StrEnum):
    fits = "fits"  # the estimated peak, an upper bound, is within the machine's memory
    may_not_fit = "may not fit"  # the weights fit, the upper bound does not: swap risk
    cannot_load = "cannot load"  # the weights alone do not fit: refused


@dataclass(frozen=True, slots=True)
class QuantizeChoice:
    quantize: int | None  # None: full precision
    estimate_gb: float  # estimated peak, an upper bound
    fit: Fit

    @property
    def fits(self) -> bool:
        return self.fit is Fit.fits

    @property
    def label(self) -> str:
        mark = "" if self.fits else f" · {self.fit.value}"
        bits = "16-bit" if self.quantize is None else f"{self.quantize}-bit"  # bf16 weights
        return f"{bits} · up to {self.estimate_gb:.0f} GB{mark}"


def memory_label(memory_bytes: int | None) -> str:
    """The machine's memory under the picker: the same figure the banners give."""
    if memory_bytes is None:
        return f"{hardware.this_machine()}'s memory: unknown"
    return f"{hardware.this_machine()}: {memory_gb_text(memory_bytes / 1024**3)} GB"


def quantize_choices(
    variant: Variant, size: tuple[int, int], memory_bytes: int | None
) -> list[QuantizeChoice]:
    """Every level mflux offers, most precise first; a pre-quantized model folder offers only
    its stored level (mflux loads it at that level whatever is asked)."""
    if not variant.family.quantizable:
        return []
    levels: list[int | None] = [None, *sorted(QUANTIZE_LEVELS, reverse=True)]
    if variant.stored_quantize is not None:
        levels = [variant.stored_quantize]
    have = None if memory_bytes is None else memory_bytes / 1024**3

    def fit(quantize: int | None, estimate: float) -> Fit:
        if have is None or estimate <= have:
            return Fit.fits
        return Fit.may_not_fit if weights_fit(variant, quantize, have) else Fit.cannot_load

    return [
        QuantizeChoice(q, e, fit(q, e))
        for q in levels
        for e in [variant.memory_estimate_gb(q, size)]
    ]


def initial_quantize(
    variant: Variant, size: tuple[int, int], memory_bytes: int | None
) -> int | None:
    if not variant.family.quantizable:
        return None
    if variant.stored_quantize is not None:
        return variant.stored_quantize
    return default_quantize(variant, size, memory_bytes)


def memory_notice(
    variant: Variant, quantize: int | None, size: tuple[int, int], memory_bytes: int | None
) -> Notice | None:
    """Before Generate: the load check's refusal (red) where the weights cannot fit, or its
    warning (yellow) where only the estimated peak is over; "Use N-bit" where a lower level
    helps."""
    if variant.family.weights_shipped or memory_bytes is None:
        return None
    have = memory_bytes / 1024**3
    try:
        check_memory(variant, quantize, memory_bytes, size)
    except NotEnoughMemoryError as exc:
        kind, title, message, refused = NoticeKind.error, "Cannot load", str(exc), True
    else:
        warning = memory_warning(variant, quantize, memory_bytes, size)
        if warning is None:
            return None
        kind, title, message, refused = NoticeKind.warning, "May run out of memory", warning, False
    if variant.stored_quantize is not None:  # a saved quantized folder: its level is fixed
        fix = None
    else:
        fix = lower_quantize(variant, quantize, size, have, refused=refused)
    actions = () if fix is None else (NoticeAction(f"Use {fix}-bit", BannerFix.use_quantize(fix)),)
    return Notice(
        kind,
        title,
        message,
        f"Estimates at {size[0]} × {size[1]}; this machine has {memory_gb_text(have)} GB. Weights "
        f"{variant.weights_gb(quantize):.1f} GB (exact); working memory "
        f"{variant.working_gb(size, upper=False):.1f}–{variant.working_gb(size):.1f} GB (the upper "
        "end measured with MLX on CUDA).",
        actions,
        MEMORY_NOTICE,
    )
