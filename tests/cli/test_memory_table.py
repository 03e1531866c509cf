"""README.md's "Models and memory" table is exactly what the app's own estimates render to.

To update it: run ``teacache-studio variants --memory`` and paste its output over the block
between the markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.memory_table import (
    END_MARKER,
    MAC_MEMORY_GB,
    SIZE,
    START_MARKER,
    best_fit,
    memory_table,
    readme_block,
)
from app.engine.loader import default_quantize, weights_fit
from app.variants import VARIANTS

ROOT = Path(__file__).resolve().parents[2]
GB = 1024**3


def test_readme_holds_exactly_the_rendered_table() -> None:
    block = readme_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None, (
        f"README.md has no {START_MARKER} … {END_MARKER} block; paste the output of "
        "`teacache-studio variants --memory`"
    )
    assert block == memory_table(), (
        "README.md's memory table differs from the app's estimates; paste the output of "
        "`teacache-studio variants --memory` between the markers"
    )


def test_each_row_is_the_estimates_and_the_window_default_per_mac() -> None:
    rows = {
        line.split(" | ")[0][2:]: line for line in memory_table().splitlines()[3:] if "|" in line
    }
    real = [v for v in VARIANTS.values() if not v.family.weights_shipped]
    assert set(rows) == {v.display_name for v in real}
    levels = [None, 8, 6, 5, 4, 3]
    for variant in real:
        cells = rows[variant.display_name].strip("| ").split(" | ")
        low = [variant.realistic_memory_gb(q, SIZE) for q in levels]
        high = [variant.memory_estimate_gb(q, SIZE) for q in levels]
        assert cells[1 : 1 + len(levels)] == [
            f"{a:.0f}–{b:.0f} GB" for a, b in zip(low, high, strict=True)
        ]
        assert cells[-len(MAC_MEMORY_GB) :] == [best_fit(variant, m) for m in MAC_MEMORY_GB]
        for memory_gb in MAC_MEMORY_GB:
            chosen = default_quantize(variant, SIZE, memory_gb * GB)
            bits = "16-bit" if chosen is None else f"{chosen}-bit"
            if not weights_fit(variant, chosen, memory_gb):
                expected = "—"
            elif variant.memory_estimate_gb(chosen, SIZE) <= memory_gb:
                expected = bits
            else:
                expected = bits + " (may swap)"
            assert best_fit(variant, memory_gb) == expected


def test_a_mac_column_says_fits_may_swap_or_cannot_load() -> None:
    klein, dev, qwen = VARIANTS["flux2-klein-4b"], VARIANTS["flux1-dev"], VARIANTS["qwen-image"]
    # Klein 4B on 16 GB: 6-bit's weights plus half the CUDA working memory fit with headroom
    # (13.5 GB), its upper bound (20.9 GB) does not: chosen, with the swap risk said.
    assert best_fit(klein, 16) == "6-bit (may swap)"
    assert best_fit(dev, 24) == "6-bit"  # 20.8 GB upper bound: fits
    # "—" only where the weights themselves do not fit: Qwen-Image's 3-bit weights are 11.6 GB.
    assert best_fit(qwen, 16) == "3-bit (may swap)"
    assert best_fit(qwen, 12) == "—"
    assert not weights_fit(qwen, 3, 12)


def test_variants_memory_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["variants", "--memory"]) == 0
    assert capsys.readouterr().out == memory_table() + "\n"
