"""The README's "Models and memory" table, rendered from the app's own estimates
(``Variant.realistic_memory_gb`` to ``Variant.memory_estimate_gb``, and the default rule and the
load check of ``app.engine.loader``):
``teacache-studio variants --memory`` prints it; tests/cli/test_memory_table.py checks that
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


MAY_SWAP = " (may swap)"
LEGEND = (
    "Estimated memory at 1024 × 1024: the weights (exact: parameters × bytes per weight) plus "
    "working memory between half and all of what MLX's CUDA backend used on an H200 (the upper "
    "bound). Per Mac: the quantization the window picks by default; *(may swap)*: its upper "
    "bound is over that Mac's memory, so it may swap or stop with an out-of-memory message; "
    "—: the weights alone do not fit (loading is refused)."
)


def best_fit(variant: Variant, memory_gb: int) -> str:
    """The window's default on a Mac with ``memory_gb`` (``default_quantize``), marked "(may
    swap)" where its estimated peak, an upper bound, is over the Mac's memory; "—" only where
    the default's weights themselves do not fit (the load check refuses)."""
    from app.engine.loader import default_quantize, weights_fit

    quantize = default_quantize(variant, SIZE, memory_gb * 1024**3)
    if not weights_fit(variant, quantize, memory_gb):
        return "—"
    swap = variant.memory_estimate_gb(quantize, SIZE) > memory_gb
    return bits_label(quantize) + (MAY_SWAP if swap else "")


def estimate_cell(variant: Variant, quantize: int | None) -> str:
    """The realistic figure and the upper bound: "34–38 GB"."""
    low, high = (
        variant.realistic_memory_gb(quantize, SIZE),
        variant.memory_estimate_gb(quantize, SIZE),
    )
    return f"{low:.0f}–{high:.0f} GB"


def memory_table() -> str:
    levels = _levels()
    head = ["Variant", *(bits_label(q) for q in levels)]
    head += [f"{m} GB Mac" for m in MAC_MEMORY_GB]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for variant in VARIANTS.values():
        if variant.family.weights_shipped:
            continue  # nothing to load: the table is what loading costs
        cells = [variant.display_name]
        cells += [estimate_cell(variant, q) for q in levels]
        cells += [best_fit(variant, m) for m in MAC_MEMORY_GB]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([START_MARKER, *rows, "", LEGEND, END_MARKER])


def readme_block(readme: str) -> str | None:
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        return None
    return readme[start : end + len(END_MARKER)]
