"""The one frozen object that crosses from the UI (or the command line) into the engine."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.families import family_names, load
from app.gate.decision import GateConfigError
from app.gate.fill import DEFAULT_FILL, UnknownFillError, check_fill
from app.gate.kinds import DEFAULT_GATE, GateParamsLike, UnknownGateError, check_gate, gate_kind
from app.variants import QUANTIZE_LEVELS, Variant, get_variant
from app.variants.schedule import image_strength, steps_left_out

MAX_SIDE = 2048
MAX_STEPS = 1000
# Guidance the families accept: 1 turns classifier-free guidance off (below 1 it would push away
# from the prompt), and the published recipes (FLUX.1 dev 3.5, Klein base and Z-Image 4,
# Qwen-Image 4, the demo 3) sit well inside 10, beyond which images saturate.
GUIDANCE_RANGE = (1.0, 10.0)
# The seeds every entry takes, one range for all (`generate --seed`, the window's seed box, the
# settings): a 32-bit unsigned integer, as the engine has taken since its first version.
SEED_RANGE = (0, 2**32 - 1)
# LoRA cards recommend scales up to about 1.5 and slider LoRAs use negative ones; past ±5 the
# update dwarfs the base weights, so a larger number is almost surely a typo.
LORA_SCALE_RANGE = (-5.0, 5.0)
# Each file is another full transformer patch held in memory; stacks of more than a few are rare.
MAX_LORAS = 4
# A safetensors header is a few kilobytes per tensor; anything past this is not a safetensors file.
_MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
# The strength a run from a picture takes where none is given: mflux's own default
# (``--image-strength 0.4`` keeps 40 % of the picture, so 60 % of the steps run).
DEFAULT_STRENGTH = 0.6
# A run's size moves in steps of this many pixels (VAE factor 8 × patch 2 for FLUX, the demo's
# 16-pixel patches); mflux rounds a picture's size down to it (``DIMENSION_STEP_PIXELS``).
SIZE_MULTIPLE = 16


class RequestError(ValueError):
    """The request is invalid; the message is one clear sentence for the user."""


DEFAULT_MIN_SSIM = 0.97
# The worst 16 × 16 window's mean difference (0–1, largest RGB channel per pixel) that a target
# run accepts by default. Basis: lab/target/results/local-diff-survey.json (demo, the 10 prompts
# of its threshold sweep at thresholds 0.05–0.3, seed 42, plus the lost-circle case; 55
# runs on AMD EPYC CPU): ordinary drift measured 0.004–0.162 in 47 of them; lost or reshaped
# objects 0.39–0.83 (the lost circle 0.82–0.83 at thresholds 0.1–0.3, SSIM 0.906–0.938; two
# striped squares 0.75 at SSIM 0.945 and 0.39 at 0.921). Two runs in between are not inspected:
# 0.21 (SSIM 0.967) and 0.285 (SSIM 0.972). 0.25 sits in the gap: above all 47, below every loss.
DEFAULT_MAX_LOCAL_DIFF = 0.25
# Real passes a target search may run (the first at the starting threshold included); bisection
# over the simulator's skip patterns needs log2(patterns) of them: 28 demo steps give ≤ 30 patterns.
MAX_SEARCH_PASSES = 8


@dataclass(frozen=True, slots=True)
class QualityTarget:
    """Ask for a quality instead of a threshold: the search keeps the threshold with the most
    skips whose measured SSIM against vanilla is at least ``min_ssim`` (None: no SSIM bound),
    whose worst local difference is at most ``max_local_diff`` (None: no local bound) and whose
    SSIMULACRA2 is at least ``min_ssimulacra2`` (None: no perceptual bound)."""

    min_ssim: float | None = DEFAULT_MIN_SSIM
    max_local_diff: float | None = DEFAULT_MAX_LOCAL_DIFF
    max_passes: int = MAX_SEARCH_PASSES
    min_ssimulacra2: float | None = None

    def met_by(
        self, ssim: float | None, local_diff: float | None, ssimulacra2: float | None = None
    ) -> bool:
        if self.min_ssim is not None and not _at_least(ssim, self.min_ssim):
            return False
        if self.min_ssimulacra2 is not None and not _at_least(ssimulacra2, self.min_ssimulacra2):
            return False
        if self.max_local_diff is None:
            return True
        return local_diff is not None and local_diff <= self.max_local_diff

    def describe(self) -> str:
        bounds = []
        if self.min_ssim is not None:
            bounds.append(f"SSIM ≥ {self.min_ssim:g}")
        if self.min_ssimulacra2 is not None:
            bounds.append(f"SSIMULACRA2 ≥ {self.min_ssimulacra2:g}")
        if self.max_local_diff is not None:
            bounds.append(f"local difference ≤ {self.max_local_diff:g}")
        return " and ".join(bounds)


def _at_least(value: float | None, bound: float) -> bool:
    return value is not None and math.isfinite(value) and value >= bound


def make_target(
    min_ssim: float | None,
    max_local_diff: float | None = DEFAULT_MAX_LOCAL_DIFF,
    min_ssimulacra2: float | None = None,
) -> QualityTarget:
    """Validate a quality target (an SSIM bound, a SSIMULACRA2 bound, or both). Raises
    ``RequestError`` with one sentence."""
    if min_ssim is None and min_ssimulacra2 is None:
        raise RequestError("a quality target needs a minimum SSIM or a minimum SSIMULACRA2")
    if min_ssim is not None and not (math.isfinite(min_ssim) and 0.0 < min_ssim <= 1.0):
        raise RequestError(f"the target SSIM must be above 0 and at most 1, got {min_ssim:g}")
    if min_ssimulacra2 is not None and not (
        math.isfinite(min_ssimulacra2) and min_ssimulacra2 <= 100.0
    ):
        raise RequestError(
            f"the target SSIMULACRA2 must be a number up to 100, got {min_ssimulacra2:g}"
        )
    if max_local_diff is not None and not (
        math.isfinite(max_local_diff) and 0.0 <= max_local_diff <= 1.0
    ):
        raise RequestError(
            f"the largest local difference must be between 0 and 1, got {max_local_diff:g}"
        )
    return QualityTarget(
        None if min_ssim is None else float(min_ssim),
        max_local_diff,
        min_ssimulacra2=None if min_ssimulacra2 is None else float(min_ssimulacra2),
    )


@dataclass(frozen=True, slots=True)
class LoraSpec:
    """One LoRA file (absolute path) and the scale mflux applies it at."""

    path: str
    scale: float = 1.0

    @property
    def name(self) -> str:
        return Path(self.path).name

    def label(self) -> str:
        return f"{self.name} × {self.scale:g}"


@dataclass(frozen=True, slots=True)
class InputImage:
    """A picture a run starts from: its file (absolute path), the SHA-256 of the file's bytes
    (the history and PNG metadata record it: a path may move or be overwritten, the hash names
    the picture) and its size as displayed (EXIF orientation applied, as mflux loads it)."""

    path: str
    sha256: str
    width: int
    height: int

    @property
    def name(self) -> str:
        return Path(self.path).name

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "width": self.width,
            "height": self.height,
        }

    @classmethod
    def from_json(cls, data: Any) -> InputImage:
        """A recorded picture (``as_json``; plain data, not checked again)."""
        if isinstance(data, InputImage):
            return data
        return cls(str(data["path"]), str(data["sha256"]), int(data["width"]), int(data["height"]))


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    variant_id: str
    prompt: str
    seed: int
    steps: int
    threshold: float  # 0 turns skipping off
    width: int
    height: int
    guidance: float | None = None
    quantize: int | None = None
    compare_vanilla: bool = True
    # Resume the gated pass from the cached vanilla trajectory (bit-exact; the app's fast path).
    resume: bool = False
    # Applied to both passes (one pipeline), so the comparison stays paired.
    loras: tuple[LoraSpec, ...] = ()
    # A local model folder (absolute) to load instead of the variant's Hugging Face weights.
    model_path: str | None = None
    # Live step previews (StepPreview events): never change the numbers and are charged to no
    # step's time, but cost a little wall time; off for benchmarks and calibration.
    previews: bool = False
    gate: str = DEFAULT_GATE  # a gate kind's name (app.gate.kinds.GATES)
    # What a skipped step adds, whichever gate skips it: a fill's name (app.gate.fill.FILLS).
    fill: str = DEFAULT_FILL
    # Calibration: the vanilla pass also records each step's transformer-output change (a host
    # sync a step, so such a vanilla is cached apart: never reused as a Generate's timed one).
    capture_output: bool = False
    # The gate's calibration where it is not yet the variant's: a calibration job trying
    # thresholds on the fit it has not saved (one of the gate kind's ``calibration_type``); None:
    # the variant's own (every other run). Never stored (``from_dict`` drops it).
    unsaved_calibration: Any = None
    # The pictures the run starts from (image-to-image: one, noised to ``strength``'s step) and
    # how far the result may move from it: the share of the schedule that runs, in (0, 1]
    # (``app.variants.schedule.image_strength`` says how mflux counts it). None without a picture.
    images: tuple[InputImage, ...] = ()
    strength: float | None = None

    @property
    def variant(self) -> Variant:
        return get_variant(self.variant_id)

    @property
    def steps_left_out(self) -> int:
        """The first steps of the schedule this run never runs (strength starts the loop
        later): 0 without a picture."""
        return steps_left_out(self.steps, self.strength if self.images else None)

    @property
    def active_steps(self) -> int:
        """The steps the loop runs, each with one ``StepEvent`` (the gate counts these)."""
        return self.steps - self.steps_left_out

    def gate_params(self) -> GateParamsLike:
        """The gate's parameters at ``threshold``: from ``unsaved_calibration`` where the request
        carries one, else from the variant's calibration for ``gate``; for the steps a run from a
        picture runs."""
        kind = gate_kind(self.gate)
        if self.unsaved_calibration is None:
            params = self.variant.params_for(self.gate, self.threshold)
        elif not isinstance(self.unsaved_calibration, kind.calibration_type):
            raise GateConfigError(f"not a {kind.label} calibration: {self.unsaved_calibration!r}")
        else:
            params = kind.params(self.unsaved_calibration, self.threshold)
        # From a picture the gate counts only the steps that run (``GateKind.for_steps_run``).
        return kind.for_steps_run(params, self.steps, self.steps_left_out)

    def vanilla_key(self) -> tuple[object, ...]:
        """Everything a vanilla run depends on: moving only the threshold reuses it. A
        calibration's vanilla (``capture_output``: a host sync a step) is its own: a Generate
        never times against it."""
        return (
            self.variant_id,
            self.prompt,
            self.seed,
            self.steps,
            self.width,
            self.height,
            self.guidance,
            self.quantize,
            self.loras,
            self.model_path,
            self.capture_output,
            self.images,
            self.strength,
        )

    def with_threshold(self, threshold: float) -> GenerationRequest:
        return replace(self, threshold=threshold)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationRequest:
        """The request ``as_dict`` wrote (plain data, not checked again: use ``make_request`` for
        user input)."""
        names = {f.name for f in fields(cls)} - {"unsaved_calibration"}
        values = {k: v for k, v in data.items() if k in names}
        values["loras"] = tuple(
            lora if isinstance(lora, LoraSpec) else LoraSpec(str(lora["path"]), lora["scale"])
            for lora in values.get("loras", ())
        )
        values["images"] = tuple(InputImage.from_json(image) for image in values.get("images", ()))
        return cls(**values)


def generate_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """The request as mflux's ``generate_image`` arguments (every family takes these names)."""
    kwargs: dict[str, Any] = {
        "seed": request.seed,
        "prompt": request.prompt,
        "num_inference_steps": request.steps,
        "height": request.height,
        "width": request.width,
    }
    if request.guidance is not None:
        kwargs["guidance"] = request.guidance
    # At strength 1 every step runs from noise: mflux then takes no picture (its strength 0).
    if request.images and request.strength is not None:
        kept = image_strength(request.strength)
        if kept > 0.0:
            kwargs["image_path"] = request.images[0].path
            kwargs["image_strength"] = kept
    return kwargs


