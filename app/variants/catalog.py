"""What a model variant is: its family (``app.families``), the provenance of its gate numbers, and
the variant itself.

Plain data: no MLX, no mflux, no files read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Protocol

from app.families import Family
from app.gate.decision import GateConfigError
from app.gate.kinds import (
    DEFAULT_GATE,
    GATE_KINDS,
    UNCALIBRATED_GATE,
    GateParamsLike,
    MagCacheCalibration,
    TeaCacheCalibration,
    gate_kind,
    magcache_from_document,
    magcache_from_json,
)
from app.gate.provenance import Provenance

__all__ = [
    "CalibrationScope",
    "Family",
    "LoraLike",
    "MagCacheCalibration",
    "Provenance",
    "TeaCacheCalibration",
    "UnknownVariantError",
    "Variant",
    "calibrated_range_from_json",
    "magcache_from_document",
    "magcache_from_json",
    "quantize_label",
]


class LoraLike(Protocol):
    """A LoRA file as a request names it (``app.engine.request.LoraSpec``)."""

    @property
    def path(self) -> str: ...

    @property
    def scale(self) -> float: ...


@dataclass(frozen=True, slots=True)
class CalibrationScope:
    """What a user calibration was measured under, beyond its base variant: the model folder
    (absolute path; None: the variant's Hugging Face weights), the LoRA set (each file's absolute
    path and scale) and the quantization (None: full precision). A built-in calibration has none:
    it was measured on the base weights, without LoRAs."""

    model_path: str | None = None
    loras: tuple[tuple[str, float], ...] = ()
    quantize: int | None = None

    def fits(self, model_path: str | None, loras: Iterable[LoraLike]) -> bool:
        """Measured on these weights with exactly this LoRA set (in any order)."""
        given = sorted((lora.path, float(lora.scale)) for lora in loras)
        return model_path == self.model_path and given == sorted(self.loras)

    def lora_words(self) -> str:
        """ "with LoRA a.safetensors × 1, b.safetensors × 0.5", or "" without LoRAs."""
        if not self.loras:
            return ""
        names = ", ".join(f"{PurePath(path).name} × {scale:g}" for path, scale in self.loras)
        return f"with LoRA {names}"


BUILTIN_SCOPE = CalibrationScope()


@dataclass(frozen=True, slots=True)
class Variant:
    """One runnable model variant and its gate numbers.

    ``distilled`` means step-distilled: a schedule of a few large strides where the gate is not
    expected to engage. Every distilled variant states why (``distilled_reason``) and names a
    non-distilled ``base_variant`` to suggest; ``distilled_reason`` is None for the others.
    ``default_threshold`` is None where the gate cannot engage on the default schedule.
    ``coefficients`` is None where TeaCache has no numbers for the variant (a model of this year
    with no published fit): such a variant runs MagCache where it has a table, and the
    first-block probe, which needs no calibration (``default_gate``).
    """

    id: str
    display_name: str
    family: Family
    distilled: bool
    default_steps: int
    default_guidance: float | None  # None: the family takes no guidance value
    default_threshold: float | None  # None: the gate cannot engage on this variant's schedule
    coefficients: tuple[float, float, float, float, float] | None
    provenance: Provenance
    hf_repo: str | None
    params_billion: float  # transformer + text encoder + VAE, for the memory estimate
    mflux_name: str | None = None
    calibrated_range: tuple[float, float] | None = None
    distilled_reason: str | None = None
    cfg: bool = False  # two transformer passes per step (one gate decision, two residuals)
    default_size: tuple[int, int] = (1024, 1024)
    min_steps: int = 2
    gated_repo: bool = False  # Hugging Face needs an accepted licence and a token
    # The licence the weights come under where it limits their use (gated or not): said before a
    # download starts (``licence_note``) and beside the download's size; None: no such limit
    # recorded (an open licence).
    licence: str | None = None
    base_variant: str | None = None  # the non-distilled sibling to suggest
    # Smallest predicted change seen on calibration data, where one was measured: the evidence
    # that a distilled schedule's gate stays above any sensible threshold.
    min_predicted_change: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # A model folder's variant (``<base>@<name>``): where its weights are, and the quantization
    # they were saved at (mflux loads a pre-quantized folder at its stored level, whatever asked).
    model_path: str | None = None
    stored_quantize: int | None = None
    magcache: MagCacheCalibration | None = None  # None: no MagCache table for this variant
    # Parameters of ``params_billion`` that mflux keeps at 16 bits whatever the quantization (a
    # component its weight definition marks ``skip_quantization``: Qwen-Image 2.1's and Krea 2's
    # text encoders)
    unquantized_billion: float = 0.0
    # What a user calibration was measured under (None: a built-in calibration, measured on the
    # Hub weights without LoRAs); see ``calibrated_for``.
    calibration_scope: CalibrationScope | None = None

    # -- the gates' calibrations: each gate kind reads its own (``GateKind.calibration_of``) --
    @property
    def teacache(self) -> TeaCacheCalibration | None:
        """TeaCache's numbers, kept as the variant's own fields; None without coefficients."""
        if self.coefficients is None:
            return None
        return TeaCacheCalibration(
            coefficients=self.coefficients,
            calibrated_range=self.calibrated_range,
            default_threshold=self.default_threshold,
            provenance=self.provenance,
            min_predicted_change=self.min_predicted_change,
            measured_steps=self.default_steps,
        )

    @property
    def calibrations(
        self,
    ) -> dict[str, TeaCacheCalibration | MagCacheCalibration]:
        """Each gate's calibration for this variant, by gate name (a calibration names its
        gate); a gate with none is absent (the first-block probe needs none: its kind gives its
        defaults). A kind's calibration of a new type is one more field here (as ``magcache``)."""
        found = (self.teacache, self.magcache)
        return {c.gate: c for c in found if c is not None}

    def uncalibrated_reason(
        self, loras: Iterable[LoraLike] = (), model_path: str | None = None
    ) -> str | None:
        """Why TeaCache has no calibration for the model that would run, in one sentence (the
        window's note beside the gate), or None where it has one: a variant without TeaCache
        numbers, a model folder its numbers were not measured on, a LoRA set they were not
        measured with (``calibrated_for``: a user calibration made on that folder with that set
        is one)."""
        probe = gate_kind(UNCALIBRATED_GATE).label
        tea = gate_kind(DEFAULT_GATE).label
        if self.teacache is None:
            return (
                f"{self.display_name} has no {tea} calibration, so the {probe} (which needs "
                "none) is the default"
            )
        scope = self.calibration_scope or BUILTIN_SCOPE
        folder = self.model_path if model_path is None else model_path
        if folder != scope.model_path:
            return (
                f"{tea} was calibrated on other weights than this model folder's, so the "
                f"{probe} (which needs no calibration) is the default"
            )
        loras = tuple(loras)
        if not scope.fits(folder, loras):
            if not scope.loras:
                these = "this LoRA" if len(loras) == 1 else "these LoRAs"
                why = f"{tea} was calibrated without {these}"
            elif loras:
                why = f"{tea} was calibrated {scope.lora_words()}, not with this set"
            else:
                why = f"{tea} was calibrated {scope.lora_words()}, and this run has none"
            return f"{why}, so the {probe} (which needs no calibration) is the default"
        return None

    def default_gate(self, loras: Iterable[LoraLike] = (), model_path: str | None = None) -> str:
        """The gate a run opens with: TeaCache where it has a calibration for the model that runs
        (``uncalibrated_reason``), else the first-block probe."""
        if self.uncalibrated_reason(loras, model_path) is None:
            return DEFAULT_GATE
        return UNCALIBRATED_GATE

    @property
    def gates(self) -> tuple[str, ...]:
        """The gates that can run on this variant (in the registry's order: the first is its
        default)."""
        return tuple(
            name for name, kind in GATE_KINDS.items() if kind.calibration_of(self) is not None
        )

    def calibrated_for(self, loras: Iterable[LoraLike] = ()) -> bool:
        """The gates' numbers were measured on this variant's weights (its model folder, if it
        is one) with exactly this LoRA set: a model folder's variant borrows its base's numbers
        and a LoRA changes what the model computes, so neither is "calibrated for" until a user
        calibration is made with it (``teacache-studio calibrate`` or the window's Calibrate
        This Model…)."""
        scope = self.calibration_scope or BUILTIN_SCOPE
        return scope.fits(self.model_path, loras)

    def gate_unavailable_reason(self, gate: str, remedy: str | None = None) -> str | None:
        """None where ``gate`` can run on this variant, else one sentence saying why not.
        ``remedy`` says how to make a calibration where the command line's does not fit (the
        window has its own Calibrate)."""
        kind = gate_kind(gate)
        if gate in self.gates:
            return None
        if self.distilled:
            return (
                f"{self.display_name} has no {kind.label} calibration: it is "
                "step-distilled, so no step is expected to be skippable"
            )
        remedy = (
            remedy or f"make one with `teacache-studio calibrate --variant {self.id} --gate {gate}`"
        )
        return f"{self.display_name} has no {kind.label} calibration yet; {remedy}"

    def default_threshold_for(self, gate: str) -> float | None:
        kind = gate_kind(gate)
        calibration = kind.calibration_of(self)
        return None if calibration is None else kind.default_threshold(calibration)

    def params_for(self, gate: str, threshold: float | None = None) -> GateParamsLike:
        """The gate's parameters at ``threshold`` (the gate's default where None)."""
        kind = gate_kind(gate)
        calibration = kind.calibration_of(self)
        if calibration is None:
            raise GateConfigError(self.gate_unavailable_reason(gate) or "")
        return kind.params(calibration, threshold)

    @property
    def licence_note(self) -> str | None:
        """What a download must say before it starts, in one sentence: for a gated repo what to
        do before it can start, for weights under a licence that limits their use which one and
        where to read it; None for the others."""
        if self.gated_repo:
            return (
                f"{self.display_name} is a gated model: accept its licence at "
                f"https://huggingface.co/{self.hf_repo} and log in with `hf auth login` (or set "
                "HF_TOKEN) before it downloads"
            )
        if self.licence is not None:
            return (
                f"{self.display_name} comes under the {self.licence}: read it at "
                f"https://huggingface.co/{self.hf_repo} before you use its weights"
            )
        return None

    def weights_gb(self, quantize: int | None = None) -> float:
        """The weights at ``quantize`` in GB (2**30 bytes): parameters × bytes per weight
        (``_BYTES_PER_PARAM``; ``unquantized_billion`` at 2 bytes whatever ``quantize``). Known,
        not estimated: what loading needs whatever the image."""
        if quantize not in _BYTES_PER_PARAM:
            raise ValueError(
                f"quantize must be one of {', '.join(map(str, QUANTIZE_LEVELS))} or none, "
                f"got {quantize!r}"
            )
        if self.family.weights_shipped:
            return 0.0  # part of the app's own memory
        if self.stored_quantize is not None:
            quantize = self.stored_quantize
        quantized = self.params_billion - self.unquantized_billion
        bytes_ = quantized * _BYTES_PER_PARAM[quantize] + self.unquantized_billion * 2.0
        return bytes_ * 1e9 / 1024**3

    def working_gb(self, size: tuple[int, int] | None = None, *, upper: bool = True) -> float:
        """Working memory of one generation at ``size`` (default: the variant's own size): the
        upper bound measured on CUDA (the family's ``activation_gb_per_megapixel``), or with
        ``upper=False`` the realistic figure the default quantization is chosen by
        (``REALISTIC_WORKING_SHARE`` of it). Never below ``MIN_WORKING_GB``."""
        if self.family.flat_working_gb is not None:
            return self.family.flat_working_gb
        width, height = size if size is not None else self.default_size
        share = 1.0 if upper else REALISTIC_WORKING_SHARE
        per_megapixel = self.family.activation_gb_per_megapixel * share
        return max(per_megapixel * width * height / 1024**2, MIN_WORKING_GB)

    def memory_estimate_gb(
        self, quantize: int | None = None, size: tuple[int, int] | None = None
    ) -> float:
        """Estimated peak memory in GB, an upper bound: the weights at ``quantize`` plus the
        working memory of one generation at ``size`` as measured on CUDA (``working_gb``)."""
        return round(self.weights_gb(quantize) + self.working_gb(size), 1)

    def realistic_memory_gb(
        self, quantize: int | None = None, size: tuple[int, int] | None = None
    ) -> float:
        """The weights plus the realistic working memory: what the default quantization fits."""
        return round(self.weights_gb(quantize) + self.working_gb(size, upper=False), 1)

    def summary(self) -> dict[str, object]:
        data = asdict(self)
        data["family"] = self.family.id
        data["embedded"] = self.family.weights_shipped  # ``variants --json`` has always said so
        data["weights_gb"] = {
            quantize_label(q, short=True): round(self.weights_gb(q), 1)
            for q in (None, *sorted(QUANTIZE_LEVELS, reverse=True))
        }
        data["memory_gb"] = {
            quantize_label(q, short=True): self.memory_estimate_gb(q)
            for q in (None, *sorted(QUANTIZE_LEVELS, reverse=True))
        }
        return data


