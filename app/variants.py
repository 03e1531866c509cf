"""The variant registry: one entry per model variant the app can run, with the gate's numbers.

Data only: importing this module loads neither MLX nor mflux, so the command line can list
variants and answer "can this schedule skip at all?" instantly and without weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from app.gate.decision import GateParams, prediction_floor
from app.paths import DEMO_DIR


class Family(StrEnum):
    flux1 = "flux1"
    flux2 = "flux2"
    z_image = "z-image"
    qwen_image = "qwen-image"
    demo = "demo"

    @property
    def display_name(self) -> str:
        return _FAMILY_NAMES[self]


_FAMILY_NAMES = {
    Family.flux1: "FLUX.1",
    Family.flux2: "FLUX.2 Klein",
    Family.z_image: "Z-Image",
    Family.qwen_image: "Qwen-Image",
    Family.demo: "Embedded demo",
}


@dataclass(frozen=True, slots=True)
class Provenance:
    source: str
    fit_metric: str | None = None
    fit_value: float | None = None
    data_size: str | None = None
    reference: str | None = None
    notes: str | None = None


@dataclass(frozen=True, slots=True)
class Variant:
    """One runnable model variant and its gate numbers.

    ``distilled`` means step-distilled: a schedule of a few large strides where the gate is not
    expected to engage. Every distilled variant states why (``distilled_reason``) and names a
    non-distilled ``base_variant`` to suggest; ``distilled_reason`` is None for the others.
    ``default_threshold`` is None where the gate cannot engage on the default schedule.
    """

    id: str
    display_name: str
    family: Family
    distilled: bool
    default_steps: int
    default_guidance: float | None  # None: the family takes no guidance value
    default_threshold: float | None  # None: the gate cannot engage on this variant's schedule
    coefficients: tuple[float, float, float, float, float]
    provenance: Provenance
    hf_repo: str | None
    params_billion: float  # transformer + text encoder + VAE, for the memory estimate
    mflux_name: str | None = None
    calibrated_range: tuple[float, float] | None = None
    distilled_reason: str | None = None
    cfg: bool = False  # two transformer passes per step (one gate decision, two residuals)
    default_size: tuple[int, int] = (1024, 1024)
    min_steps: int = 2
    embedded: bool = False
    gated_repo: bool = False  # Hugging Face needs an accepted licence and a token
    base_variant: str | None = None  # the non-distilled sibling to suggest
    # Smallest predicted change seen on calibration data, where one was measured: the evidence
    # that a distilled schedule's gate stays above any sensible threshold.
    min_predicted_change: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def gate_params(self, threshold: float | None = None, **overrides: object) -> GateParams:
        thresh = self.default_threshold if threshold is None else threshold
        return GateParams(
            coefficients=self.coefficients,
            rel_l1_thresh=0.0 if thresh is None else thresh,
            calibrated_range=self.calibrated_range,
            **overrides,  # type: ignore[arg-type]
        )

    def memory_estimate_gb(self, quantize: int | None = None) -> float:
        """Rough peak need: weights at the chosen precision plus working memory."""
        if quantize not in _BYTES_PER_PARAM:
            raise ValueError(
                f"quantize must be one of {', '.join(map(str, QUANTIZE_LEVELS))} or none, "
                f"got {quantize!r}"
            )
        if self.embedded:
            return 0.5
        return round(self.params_billion * _BYTES_PER_PARAM[quantize] + 2.0, 1)

    def summary(self) -> dict[str, object]:
        data = asdict(self)
        data["family"] = self.family.value
        data["memory_gb"] = {
            "bf16": self.memory_estimate_gb(None),
            "q8": self.memory_estimate_gb(8),
            "q4": self.memory_estimate_gb(4),
        }
        return data


# Bytes per parameter at each mflux quantization level (None: bfloat16), group scales included.
_BYTES_PER_PARAM: dict[int | None, float] = {None: 2.0, 8: 1.07, 6: 0.82, 5: 0.70, 4: 0.57, 3: 0.45}
QUANTIZE_LEVELS: tuple[int, ...] = (3, 4, 5, 6, 8)

_UPSTREAM_FLUX1 = (498.651651244, -283.781631, 55.8554382, -3.82021401, 0.264230861)
_KLEIN_BASE = (-1841.022165607874, 848.4417137572868, -131.3554469956159, 8.179509586828413, 0.0)
_KLEIN_BASE_RANGE = (0.028261, 0.219845)
_Z_IMAGE = (-898.9907628349583, 367.7086118008557, -45.41511572598643, 3.95114319842774, 0.0)
_Z_IMAGE_RANGE = (0.027887, 0.259141)
_MLX_TEACACHE = "IonDen/mlx-teacache"
_UPSTREAM = "ali-vilab/TeaCache, TeaCache4FLUX/teacache_flux.py"
_STEP_DISTILLED = "step-distilled: a few large strides, each changing the output too much to reuse"


def _builtin() -> list[Variant]:
    flux1_prov = Provenance(
        source=f"upstream TeaCache FLUX.1 fit ({_UPSTREAM}), as vendored by {_MLX_TEACACHE}",
        notes="no published R² for this fit",
        reference="arXiv:2411.19108",
    )
    return [
        Variant(
            id="flux1-dev",
            display_name="FLUX.1 dev",
            family=Family.flux1,
            distilled=False,
            default_steps=25,
            default_guidance=3.5,
            default_threshold=0.20,
            coefficients=_UPSTREAM_FLUX1,
            provenance=flux1_prov,
            hf_repo="black-forest-labs/FLUX.1-dev",
            gated_repo=True,
            params_billion=16.8,
            mflux_name="dev",
            notes=(
                "guidance-distilled only, not step-distilled: a 25-step schedule still engages",
                "0.20 skips 6 of 25 steps on the mlx-teacache bench recipe",
            ),
        ),
        Variant(
            id="flux1-schnell",
            display_name="FLUX.1 schnell",
            family=Family.flux1,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; at its 4-step default only 2 steps are gate-eligible and the "
                "FLUX.1 polynomial never predicts below about 0.18"
            ),
            default_steps=4,
            default_guidance=None,
            default_threshold=None,
            coefficients=_UPSTREAM_FLUX1,
            provenance=flux1_prov,
            hf_repo="black-forest-labs/FLUX.1-schnell",
            params_billion=16.8,
            mflux_name="schnell",
            base_variant="flux1-dev",
            min_predicted_change=0.18,
        ),
        Variant(
            id="flux1-krea-dev",
            display_name="FLUX.1 Krea dev",
            family=Family.flux1,
            distilled=False,
            default_steps=28,
            default_guidance=4.5,
            default_threshold=0.30,
            coefficients=(
                24.18037744588824,
                -45.41912128506917,
                26.20213376107934,
                -3.579234954660995,
                0.40140693642366004,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} free fit on Krea pairs",
                fit_metric="R²",
                fit_value=0.68,
                data_size="270 pairs (10 prompts × 28 steps, g=4.5, q4)",
                notes="the FLUX.1-dev tuple scored R² −496 on the same pairs",
            ),
            hf_repo="black-forest-labs/FLUX.1-Krea-dev",
            gated_repo=True,
            params_billion=16.8,
            mflux_name="krea-dev",
            notes=(
                "guidance-distilled only, not step-distilled: a 28-step schedule still engages",
            ),
        ),
        Variant(
            id="flux2-klein-4b",
            display_name="FLUX.2 Klein 4B",
            family=Family.flux2,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; measured body-output change 0.261–1.008 between adjacent steps"
            ),
            default_steps=4,
            default_guidance=1.0,
            default_threshold=None,
            coefficients=(
                236.9190176127698,
                -201.47401360106662,
                66.91354236854073,
                -11.14796738073235,
                1.2674506310647067,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} free fit",
                fit_metric="R²",
                fit_value=0.653,
                data_size="70 pairs (10 prompts × 8 steps, 512², g=1)",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-4B",
            params_billion=8.0,
            mflux_name="flux2-klein-4b",
            base_variant="flux2-klein-base-4b",
            min_predicted_change=0.261,
        ),
        Variant(
            id="flux2-klein-9b",
            display_name="FLUX.2 Klein 9B",
            family=Family.flux2,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; the origin fit predicts above 0.20 over the whole observed "
                "input range 0.1316–0.4498"
            ),
            default_steps=4,
            default_guidance=1.0,
            default_threshold=None,
            coefficients=(
                -523.8412980807129,
                530.2492512602308,
                -177.64385734082498,
                20.893264957040557,
                0.0,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin-constrained fit",
                fit_metric="R²",
                fit_value=0.471,
                data_size="70 pairs (10 prompts × 8 steps, 512², g=1)",
                notes="the free fit gave poly(0) ≈ 5.36 and was rejected",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-9B",
            params_billion=17.0,
            mflux_name="flux2-klein-9b",
            base_variant="flux2-klein-base-9b",
            min_predicted_change=0.20,
        ),
        Variant(
            id="flux2-klein-base-4b",
            display_name="FLUX.2 Klein base 4B",
            family=Family.flux2,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.17,
            coefficients=_KLEIN_BASE,
            calibrated_range=_KLEIN_BASE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin-constrained fit",
                fit_metric="R²",
                fit_value=0.106,
                data_size="240 pairs (10 prompts × 25 steps, g=1)",
                notes="threshold from an SSIM sweep: 0.17 → SSIM 0.985 at 8/50 skips (g=4)",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-base-4B",
            params_billion=8.0,
            mflux_name="flux2-klein-base-4b",
            cfg=True,
        ),
        Variant(
            id="flux2-klein-base-9b",
            display_name="FLUX.2 Klein base 9B",
            family=Family.flux2,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.17,
            coefficients=_KLEIN_BASE,
            calibrated_range=_KLEIN_BASE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE}: the base-4B fit reused (same architecture and recipe)",
                fit_metric="validation SSIM",
                fit_value=0.986,
                data_size="validated at 50 steps, g=4",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-base-9B",
            params_billion=17.0,
            mflux_name="flux2-klein-base-9b",
            cfg=True,
        ),
        Variant(
            id="z-image",
            display_name="Z-Image",
            family=Family.z_image,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.12,
            coefficients=_Z_IMAGE,
            calibrated_range=_Z_IMAGE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin fit on the first-main-layer residual (signal B)",
                fit_metric="R²",
                fit_value=0.400,
                data_size="10 prompts × 50 steps, q8, g=4; held-out R² 0.179",
            ),
            hf_repo="Tongyi-MAI/Z-Image",
            params_billion=10.2,
            mflux_name="z-image",
            cfg=True,
        ),
        Variant(
            id="z-image-turbo",
            display_name="Z-Image Turbo",
            family=Family.z_image,
            distilled=True,
            distilled_reason=f"{_STEP_DISTILLED} and guidance-distilled (9 steps, no CFG)",
            default_steps=9,
            default_guidance=None,
            default_threshold=None,
            coefficients=_Z_IMAGE,
            calibrated_range=_Z_IMAGE_RANGE,
            provenance=Provenance(
                source=f"the Z-Image base fit ({_MLX_TEACACHE}); never calibrated on Turbo",
                notes="shown only to explain why the gate stays off",
            ),
            hf_repo="Tongyi-MAI/Z-Image-Turbo",
            params_billion=10.2,
            mflux_name="z-image-turbo",
            base_variant="z-image",
        ),
        Variant(
            id="qwen-image",
            display_name="Qwen-Image",
            family=Family.qwen_image,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.30,
            coefficients=(
                -12.954226906135869,
                8.883805167578382,
                -0.9363839862290331,
                1.4538816050570036,
                0.0,
            ),
            calibrated_range=(0.046760, 0.587800),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin fit (signal A, modulated block-0 input)",
                fit_metric="R²",
                fit_value=0.849,
                data_size="10 prompts × 50 steps, 768², q4, g=4; held-out R² 0.845",
                notes="fitted on Qwen/Qwen-Image; mflux 0.24 loads Qwen-Image-2512 (uncalibrated)",
            ),
            hf_repo="Qwen/Qwen-Image-2512",
            params_billion=28.5,
            mflux_name="qwen-image",
            cfg=True,
        ),
    ]


DEMO_GUIDANCE = 3.0


def _demo_variants() -> list[Variant]:
    """The embedded demo pair; their calibration is committed next to the weights."""
    variants = []
    for variant_id, distilled in (("demo", False), ("demo-turbo", True)):
        calibration = _load_calibration(DEMO_DIR / f"{variant_id}.calibration.json")
        variants.append(
            Variant(
                id=variant_id,
                display_name="Demo shapes" if not distilled else "Demo shapes turbo",
                family=Family.demo,
                distilled=distilled,
                distilled_reason=(
                    "distilled from `demo` to 4 steps on mflux's sigmas (1, 0.955, 0.875, 0.70); "
                    "its output changes 0.14–0.86 between steps, and the short early strides let "
                    "the gate skip a step at thresholds of 0.3 and above, so it is off by default"
                    if distilled
                    else None
                ),
                default_steps=4 if distilled else 28,
                # As FLUX.2 Klein: the base model samples with CFG (trained with caption dropout;
                # colour 88% → 97%, shape 27% → 45% on run 3), the distilled one without.
                default_guidance=1.0 if distilled else DEMO_GUIDANCE,
                default_threshold=calibration.get("default_threshold"),
                coefficients=tuple(calibration["coefficients"]),  # type: ignore[arg-type]
                calibrated_range=_pair(calibration.get("calibrated_range")),
                provenance=Provenance(**calibration["provenance"]),
                hf_repo=None,
                params_billion=0.01,
                default_size=(128, 128),
                embedded=True,
                base_variant="demo" if distilled else None,
                min_predicted_change=calibration.get("min_predicted_change"),
            )
        )
    return variants


def _pair(value: object) -> tuple[float, float] | None:
    if value is None:
        return None
    lo, hi = value  # type: ignore[misc]
    return (float(lo), float(hi))


def _load_calibration(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


class UnknownVariantError(KeyError):
    def __init__(self, variant_id: str) -> None:
        super().__init__(variant_id)
        self.variant_id = variant_id

    def __str__(self) -> str:
        known = ", ".join(VARIANTS)
        return f"unknown variant {self.variant_id!r}; choose one of: {known}"


def _registry(extra: Iterable[Variant] = ()) -> dict[str, Variant]:
    variants = [*_builtin(), *_demo_variants(), *extra]
    return {v.id: v for v in variants}


VARIANTS: dict[str, Variant] = _registry()
DEFAULT_VARIANT = "demo"


def all_variants() -> dict[str, Variant]:
    """The built-in variants followed by the user's calibrations (``<base>+<name>``)."""
    from app.calibration_store import user_variants

    return {**VARIANTS, **{v.id: v for v in user_variants()}}


