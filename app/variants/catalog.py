"""What a model variant is: its family, the provenance of its gate numbers, and the variant itself.

Plain data: no MLX, no mflux, no files read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from app.gate.decision import GateConfigError, GateParams
from app.gate.gates import GATE_LABELS, MAGCACHE, TEACACHE, AnyGateParams, check_gate
from app.gate.magcache import MagCacheParams


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
class MagCacheCalibration:
    """A variant's MagCache table and its recipe (threshold, retention share, K), with provenance.

    ``default_threshold`` is None where the gate should stay off by default (distilled schedules).
    """

    ratios: tuple[float, ...]
    default_threshold: float | None
    retention_ratio: float
    max_consecutive_skips: int
    provenance: Provenance
    always_compute: tuple[int, ...] = ()

    def params(self, threshold: float | None = None) -> MagCacheParams:
        thresh = self.default_threshold if threshold is None else threshold
        return MagCacheParams(
            ratios=self.ratios,
            threshold=0.0 if thresh is None else thresh,
            retention_ratio=self.retention_ratio,
            max_consecutive_skips=self.max_consecutive_skips,
            always_compute=self.always_compute,
        )


def magcache_from_json(data: dict) -> MagCacheCalibration:
    """A calibration file's ``magcache`` block (see ``app.bench.calibrate``)."""
    return MagCacheCalibration(
        ratios=tuple(float(r) for r in data["ratios"]),
        default_threshold=data.get("default_threshold"),
        retention_ratio=float(data["retention_ratio"]),
        max_consecutive_skips=int(data["max_consecutive_skips"]),
        provenance=Provenance(**data["provenance"]),
        always_compute=tuple(int(i) for i in data.get("always_compute", ())),
    )


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
    magcache: MagCacheCalibration | None = None  # None: no MagCache table for this variant

    @property
    def gates(self) -> tuple[str, ...]:
        """The gates this variant has calibrations for (TeaCache always: its coefficients)."""
        return (TEACACHE, MAGCACHE) if self.magcache is not None else (TEACACHE,)

    def gate_unavailable_reason(self, gate: str) -> str | None:
        """None where ``gate`` can run on this variant, else one sentence saying why not."""
        check_gate(gate)
        if gate in self.gates:
            return None
        if self.distilled:
            return (
                f"{self.display_name} has no {GATE_LABELS[gate]} calibration: it is "
                "step-distilled, so no step is expected to be skippable"
            )
        return (
            f"{self.display_name} has no {GATE_LABELS[gate]} calibration yet; make one with "
            f"`teacache-studio calibrate --variant {self.id} --gate {gate}`"
        )

    def default_threshold_for(self, gate: str) -> float | None:
        if gate == MAGCACHE:
            return None if self.magcache is None else self.magcache.default_threshold
        return self.default_threshold

    def params_for(self, gate: str, threshold: float | None = None) -> AnyGateParams:
        """The gate's parameters at ``threshold`` (the gate's default where None)."""
        reason = self.gate_unavailable_reason(gate)
        if reason is not None:
            raise GateConfigError(reason)
        if gate == MAGCACHE and self.magcache is not None:
            return self.magcache.params(threshold)
        return self.gate_params(threshold)

    def magcache_params(self, threshold: float | None = None) -> MagCacheParams:
        """MagCache's parameters at ``threshold`` (its default where None); ``GateConfigError``
        with the reason where the variant has no table."""
        if self.magcache is None:
            raise GateConfigError(self.gate_unavailable_reason(MAGCACHE) or "")
        return self.magcache.params(threshold)

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


class UnknownVariantError(KeyError):
    """No variant has this id; ``known`` (when given) is listed in the message."""

    def __init__(self, variant_id: str, known: Iterable[str] = ()) -> None:
        super().__init__(variant_id)
        self.variant_id = variant_id
        self.known = tuple(known)

    def __str__(self) -> str:
        choices = f"; choose one of: {', '.join(self.known)}" if self.known else ""
        return f"unknown variant {self.variant_id!r}{choices}"


def calibrated_range_from_json(value: object) -> tuple[float, float] | None:
    """A calibration file's ``calibrated_range`` (a JSON list or null) as a pair of floats."""
    if value is None:
        return None
    lo, hi = value  # type: ignore[misc]
    return (float(lo), float(hi))
