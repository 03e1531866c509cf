"""The one frozen object that crosses from the UI (or the command line) into the engine."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from app.variants import Variant, get_variant

MAX_SIDE = 2048
MAX_STEPS = 1000
# Guidance the families accept: 1 turns classifier-free guidance off (below 1 it would push away
# from the prompt), and the published recipes (FLUX.1 dev 3.5, Klein base and Z-Image 4,
# Qwen-Image 4, the demo 3) sit well inside 10, beyond which images saturate.
GUIDANCE_RANGE = (1.0, 10.0)


class RequestError(ValueError):
    """The request is invalid; the message is one clear sentence for the user."""


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
    gate: str = "teacache"  # "teacache" or "magcache" (app.gate.GATES)

    @property
    def variant(self) -> Variant:
        return get_variant(self.variant_id)

    def vanilla_key(self) -> tuple[object, ...]:
        """Everything a vanilla run depends on: moving only the threshold reuses it."""
        return (
            self.variant_id,
            self.prompt,
            self.seed,
            self.steps,
            self.width,
            self.height,
            self.guidance,
            self.quantize,
        )

    def with_threshold(self, threshold: float) -> GenerationRequest:
        return replace(self, threshold=threshold)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_steps(variant: Variant, steps: object) -> None:
    """Raises ``RequestError`` with one sentence where ``steps`` is outside the variant's range."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < variant.min_steps:
        raise RequestError(
            f"steps must be at least {variant.min_steps} for {variant.id}, got {steps}"
        )
    if steps > MAX_STEPS:
        raise RequestError(f"steps must be at most {MAX_STEPS}, got {steps}")


def check_gate_for(variant: Variant, gate: object) -> None:
    """Raises ``RequestError`` with one sentence where ``gate`` is unknown or uncalibrated."""
    from app.gate.gates import UnknownGateError, check_gate

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
    gate: str = "teacache",
) -> GenerationRequest:
    """Validate user input and fill defaults from the registry. Raises ``RequestError``."""
    from app.variants import UnknownVariantError

    try:
        variant = get_variant(variant_id)
    except UnknownVariantError as exc:
        raise RequestError(str(exc)) from None
    prompt = prompt.strip()
    if not prompt:
        raise RequestError("the prompt is empty; describe the image you want")
    if variant.embedded:
        from app.demo.prompt import PromptError, parse_prompt

        try:
            parse_prompt(prompt)
        except PromptError as exc:
            raise RequestError(str(exc)) from None
    steps = variant.default_steps if steps is None else steps
    check_steps(variant, steps)
    check_gate_for(variant, gate)
    if threshold is None:
        default = variant.default_threshold_for(gate)
        threshold = default if default is not None else 0.0
    if not (0.0 <= float(threshold) <= 1.0):
        raise RequestError(f"threshold must be between 0 and 1, got {threshold}")
    width, height = size if size is not None else variant.default_size
    multiple = 16  # VAE factor 8 × patch 2 (FLUX) or the demo's 16-pixel patches
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, int) or value <= 0:
            raise RequestError(f"{name} must be a positive whole number of pixels, got {value}")
        if value % multiple:
            raise RequestError(f"{name} must be a multiple of {multiple} pixels, got {value}")
        if value > MAX_SIDE:
            raise RequestError(f"{name} must be at most {MAX_SIDE} pixels, got {value}")
    if variant.embedded and (width, height) != variant.default_size:
        w, h = variant.default_size
        raise RequestError(
            f"{variant.id} draws {w} × {h} pixels only (it was trained at that size), "
            f"got {width} × {height}"
        )
    if seed < 0 or seed >= 2**32:
        raise RequestError(f"seed must be between 0 and {2**32 - 1}, got {seed}")
    if guidance is None:
        guidance = variant.default_guidance
    elif variant.default_guidance is None:
        raise RequestError(f"{variant.id} takes no guidance value; leave guidance out")
    else:
        low, high = GUIDANCE_RANGE
        if not (math.isfinite(float(guidance)) and low <= float(guidance) <= high):
            raise RequestError(f"guidance must be between {low:g} and {high:g}, got {guidance}")
        guidance = float(guidance)
    if quantize not in (None, 3, 4, 5, 6, 8):
        raise RequestError(f"quantize must be one of 3, 4, 5, 6, 8 or none, got {quantize}")
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
        gate=gate,
    )
