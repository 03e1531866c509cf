"""The README's "Models and memory" table, rendered from the app's own estimates
(``Variant.memory_estimate_gb`` and the headroom rule of ``app.engine.loader``):
``teacache-studio variants --memory`` prints it; tests/variants/test_memory_table.py checks that
README.md holds exactly this."""

from __future__ import annotations

from app.variants.catalog import QUANTIZE_LEVELS, Variant
from app.variants.registry import VARIANTS

START_MARKER = "<!-- memory-table:start (teacache-studio variants --memory) -->"
END_MARKER = "<!-- memory-table:end -->"
MAC_MEMORY_GB = (16, 24, 32, 48, 64, 128)
SIZE = (1024, 1024)


def _levels() -> list[int | None]:
    return [None, *sorted(QUANTIZE_LEVELS, reverse=True)]


def bits_label(quantize: int | None) -> str:
    return "16-bit" if quantize is None else f"{quantize}-bit"  # unquantized weights are bf16


def best_fit(variant: Variant, memory_gb: int) -> str:
    """The window's default on a Mac with ``memory_gb``: the most precise level that fits with
    headroom, or "—" where none does."""
    from app.engine.loader import fits_with_headroom

    for quantize in _levels():
        if fits_with_headroom(variant.memory_estimate_gb(quantize, SIZE), memory_gb):
            return bits_label(quantize)
    return "—"


def memory_table() -> str:
    levels = _levels()
    head = ["Variant", *(bits_label(q) for q in levels)]
    head += [f"{m} GB Mac" for m in MAC_MEMORY_GB]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for variant in VARIANTS.values():
        if variant.embedded:
            continue
        cells = [variant.display_name]
        cells += [f"{variant.memory_estimate_gb(q, SIZE):.0f} GB" for q in levels]
        cells += [best_fit(variant, m) for m in MAC_MEMORY_GB]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([START_MARKER, *rows, END_MARKER])


def readme_block(readme: str) -> str | None:
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        return None
    return readme[start : end + len(END_MARKER)]