def check_steps(variant: Variant, steps: object) -> None:
    """Raises ``RequestError`` with one sentence where ``steps`` is outside the variant's range."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < variant.min_steps:
        raise RequestError(
            f"steps must be at least {variant.min_steps} for {variant.id}, got {steps}"
        )
    if steps > MAX_STEPS:
        raise RequestError(f"steps must be at most {MAX_STEPS}, got {steps}")


def check_safetensors(path: Path) -> None:
    """Raises ``RequestError`` unless ``path`` starts with a safetensors header (not loaded)."""
    try:
        with path.open("rb") as handle:
            size_bytes = handle.read(8)
            size = int.from_bytes(size_bytes, "little") if len(size_bytes) == 8 else 0
            header = handle.read(size) if 0 < size <= _MAX_SAFETENSORS_HEADER else b""
    except OSError as exc:
        raise RequestError(f"cannot read the LoRA file {path}: {exc.strerror or exc}") from None
    try:
        parsed = json.loads(header) if len(header) == size > 0 else None
    except (UnicodeDecodeError, ValueError):
        parsed = None
    if not isinstance(parsed, dict):
        raise RequestError(f"the LoRA file {path} is not a readable .safetensors file")


def check_lora_file(path: Path) -> None:
    """Raises ``RequestError`` with one sentence unless ``path`` is an existing .safetensors file
    with a readable header (what the window checks when a LoRA is picked, and every request)."""
    if path.suffix.lower() != ".safetensors":
        raise RequestError(f"a LoRA must be a .safetensors file, got {path}")
    if not path.is_file():
        raise RequestError(f"the LoRA file {path} does not exist")
    check_safetensors(path)


def check_loras(
    variant: Variant, loras: Iterable[LoraSpec | tuple[str, float]]
) -> tuple[LoraSpec, ...]:
    """The LoRA list as ``LoraSpec``s with absolute paths; one ``RequestError`` sentence where a
    file or scale is unusable."""
    given = [
        item if isinstance(item, LoraSpec) else LoraSpec(str(item[0]), item[1]) for item in loras
    ]
    if not given:
        return ()
    if not variant.family.supports_lora:
        what = (
            "ships with the app (not an mflux model)"
            if variant.family.weights_shipped
            else f"is a {variant.family.display_name} model, which mflux has no LoRA mapping for,"
        )
        raise RequestError(
            f"{variant.id} {what} and takes no LoRA; "
            f"choose a {family_names(lambda f: f.supports_lora, 'or')} variant"
        )
    if len(given) > MAX_LORAS:
        raise RequestError(f"at most {MAX_LORAS} LoRA files at once, got {len(given)}")
    low, high = LORA_SCALE_RANGE
    out: list[LoraSpec] = []
    for spec in given:
        path = Path(spec.path).expanduser()
        check_lora_file(path)
        try:
            scale = float(spec.scale)
        except (TypeError, ValueError):
            raise RequestError(f"the LoRA scale must be a number, got {spec.scale!r}") from None
        if not (math.isfinite(scale) and low <= scale <= high):
            raise RequestError(
                f"the LoRA scale must be between {low:g} and {high:g}, got {spec.scale} "
                f"for {path.name}"
            )
        resolved = str(path.resolve())
        if any(o.path == resolved for o in out):
            raise RequestError(f"the LoRA file {path.name} is listed twice")
        out.append(LoraSpec(resolved, scale))
    return tuple(out)


def check_image_file(path: str | Path) -> InputImage:
    """The picture at ``path`` as an ``InputImage`` (absolute path, hash, displayed size);
    ``RequestError`` with one sentence where it is missing, not a file, not an image Pillow can
    decode, or smaller than one 16-pixel patch. A file checked before and not changed since (its
    size and modification time) is not decoded and hashed again: the window builds a request on
    every change of its inputs."""
    file = Path(path).expanduser()
    if not file.exists():
        raise RequestError(f"the picture {file} does not exist")
    if not file.is_file():
        raise RequestError(f"the picture {file} is not a file")
    try:
        stat = file.stat()
    except OSError as exc:
        raise RequestError(f"cannot read the picture {file}: {exc.strerror or exc}") from None
    return _checked_image(str(file.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _checked_image(path: str, size: int, modified_ns: int) -> InputImage:
    from mflux.utils.exif_orientation import oriented_size
    from PIL import Image, UnidentifiedImageError

    file = Path(path)
    try:
        with Image.open(file) as image:
            image.load()  # decodes every pixel: a truncated file fails here, not in the run
        width, height = oriented_size(file)
        digest = hashlib.sha256()
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except UnidentifiedImageError:
        raise RequestError(f"the picture {file} is not an image this app can read") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).rstrip(".") or type(exc).__name__
        raise RequestError(f"cannot read the picture {file}: {reason}") from None
    if min(width, height) < SIZE_MULTIPLE:
        raise RequestError(
            f"the picture {file.name} is {width} × {height} pixels; a picture to start from "
            f"needs at least {SIZE_MULTIPLE} pixels a side"
        )
    return InputImage(path, digest.hexdigest(), width, height)


def check_images(
    variant: Variant, images: Iterable[str | Path | InputImage]
) -> tuple[InputImage, ...]:
    """The pictures as ``InputImage``s, each file checked (and hashed) again; one
    ``RequestError`` sentence where the variant cannot start from a picture or gets too many."""
    given = [image.path if isinstance(image, InputImage) else image for image in images]
    if not given:
        return ()
    if not variant.family.img2img:
        raise RequestError(
            f"{variant.id} cannot start from a picture (mflux has no image-to-image path for "
            f"{variant.family.display_name}); choose a "
            f"{family_names(lambda f: f.img2img, 'or')} variant"
        )
    if len(given) > 1:
        raise RequestError(f"{variant.id} starts from one picture, got {len(given)}")
    return tuple(check_image_file(path) for path in given)


def check_strength(
    images: tuple[InputImage, ...], strength: float | None, steps: int
) -> float | None:
    """The strength the run takes: ``DEFAULT_STRENGTH`` with a picture where none is given, None
    without one; ``RequestError`` (one sentence) outside (0, 1], without a picture, or where it
    leaves no step to run."""
    if strength is None:
        return DEFAULT_STRENGTH if images else None
    if not images:
        raise RequestError(
            "strength says how far a picture to start from may change; give a picture or "
            "leave strength out"
        )
    try:
        value = float(strength)
    except (TypeError, ValueError):
        raise RequestError(f"strength must be a number, got {strength!r}") from None
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise RequestError(f"strength must be above 0 and at most 1, got {strength}")
    if steps_left_out(steps, value) >= steps:
        raise RequestError(f"strength {value:g} leaves none of the {steps} steps to run; raise it")
    return value


def size_for_image(image: InputImage) -> tuple[int, int]:
    """The run's size where it follows its picture: mflux's rule (the picture's own size,
    each side rounded down to a multiple of 16), scaled down first where a side is over
    ``MAX_SIDE`` (aspect kept), since mflux would try the whole photograph."""
    width, height = image.width, image.height
    largest = max(width, height)
    if largest > MAX_SIDE:
        width, height = width * MAX_SIDE // largest, height * MAX_SIDE // largest
    return (
        max(SIZE_MULTIPLE, width - width % SIZE_MULTIPLE),
        max(SIZE_MULTIPLE, height - height % SIZE_MULTIPLE),
    )


def check_prompt(variant: Variant, prompt: str) -> str:
    """The prompt without surrounding blanks; ``RequestError`` where it is empty or one the
    variant's family cannot draw (its prompt check: the demo draws only its own vocabulary)."""
    prompt = prompt.strip()
    if not prompt:
        raise RequestError("the prompt is empty; describe the image you want")
    if variant.family.prompt_check is not None:
        problem = load(variant.family.prompt_check)(prompt)
        if problem is not None:
            raise RequestError(problem)
    return prompt


