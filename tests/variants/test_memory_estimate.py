"""The memory estimate's two parts against their stated basis: the weights, exact from bytes per
weight at mflux's group size; the working memory, an upper bound per megapixel from the committed
H200 (MLX CUDA) measurements, and the realistic share of it the default is chosen by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.families import FAMILIES, Family
from app.variants import QUANTIZE_LEVELS, VARIANTS
from app.variants.catalog import _BYTES_PER_PARAM, MIN_WORKING_GB, REALISTIC_WORKING_SHARE

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "resources" / "benchmarks"
# the families whose working memory was measured, each on the variant it names
MEASURED = [f for f in FAMILIES.values() if f.memory_measured_on is not None]


def _report(variant_id: str) -> Path:
    """The committed H200 report of a variant at 1024² (it may not exist)."""
    return REPORTS / f"{variant_id}-1024-random-h200.json"


def measured_gb_per_megapixel(variant_id: str) -> float:
    """The working memory a variant's committed H200 reports measure at 1024² (peak minus load,
    in GB): the larger of its batches, an upper bound. The current report, and the earlier
    batches kept as the basis where there were some (FLUX.1 dev read 6.3 then 8.1 GB, Klein 4B
    14.8 then 14.4)."""
    earlier = ROOT / "lab" / "bench" / "results" / "memory-basis"
    measured = []
    for path in (_report(variant_id), *sorted(earlier.glob(f"{_report(variant_id).stem}-*.json"))):
        report = json.loads(path.read_text())
        assert (report["recipe"]["width"], report["recipe"]["height"]) == (1024, 1024)
        assert report["recipe"]["variant"] == variant_id
        peak = max(c["peak_memory_bytes"] for c in report["conditions"].values())
        loaded = report["runs"][0]["load_peak_memory_bytes"]
        measured.append(round((peak - loaded) / 1024**3, 1))
    return max(measured)


@pytest.mark.parametrize("family", MEASURED, ids=lambda f: f.id)
def test_working_memory_per_megapixel_is_the_measured_one(family: Family) -> None:
    assert family.memory_measured_on is not None
    measured = measured_gb_per_megapixel(family.memory_measured_on)
    assert family.activation_gb_per_megapixel == measured


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.id)
def test_a_family_with_a_committed_report_does_not_borrow(family: Family) -> None:
    """A figure borrowed from another family holds only until this family is measured: once a
    committed report measures one of its variants, the family carries the largest such figure
    (an upper bound over its measured variants), named by ``memory_measured_on``. A family with
    no report borrows with its reason written, or states its working memory flat (the demo)."""
    reported = [v.id for v in VARIANTS.values() if v.family is family and _report(v.id).exists()]
    if not reported:
        assert family.memory_basis is not None or family.flat_working_gb is not None, family.id
        return
    assert family.memory_basis is None, (
        f"{family.id} borrows {family.activation_gb_per_megapixel} GB/MP while "
        f"{', '.join(reported)} measured {[measured_gb_per_megapixel(v) for v in reported]}"
    )
    largest = max(reported, key=measured_gb_per_megapixel)
    assert measured_gb_per_megapixel(family.memory_measured_on or "") == (
        measured_gb_per_megapixel(largest)
    )


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
    weights = 16.8e9 * 1.0625 / 1024**3  # parameters × bytes per 8-bit weight, in GB
    assert dev.weights_gb(8) == pytest.approx(weights)
    assert dev.memory_estimate_gb(8, (1024, 1024)) == round(weights + 8.1, 1)
    assert dev.memory_estimate_gb(8, (2048, 2048)) == round(weights + 4 * 8.1, 1)
    tiny = dev.memory_estimate_gb(8, (128, 128))
    assert tiny == round(weights + MIN_WORKING_GB, 1)
    assert dev.memory_estimate_gb(8) == dev.memory_estimate_gb(8, dev.default_size)


def test_the_realistic_figure_is_the_weights_plus_a_share_of_the_upper_bound() -> None:
    dev = VARIANTS["flux1-dev"]
    assert 0 < REALISTIC_WORKING_SHARE < 1
    for size, working in (((1024, 1024), 8.1), ((2048, 2048), 4 * 8.1)):
        assert dev.working_gb(size) == pytest.approx(working)
        assert dev.working_gb(size, upper=False) == pytest.approx(REALISTIC_WORKING_SHARE * working)
        assert dev.realistic_memory_gb(8, size) == round(
            dev.weights_gb(8) + REALISTIC_WORKING_SHARE * working, 1
        )
        assert dev.realistic_memory_gb(8, size) < dev.memory_estimate_gb(8, size)
    # Below the floor both ends are the floor: no share of it is left out.
    assert dev.working_gb((128, 128), upper=False) == dev.working_gb((128, 128)) == MIN_WORKING_GB


def test_a_text_encoder_mflux_never_quantizes_is_counted_at_16_bits() -> None:
    """Qwen-Image 2.1's and Krea 2's text encoders are marked ``skip_quantization`` in mflux's
    weight definitions (kept at 16 bits at every level); FLUX.3's is quantized with the rest."""
    from app.variants import get_variant, weights

    for variant_id, skipped in (
        ("qwen-image-2.1", True),
        ("krea-2", True),
        ("flux3-image-klein", False),
    ):
        variant = get_variant(variant_id)
        components = weights._weight_definition(variant).get_components()
        encoder = next(c for c in components if c.name == "text_encoder")
        assert encoder.skip_quantization is skipped, variant_id
        assert (variant.unquantized_billion > 0) is skipped
    qwen21 = get_variant("qwen-image-2.1")
    quantized = (15.01 - 7.57) * 1e9 * _BYTES_PER_PARAM[4]
    assert qwen21.weights_gb(4) == pytest.approx((quantized + 7.57e9 * 2.0) / 1024**3)
    assert qwen21.weights_gb(None) == pytest.approx(15.01e9 * 2.0 / 1024**3)