def get_variant(variant_id: str) -> Variant:
    try:
        return VARIANTS[variant_id]
    except KeyError:
        pass
    from app.calibration_store import user_variant  # "<base>+<name>": a user calibration

    variant = user_variant(variant_id)
    if variant is None:
        raise UnknownVariantError(variant_id)
    return variant


def with_user_calibration(variant: Variant, calibration: dict) -> Variant:
    """A copy of ``variant`` that uses coefficients from a user calibration file."""
    return replace(
        variant,
        coefficients=tuple(float(c) for c in calibration["coefficients"]),  # type: ignore[arg-type]
        calibrated_range=_pair(calibration.get("calibrated_range")),
        default_threshold=calibration.get("default_threshold", variant.default_threshold),
        provenance=Provenance(**calibration["provenance"]),
    )


@dataclass(frozen=True, slots=True)
class ScheduleCheck:
    """Weight-free answer to "can (variant, steps) skip at all?"."""

    variant_id: str
    steps: int
    eligible_steps: int
    can_skip: bool
    reason: str
    suggestion: str | None
    # The smallest change the polynomial can predict (see ``prediction_floor``); None when the
    # gate is off. A threshold at or below it never skips.
    prediction_floor: float | None = None


def check_schedule(variant: Variant, steps: int, threshold: float | None = None) -> ScheduleCheck:
    params = variant.gate_params(threshold)
    eligible = params.eligible_steps(steps)
    thresh = params.rel_l1_thresh
    suggestion = None
    if variant.base_variant:
        base = VARIANTS.get(variant.base_variant)
        if base is not None:
            suggestion = (
                f"use {base.display_name} ({base.id}) at {base.default_steps} steps, "
                f"threshold {base.default_threshold:.2f}"
                if base.default_threshold is not None
                else f"use {base.display_name} ({base.id})"
            )
    if threshold is None and variant.default_threshold is None:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"no default threshold: {variant.distilled_reason or 'the gate is not calibrated'}",
            suggestion,
        )
    if thresh <= 0.0:
        return ScheduleCheck(
            variant.id, steps, eligible, False, "threshold 0 turns skipping off", suggestion
        )
    price_floor = prediction_floor(params)
    if eligible <= 0:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"{steps} steps leave no gate-eligible step (the first and last steps always compute)",
            suggestion or "use more steps",
            price_floor,
        )
    if thresh <= price_floor:
        where = "inside its calibrated range" if params.calibrated_range else "for any change"
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"the polynomial never predicts a change below {price_floor:.3f} {where}, so "
            f"threshold {thresh:g} cannot skip any step; use a threshold above {price_floor:.3f}",
            suggestion,
            price_floor,
        )
    floor = variant.min_predicted_change
    if variant.distilled and floor is not None and floor >= thresh:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            False,
            f"distilled schedule: the smallest predicted change measured is {floor:.3f}, "
            f"at or above the threshold {thresh:g}, so no step can be skipped",
            suggestion,
            price_floor,
        )
    if variant.distilled:
        return ScheduleCheck(
            variant.id,
            steps,
            eligible,
            True,
            f"distilled schedule ({variant.distilled_reason}); skipping here is uncalibrated",
            suggestion,
            price_floor,
        )
    return ScheduleCheck(
        variant.id,
        steps,
        eligible,
        True,
        f"{eligible} of {steps} steps are gate-eligible",
        None,
        price_floor,
    )
