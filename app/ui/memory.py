"""Quantization choices for the window, Qt-free: each level's estimated peak memory at the chosen
size beside this machine's memory, which fit, the default, and the banner with its one-click fix.

The rules are the engine's own (``app.engine.loader``): an item "fits" when its estimate is at
most the machine's memory (what the load check refuses otherwise); the default is the most
precise level that fits with headroom (``HEADROOM_SHARE`` of the memory left free)."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.loader import NotEnoughMemoryError, check_memory, default_quantize
from app.ui.analysis import BannerFix, Notice, NoticeAction, NoticeKind
from app.variants import QUANTIZE_LEVELS, Variant

MEMORY_NOTICE = "memory"


@dataclass(frozen=True, slots=True)
class QuantizeChoice:
    quantize: int | None  # None: full precision
    estimate_gb: float
    fits: bool

    @property
    def label(self) -> str:
        mark = "" if self.fits else " · too big"
        bits = "16-bit" if self.quantize is None else f"{self.quantize}-bit"  # bf16 weights
        return f"{bits} · ~{self.estimate_gb:.0f} GB{mark}"


def memory_label(memory_bytes: int | None) -> str:
    if memory_bytes is None:
        return "this Mac's memory: unknown"
    return f"this Mac: {memory_bytes / 1024**3:.0f} GB"


def quantize_choices(
    variant: Variant, size: tuple[int, int], memory_bytes: int | None
) -> list[QuantizeChoice]:
    """Every level mflux offers, most precise first; a pre-quantized model folder offers only
    its stored level (mflux loads it at that level whatever is asked)."""
    if variant.embedded:
        return []
    levels: list[int | None] = [None, *sorted(QUANTIZE_LEVELS, reverse=True)]
    if variant.stored_quantize is not None:
        levels = [variant.stored_quantize]
    have = None if memory_bytes is None else memory_bytes / 1024**3
    return [
        QuantizeChoice(q, e, have is None or e <= have)
        for q in levels
        for e in [variant.memory_estimate_gb(q, size)]
    ]


def initial_quantize(
    variant: Variant, size: tuple[int, int], memory_bytes: int | None
) -> int | None:
    if variant.embedded:
        return None
    if variant.stored_quantize is not None:
        return variant.stored_quantize
    return default_quantize(variant, size, memory_bytes)


def memory_notice(
    variant: Variant, quantize: int | None, size: tuple[int, int], memory_bytes: int | None
) -> Notice | None:
    """The load check's refusal, shown before Generate, with "Use N-bit" where a level fits."""
    if variant.embedded or memory_bytes is None:
        return None
    try:
        check_memory(variant, quantize, memory_bytes, size)
    except NotEnoughMemoryError as exc:
        have = memory_bytes / 1024**3
        fits = [
            c.quantize
            for c in quantize_choices(variant, size, memory_bytes)
            if c.fits and c.quantize is not None and (quantize is None or c.quantize < quantize)
        ]
        actions = (
            (NoticeAction(f"Use {fits[0]}-bit", BannerFix.use_quantize(fits[0])),) if fits else ()
        )
        return Notice(
            NoticeKind.warning,
            "Not enough memory",
            str(exc),
            f"Estimates at {size[0]} × {size[1]}; this machine has {have:.1f} GB.",
            actions,
            MEMORY_NOTICE,
        )
    return None
