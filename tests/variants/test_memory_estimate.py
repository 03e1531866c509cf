"""The memory estimate's two parts against their stated basis: bytes per weight from mflux's
group size, working memory per megapixel from the committed H200 measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.variants import QUANTIZE_LEVELS, VARIANTS, Family
from app.variants.catalog import _BYTES_PER_PARAM, ACTIVATION_GB_PER_MEGAPIXEL, MIN_WORKING_GB

ROOT = Path(__file__).resolve().parents[2]
MEASURED = {  # the variant each family's working memory was measured on
    Family.flux1: "flux1-dev",
    Family.flux2: "flux2-klein-4b",
    Family.z_image: "z-image",
    Family.qwen_image: "qwen-image",
}


@pytest.mark.parametrize("family", list(MEASURED), ids=str)
def test_working_memory_per_megapixel_is_the_measured_one(family: Family) -> None:
    report = json.loads(
        (ROOT / f"resources/benchmarks/{MEASURED[family]}-1024-random-h200.json").read_text()
    )
    assert (report["recipe"]["width"], report["recipe"]["height"]) == (1024, 1024)
    peak = max(c["peak_memory_bytes"] for c in report["conditions"].values())
    loaded = report["runs"][0]["load_peak_memory_bytes"]
    assert ACTIVATION_GB_PER_MEGAPIXEL[family] == round((peak - loaded) / 1024**3, 1)


def test_bytes_per_weight_follow_mflux_group_size() -> None:
    from mlx import core as mx

    # MLX's own quantization of one 64 × 256 bfloat16 matrix at each level: packed weights plus a
    # bfloat16 scale and bias per group of 64.
    matrix = mx.zeros((64, 256), dtype=mx.bfloat16)
    for bits in QUANTIZE_LEVELS:
        packed, scales, biases = mx.quantize(matrix, group_size=64, bits=bits)
        stored = packed.nbytes + scales.nbytes + biases.nbytes
        assert _BYTES_PER_PARAM[bits] == stored / matrix.size, bits
    assert _BYTES_PER_PARAM[None] == 2.0


def test_the_estimate_grows_with_the_image_and_never_drops_below_the_floor() -> None:
    dev = VARIANTS["flux1-dev"]
    assert dev.memory_estimate_gb(8, (1024, 1024)) == round(16.8 * 1.0625 + 6.3, 1)
    assert dev.memory_estimate_gb(8, (2048, 2048)) == round(16.8 * 1.0625 + 4 * 6.3, 1)
    tiny = dev.memory_estimate_gb(8, (128, 128))
    assert tiny == round(16.8 * 1.0625 + MIN_WORKING_GB, 1)
    assert dev.memory_estimate_gb(8) == dev.memory_estimate_gb(8, dev.default_size)