# mflux's quantization levels (its CLIs' ``--quantize`` choices in mflux 0.24: 3, 4, 5, 6, 8).
QUANTIZE_LEVELS: tuple[int, ...] = (3, 4, 5, 6, 8)
# mflux quantizes with MLX's affine ``nn.quantize`` at group_size 64: each group of 64 weights
# keeps a bfloat16 scale and a bfloat16 bias (4 bytes), so a weight costs bits/8 + 4/64 bytes.
# Unquantized (None) weights are bfloat16: 2 bytes. (Norms and biases stay 16-bit at every level;
# they are well under 1% of the parameters.)
_GROUP_SIZE = 64
_BYTES_PER_PARAM: dict[int | None, float] = {
    None: 2.0,
    **{bits: bits / 8 + 4 / _GROUP_SIZE for bits in QUANTIZE_LEVELS},
}
# Working memory of one generation per megapixel of image, by family (each ``app.families``
# module's ``activation_gb_per_megapixel``): the peak memory minus the
# memory after loading, measured at 1024 × 1024 in bf16 on the H200 with full-size random
# weights (resources/benchmarks/<variant>-1024-random-h200.json: max of the three conditions'
# peak_memory_bytes minus runs[0].load_peak_memory_bytes), the larger of the batches where there
# were two (the first kept in lab/bench/results/memory-basis/: FLUX.1 dev read 6.3 then 8.1 GB,
# Klein 4B 14.8 then 14.4, Z-Image and Qwen-Image the same twice) and of a family's measured
# variants (FLUX.3: its base's 13.7 over the distilled 13.5). tests/variants/
# test_memory_estimate.py re-derives them, and fails while a family borrows a figure that a
# committed report measures.
# GB here is 2**30 bytes, as in the memory check. Scaled linearly with the pixel count: at
# 512 × 512 Klein 4B measured 3.7 GB where a quarter of 14.4 is 3.6, so linear scaling holds.
# MLX's CUDA backend is what was measured, so this is an upper bound for a Mac: the peak may be
# the VAE decode at full resolution or CUDA's allocator, not the transformer; a Mac may need less.
# The working memory the default quantization is chosen by: half the CUDA measurement above. No
# Apple-silicon measurement exists yet; the CUDA figure is a peak over the denoising loop and the
# VAE decode at full resolution under MLX CUDA's allocator, and Black Forest Labs states FLUX.2
# Klein 4B runs in about 13 GB of VRAM (if that is its 7.5 GB bf16 transformer plus working
# memory, ~5.5 GB: about a third of 14.8), so half errs high without ruling out what users run.
REALISTIC_WORKING_SHARE = 0.5
MIN_WORKING_GB = 1.0  # tokenizers, latents, the decoded image and MLX's own buffers


def quantize_label(quantize: int | None, *, short: bool = False) -> str:
    """``None`` → "full precision" ("bf16"), 4 → "4-bit" ("q4")."""
    if short:
        return "bf16" if quantize is None else f"q{quantize}"
    return "full precision" if quantize is None else f"{quantize}-bit"


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
