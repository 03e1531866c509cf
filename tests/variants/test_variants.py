"""Registry consistency: every variant complete and coherent, and the weight-free schedule checks.

The demo variants read ``resources/demo/*.calibration.json``, which the demo-model work replaces
with a real calibration: nothing here depends on their numbers.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest

from app.families import get_family
from app.gate import Decision, TeaCacheParams, simulate
from app.gate.decision import GateConfigError, poly_eval, prediction_floor
from app.variants import (
    DEFAULT_VARIANT,
    QUANTIZE_LEVELS,
    VARIANTS,
    Family,
    UnknownVariantError,
    Variant,
    check_schedule,
    get_variant,
)
from tests.fakes.params import teacache_params

ISSUE_IDS = [
    "flux1-dev",
    "flux1-schnell",
    "flux1-krea-dev",
    "flux2-klein-4b",
    "flux2-klein-9b",
    "flux2-klein-base-4b",
    "flux2-klein-base-9b",
    "z-image",
    "z-image-turbo",
    "qwen-image",
    "demo",
    "demo-turbo",
]
# Issue #29: this year's models, without published TeaCache numbers.
ISSUE_29_DISTILLED = {
    "flux3-image-klein": True,
    "flux3-image-klein-base": False,
    "qwen-image-2.1": False,
    "qwen-image-2.1-turbo": True,
    "krea-2": True,
}
# Issue #40: more of mflux's families, none with published TeaCache numbers either.
ISSUE_40_DISTILLED = {
    "anima-turbo": True,
    "anima-aesthetic": False,
    "anima-base": False,
    "moss-image-sft": False,
    "moss-image-base": False,
    "ernie-image": False,
    "ernie-image-turbo": True,
    "lens-turbo": True,
    "fibo": False,
    "fibo-lite": True,
    "fibo2": False,
}
UNCALIBRATED_DISTILLED = {**ISSUE_29_DISTILLED, **ISSUE_40_DISTILLED}
ALL = list(VARIANTS.values())
TEACACHE = [v for v in ALL if v.coefficients is not None]
UNCALIBRATED = [v for v in ALL if v.coefficients is None]


def by_id(variant: Variant) -> str:
    return variant.id


def test_ids_are_exactly_issue_2s_and_the_uncalibrated_ones_of_issues_29_and_40() -> None:
    assert sorted(VARIANTS) == sorted([*ISSUE_IDS, *UNCALIBRATED_DISTILLED])
    assert all(key == v.id for key, v in VARIANTS.items())
    assert DEFAULT_VARIANT in VARIANTS


@pytest.mark.parametrize("variant", ALL, ids=by_id)
def test_variant_is_complete(variant: Variant) -> None:
    assert variant.display_name.strip()
    assert isinstance(variant.family, Family) and variant.family.display_name
    assert (
        isinstance(variant.default_steps, int) and variant.default_steps >= variant.min_steps >= 1
    )
    if variant.default_guidance is not None:
        assert math.isfinite(variant.default_guidance) and variant.default_guidance >= 1.0
    if variant.coefficients is not None:  # None: no TeaCache numbers (it opens on the probe)
        assert len(variant.coefficients) == 5
        assert all(isinstance(c, float) and math.isfinite(c) for c in variant.coefficients)
    assert variant.gates and variant.default_gate() in variant.gates
    assert variant.provenance.source.strip()
    if variant.provenance.fit_value is not None:
        assert variant.provenance.fit_metric and math.isfinite(variant.provenance.fit_value)
    if variant.calibrated_range is not None:
        lo, hi = variant.calibrated_range
        assert 0.0 <= lo < hi
    w, h = variant.default_size
    assert w > 0 and h > 0 and w % 16 == 0 and h % 16 == 0
    # The gate parameters build (validation passes) at the default and at threshold 0.
    if variant.coefficients is not None:
        teacache_params(variant)
        assert not teacache_params(variant, 0.0).enabled


@pytest.mark.parametrize("variant", ALL, ids=by_id)
def test_model_source_is_named(variant: Variant) -> None:
    if variant.family.weights_shipped:
        assert variant.hf_repo is None and variant.family is get_family("demo")
    else:
        assert variant.hf_repo and variant.hf_repo.count("/") == 1
        assert variant.mflux_name


@pytest.mark.parametrize("variant", ALL, ids=by_id)
def test_memory_estimate_is_positive_and_rises_with_less_quantization(variant: Variant) -> None:
    estimates = [variant.memory_estimate_gb(q) for q in (*QUANTIZE_LEVELS, None)]
    assert all(e > 0 for e in estimates)
    if variant.family.weights_shipped:
        assert estimates == sorted(estimates)
    else:
        assert all(a < b for a, b in itertools.pairwise(estimates)), estimates
    with pytest.raises(ValueError, match="quantize"):
        variant.memory_estimate_gb(7)


@pytest.mark.parametrize("variant", TEACACHE, ids=by_id)
def test_distilled_iff_no_default_threshold_or_a_stated_reason(variant: Variant) -> None:
    stated = variant.distilled_reason is not None and bool(variant.distilled_reason.strip())
    assert variant.distilled == (variant.default_threshold is None or stated)
    if variant.distilled:
        assert stated, "a distilled variant says why"


@pytest.mark.parametrize("variant", [v for v in TEACACHE if v.distilled], ids=by_id)
def test_distilled_variants_suggest_an_existing_base(variant: Variant) -> None:
    assert variant.base_variant is not None
    base = get_variant(variant.base_variant)
    assert not base.distilled
    assert base.family is variant.family
    assert base.default_threshold is not None
    check = check_schedule(variant, variant.default_steps)
    assert check.suggestion is not None and base.id in check.suggestion


@pytest.mark.parametrize("variant", [v for v in TEACACHE if not v.distilled], ids=by_id)
def test_non_distilled_variants_engage_at_their_defaults(variant: Variant) -> None:
    assert variant.base_variant is None
    assert variant.default_threshold is not None and 0.0 < variant.default_threshold <= 1.0
    check = check_schedule(variant, variant.default_steps)
    assert check.can_skip, check.reason


@pytest.mark.parametrize("variant", UNCALIBRATED, ids=by_id)
def test_a_variant_without_teacache_numbers_says_how_to_make_them(variant: Variant) -> None:
    """Issues #29's and #40's models: no TeaCache numbers, no default threshold, and each gate
    without a calibration says in one sentence why (distilled) or which command makes one."""
    assert variant.distilled == UNCALIBRATED_DISTILLED[variant.id]
    assert variant.teacache is None and variant.default_threshold is None
    assert (variant.distilled_reason is not None) == variant.distilled
    with pytest.raises(GateConfigError) as info:
        teacache_params(variant)
    if variant.distilled:
        assert "step-distilled" in str(info.value)
    else:
        assert f"teacache-studio calibrate --variant {variant.id}" in str(info.value)
    assert f"calibrate --variant {variant.id}" in (variant.provenance.notes or "")
    check = check_schedule(variant, variant.default_steps)
    assert not check.can_skip and check.reason == str(info.value)
    if variant.base_variant is not None:  # Krea 2 Raw is no variant: Krea 2 names no base
        base = get_variant(variant.base_variant)
        assert variant.distilled and not base.distilled and base.family is variant.family
        assert check.suggestion is not None and base.id in check.suggestion


# -- published numbers (research §3.4): coefficients cited, floors reproduced ----------------------


def test_flux1_uses_upstream_teacache_coefficients() -> None:
    upstream = (498.651651244, -283.781631, 55.8554382, -3.82021401, 0.264230861)
    for variant_id in ("flux1-dev", "flux1-schnell"):
        v = get_variant(variant_id)
        assert v.coefficients == upstream
        assert "ali-vilab/TeaCache" in v.provenance.source
    # FLUX.1-dev never predicts below about 0.18 (research §3.4).
    assert prediction_floor(teacache_params(get_variant("flux1-dev"))) == pytest.approx(
        0.1803, abs=1e-4
    )


@pytest.mark.parametrize(
    ("variant_id", "published_floor"),
    [("flux2-klein-base-4b", 0.144), ("flux2-klein-base-9b", 0.144), ("z-image", 0.082),
     ("qwen-image", 0.067)],
)  # fmt: skip
def test_smallest_price_per_skip_matches_the_published_value(
    variant_id: str, published_floor: float
) -> None:
    """mlx-teacache docs/calibration.md: smallest price per skip inside the calibrated range."""
    v = get_variant(variant_id)
    assert v.calibrated_range is not None
    # Published to 3 decimals: half a unit of the last one.
    assert prediction_floor(teacache_params(v)) == pytest.approx(published_floor, abs=5e-4)


@pytest.mark.parametrize(
    ("variant_id", "streak"),
    [("flux2-klein-base-4b", 1), ("z-image", 1), ("qwen-image", 4), ("flux1-dev", 1)],
)
def test_longest_possible_streak_at_the_default_threshold(variant_id: str, streak: int) -> None:
    """Observed maximum streaks at the defaults (research §3.4) are the floor's bound: k skips need
    k × floor < threshold. Replaying a trace priced at the floor on every step reaches it."""
    v = get_variant(variant_id)
    params = teacache_params(v)
    floor = prediction_floor(params)
    assert max(k for k in range(1, 20) if k * floor < params.rel_l1_thresh) == streak
    # A trace sitting at the polynomial's minimum on every step reaches exactly that streak.
    x = _argmin(params)
    verdicts = simulate(params, [None] + [x] * 30)
    assert _longest(verdicts) == streak


def _argmin(params: TeaCacheParams) -> float:
    lo, hi = params.calibrated_range or (0.0, 1.0)
    grid = [lo + (hi - lo) * k / 100_000 for k in range(100_001)]
    return min(grid, key=lambda x: poly_eval(params.coefficients, x))


def _longest(verdicts: list) -> int:
    best = run = 0
    for v in verdicts:
        run = run + 1 if v.decision is Decision.skipped else 0
        best = max(best, run)
    return best


def test_shared_fits_share_their_range() -> None:
    base4, base9 = get_variant("flux2-klein-base-4b"), get_variant("flux2-klein-base-9b")
    assert base4.coefficients == base9.coefficients
    assert base4.calibrated_range == base9.calibrated_range


# -- check_schedule --------------------------------------------------------------------------------


def test_schnell_at_four_steps_cannot_skip() -> None:
    check = check_schedule(get_variant("flux1-schnell"), 4)
    assert not check.can_skip
    assert check.eligible_steps == 2
    assert "flux1-dev" in (check.suggestion or "")


def test_flux1_dev_at_25_steps_can_skip() -> None:
    check = check_schedule(get_variant("flux1-dev"), 25)
    assert check.can_skip
    assert check.eligible_steps == 23
    # The floor is 0.180343…, written to 4 decimals: half a unit of the last one.
    assert check.prediction_floor == pytest.approx(0.1803, abs=5e-5)


def test_a_threshold_at_or_below_the_floor_cannot_skip() -> None:
    """The FLUX.1-dev threshold guide measured 0/25 skips at 0.10 and 0.15 (research §7.3)."""
    dev = get_variant("flux1-dev")
    for threshold in (0.10, 0.15):
        check = check_schedule(dev, 25, threshold)
        assert not check.can_skip and "0.180" in check.reason
    assert check_schedule(dev, 25, 0.20).can_skip


@pytest.mark.parametrize("variant", [v for v in TEACACHE if not v.distilled], ids=by_id)
@pytest.mark.parametrize("steps", [0, 1, 2])
def test_too_few_steps_leave_nothing_to_skip(variant: Variant, steps: int) -> None:
    check = check_schedule(variant, steps)
    assert not check.can_skip and check.eligible_steps == 0
    assert "no gate-eligible step" in check.reason


@pytest.mark.parametrize("variant", TEACACHE, ids=by_id)
def test_threshold_zero_turns_skipping_off(variant: Variant) -> None:
    check = check_schedule(variant, 50, 0.0)
    assert not check.can_skip and "threshold 0" in check.reason


@pytest.mark.parametrize("variant", TEACACHE, ids=by_id)
def test_eligible_steps_count_the_unprotected_steps(variant: Variant) -> None:
    for steps in (3, 4, 9, 25, 50):
        assert check_schedule(variant, steps).eligible_steps == steps - 2


def test_distilled_without_a_default_threshold_explains_itself() -> None:
    for variant in (v for v in TEACACHE if v.distilled and v.default_threshold is None):
        check = check_schedule(variant, variant.default_steps)
        assert not check.can_skip
        assert variant.distilled_reason and variant.distilled_reason in check.reason


def test_distilled_with_an_explicit_threshold_is_flagged_uncalibrated() -> None:
    check = check_schedule(get_variant("z-image-turbo"), 9, 0.5)
    assert check.can_skip and "uncalibrated" in check.reason
    assert check.suggestion and "z-image" in check.suggestion


def test_measured_floor_blocks_distilled_thresholds() -> None:
    klein9 = get_variant("flux2-klein-9b")
    assert klein9.min_predicted_change is not None
    check = check_schedule(klein9, 4, klein9.min_predicted_change)
    assert not check.can_skip and "distilled" in check.reason


# -- lookups and output ----------------------------------------------------------------------------


def test_unknown_variant_names_the_choices() -> None:
    with pytest.raises(UnknownVariantError) as info:
        get_variant("flux3")
    assert "flux3" in str(info.value) and "flux1-dev" in str(info.value)
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize("variant", ALL, ids=by_id)
def test_summary_is_json_ready(variant: Variant) -> None:
    data = json.loads(json.dumps(variant.summary()))
    assert data["id"] == variant.id and data["family"] == variant.family.id
    assert {f.name for f in dataclasses.fields(Variant)} <= set(data)
    assert set(data["memory_gb"]) == {"bf16", *(f"q{q}" for q in QUANTIZE_LEVELS)}


def test_gate_params_follow_the_variant() -> None:
    v = get_variant("qwen-image")
    p = teacache_params(v)
    assert p.coefficients == v.coefficients and p.calibrated_range == v.calibrated_range
    assert p.rel_l1_thresh == v.default_threshold
    assert teacache_params(v, 0.25, skip_first=2).skip_first == 2
    assert teacache_params(get_variant("flux1-schnell")).rel_l1_thresh == 0.0


def test_the_default_gate_follows_what_teacache_was_measured_on() -> None:
    """TeaCache is the default where its numbers were measured on the model that runs (the
    built-in ones: the published weights without LoRAs; a user calibration: its recorded model
    folder and LoRA set); anywhere else the first-block probe, with the one line why."""
    from dataclasses import replace

    from app.engine.request import LoraSpec
    from app.variants.catalog import CalibrationScope

    ink = LoraSpec("/loras/ink.safetensors", 0.75)
    base = get_variant("flux1-dev")
    assert base.default_gate() == "teacache" and base.uncalibrated_reason() is None
    assert base.default_gate([ink]) == "firstblock"
    assert "calibrated without this LoRA" in (base.uncalibrated_reason([ink]) or "")
    assert base.default_gate((), "/models/ft") == "firstblock"
    folder = replace(base, id="flux1-dev@ft", model_path="/models/ft")  # borrowed numbers
    assert "this model folder" in (folder.uncalibrated_reason() or "")
    scope = CalibrationScope("/models/ft", ((ink.path, ink.scale),))
    mine = replace(folder, id="flux1-dev@ft+ink", calibration_scope=scope)
    assert mine.default_gate([ink]) == "teacache" and mine.uncalibrated_reason([ink]) is None
    assert mine.default_gate() == "firstblock"
    assert "and this run has none" in (mine.uncalibrated_reason() or "")
    other = LoraSpec(ink.path, 1.0)  # the same file at another scale: not what was measured
    assert "not with this set" in (mine.uncalibrated_reason([other]) or "")