def check_gate_for(variant: Variant, gate: object) -> None:
    """Raises ``RequestError`` with one sentence where ``gate`` is unknown or uncalibrated."""
    try:
        check_gate(gate)
    except UnknownGateError as exc:
        raise RequestError(str(exc)) from None
    reason = variant.gate_unavailable_reason(str(gate))
    if reason is not None:
        raise RequestError(reason)


def make_request(
    variant_id: str,
    prompt: str,
    *,
    seed: int = 42,
    steps: int | None = None,
    threshold: float | None = None,
    size: tuple[int, int] | None = None,
    guidance: float | None = None,
    quantize: int | None = None,
    compare_vanilla: bool = True,
    resume: bool = False,
    loras: Iterable[LoraSpec | tuple[str, float]] = (),
    model_path: str | Path | None = None,
    previews: bool = False,
    gate: str | None = None,
    gate_numbers_given: bool = False,
    fill: str = DEFAULT_FILL,
    images: Iterable[str | Path | InputImage] = (),
    strength: float | None = None,
) -> GenerationRequest:
    """Validate user input and fill defaults from the registry. Raises ``RequestError``.
    ``images``: the pictures the run starts from (checked and hashed here); ``size`` None then
    follows the picture (``size_for_image``) unless the family draws one size only.
    ``gate`` None: the variant's default for this model (``Variant.default_gate``: TeaCache where
    it is calibrated for it, else the first-block probe). ``gate_numbers_given``: the caller
    supplies the gate's numbers (``bench --forced-skips``, a timing-only pattern), so the variant
    need not have a calibration for ``gate``."""
    from app.variants import UnknownVariantError

    try:
        variant = get_variant(variant_id)
    except UnknownVariantError as exc:
        raise RequestError(str(exc)) from None
    prompt = check_prompt(variant, prompt)
    steps = variant.default_steps if steps is None else steps
    check_steps(variant, steps)
    pictures = check_images(variant, images)
    checked_strength = check_strength(pictures, strength, steps)
    checked_loras = check_loras(variant, loras)
    if gate is None:  # the folder as ``_model_folder`` gives it, to match a calibration's scope
        folder_given = None if model_path is None else str(Path(model_path).expanduser().resolve())
        gate = variant.default_gate(checked_loras, folder_given)
    if gate_numbers_given:
        try:
            check_gate(gate)
        except UnknownGateError as exc:
            raise RequestError(str(exc)) from None
    else:
        check_gate_for(variant, gate)
    try:
        check_fill(fill)
    except UnknownFillError as exc:
        raise RequestError(str(exc)) from None
    if threshold is None:
        default = variant.default_threshold_for(gate)
        threshold = default if default is not None else 0.0
    if not (0.0 <= float(threshold) <= 1.0):
        raise RequestError(f"threshold must be between 0 and 1, got {threshold}")
    if size is None:
        follows = pictures and not variant.family.fixed_size
        size = size_for_image(pictures[0]) if follows else variant.default_size
    width, height = size
    multiple = SIZE_MULTIPLE
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, int) or value <= 0:
            raise RequestError(f"{name} must be a positive whole number of pixels, got {value}")
        if value % multiple:
            raise RequestError(f"{name} must be a multiple of {multiple} pixels, got {value}")
        if value > MAX_SIDE:
            raise RequestError(f"{name} must be at most {MAX_SIDE} pixels, got {value}")
    if variant.family.fixed_size and (width, height) != variant.default_size:
        w, h = variant.default_size
        raise RequestError(
            f"{variant.id} draws {w} × {h} pixels only (it was trained at that size), "
            f"got {width} × {height}"
        )
    if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise RequestError(f"seed must be between {SEED_RANGE[0]} and {SEED_RANGE[1]}, got {seed}")
    if guidance is None:
        guidance = variant.default_guidance
    elif variant.default_guidance is None:
        raise RequestError(f"{variant.id} takes no guidance value; leave guidance out")
    else:
        low, high = GUIDANCE_RANGE
        if not (math.isfinite(float(guidance)) and low <= float(guidance) <= high):
            raise RequestError(f"guidance must be between {low:g} and {high:g}, got {guidance}")
        guidance = float(guidance)
    if quantize is not None and quantize not in QUANTIZE_LEVELS:
        levels = ", ".join(map(str, QUANTIZE_LEVELS))
        raise RequestError(f"quantize must be one of {levels} or none, got {quantize}")
    if model_path is None and variant.model_path is not None:
        model_path = variant.model_path
    folder = None if model_path is None else _model_folder(variant, model_path)
    stored = variant.stored_quantize
    if folder is not None and variant.model_path is None:
        from app.variants.folders import inspect_folder

        stored = inspect_folder(folder).quantize
    if stored is not None:
        if quantize not in (None, stored):
            raise RequestError(
                f"the model folder holds {stored}-bit weights (saved quantized); mflux loads "
                f"them at {stored} bits, so leave quantize out or set it to {stored}"
            )
        quantize = stored
    return GenerationRequest(
        variant_id=variant.id,
        prompt=prompt,
        seed=int(seed),
        steps=int(steps),
        threshold=float(threshold),
        width=int(width),
        height=int(height),
        guidance=guidance,
        quantize=quantize,
        compare_vanilla=compare_vanilla,
        resume=resume,
        loras=checked_loras,
        model_path=folder,
        previews=previews,
        gate=gate,
        fill=fill,
        images=pictures,
        strength=checked_strength,
    )


def _model_folder(variant: Variant, model_path: str | Path) -> str:
    """The folder as an absolute path; its files are checked when the model loads."""
    if variant.family.folders is None:
        shipped = " ships with the app and" if variant.family.weights_shipped else ""
        raise RequestError(f"{variant.id}{shipped} takes no model folder")
    folder = Path(model_path).expanduser()
    if not folder.is_dir():
        raise RequestError(f"the model folder {folder} does not exist or is not a folder")
    return str(folder.resolve())
