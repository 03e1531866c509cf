"""The inputs' observable state: ``FormModel`` holds what the next Generate asks for,
remembered per variant (and the threshold per gate) in the typed settings. The sidebar
(``app.ui.form_view``) binds its widgets to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from PySide6.QtCore import QObject, Signal

from app.engine.request import (
    GUIDANCE_RANGE,
    MAX_STEPS,
    GenerationRequest,
    LoraSpec,
    RequestError,
    check_steps,
    make_request,
)
from app.gate.fill import DEFAULT_FILL, FILLS
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.hardware import physical_memory_bytes
from app.storage.settings import Settings
from app.ui.defaults import (
    DEFAULT_PROMPT,
    default_threshold,
    size_allowed,
    size_presets,
)
from app.ui.observable import Prop
from app.ui.quantize_model import initial_quantize
from app.variants import DEFAULT_VARIANT, Variant, all_variants, get_variant


def ui_default_threshold(variant: Variant, gate: str = DEFAULT_GATE) -> float:
    """The slider's default (``app.ui.defaults.default_threshold``)."""
    return default_threshold(variant, gate)


def threshold_key(variant_id: str, gate: str) -> str:
    """Where a threshold is remembered: per variant, and per gate (their scales differ)."""
    return gate_kind(gate).threshold_key(variant_id)


_Value = TypeVar("_Value", int, float)


def _remember(
    table: dict[str, _Value], variant_id: str, value: _Value, default: _Value | None
) -> None:
    if value == default:
        table.pop(variant_id, None)
    else:
        table[variant_id] = value


class FormModel(QObject):
    """The generation inputs, remembered per variant in ``Settings``.

    Steps, size and guidance are per variant; a remembered value outside the variant's range (a
    size it cannot draw, fewer steps than it takes, guidance the request check refuses) is never
    applied to it: the variant's default is. ``variant_loaded`` fires once every input holds the
    new variant's values (``variant_id_changed`` fires first, with the others still stale)."""

    variant_loaded = Signal(object)
    request_applied = Signal(object)  # ``apply_request`` put a request in the inputs
    variant_id_changed = Signal(object)
    prompt_changed = Signal(object)
    steps_changed = Signal(object)
    seed_changed = Signal(object)
    threshold_changed = Signal(object)
    size_changed = Signal(object)
    guidance_changed = Signal(object)
    loras_changed = Signal(object)
    quantize_changed = Signal(object)
    gate_changed = Signal(object)
    fill_changed = Signal(object)

    variant_id = Prop(DEFAULT_VARIANT)
    prompt = Prop(DEFAULT_PROMPT)
    steps = Prop(28)
    seed = Prop(42)
    threshold = Prop(0.1)
    size = Prop[tuple[int, int]]((128, 128))
    guidance = Prop[float | None](None)
    loras = Prop[tuple[LoraSpec, ...]](())  # always () for the demo models (not mflux models)
    quantize = Prop[int | None](None)  # None: full precision (and every unquantizable variant)
    # The window asks for live step previews; a timing benchmark may turn them off (their cost
    # is charged to no step, but it is wall time).
    live_previews = True
    gate = Prop(DEFAULT_GATE)  # a gate kind's name (app.gate.kinds)
    fill = Prop(DEFAULT_FILL)  # what a skipped step adds, whichever gate skips (app.gate.fill)
    # Why the gate is the first-block probe where TeaCache has no calibration for this model (a
    # variant without one, a model folder, LoRAs), in one line; "" where that is not the case.
    gate_note = Prop("")
    gate_note_changed = Signal(object)

    def __init__(
        self,
        settings: Settings,
        parent: QObject | None = None,
        *,
        memory_bytes: int | Literal["probe"] | None = "probe",
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        # This machine's memory, for the quantization default and the memory banner.
        self.memory_bytes = physical_memory_bytes() if memory_bytes == "probe" else memory_bytes
        variant_id = (
            settings.last_variant if settings.last_variant in all_variants() else DEFAULT_VARIANT
        )
        self.prompt = settings.last_prompt or DEFAULT_PROMPT
        self.seed = settings.seed
        self.gate = settings.last_gate  # kept where the variant has its calibration
        # The form moved to a calibration-free gate because the model that runs is not the one
        # the chosen gate was calibrated on; it moves back when that changes (``_fit_gate``).
        self._moved_gate: str | None = None
        # The picture to start from and its strength, as ``make_request``'s keywords (the input
        # panel's ``InputModel.request_inputs``; none until one is connected).
        self.picture_inputs: Callable[[], dict[str, Any]] = dict
        self._load_variant(variant_id)
        self.loras_changed.connect(lambda _loras: self._fit_gate())

    @property
    def variant(self) -> Variant:
        return get_variant(self.variant_id)

    def select_variant(self, variant_id: str) -> None:
        if variant_id == self.variant_id or variant_id not in all_variants():
            return
        self.remember()
        self._load_variant(variant_id)

    def reset_threshold(self) -> None:
        self.threshold = ui_default_threshold(self.variant, self.gate)

    def select_gate(self, gate: str) -> None:
        """Switch the gate; the threshold becomes the one remembered for it (their scales
        differ). A gate the variant has no calibration for is refused (the picker disables it)."""
        if gate == self.gate or self.variant.gate_unavailable_reason(gate) is not None:
            return
        self.remember()
        self._moved_gate = None  # the user's own pick
        self.gate = gate
        self.threshold = self._remembered_threshold(self.variant)
        self._refresh_gate_note()

    def select_fill(self, fill: str) -> None:
        """What a skipped step adds from now on, for this variant (remembered per variant)."""
        if fill in FILLS:
            self.fill = fill

    def _fit_gate(self) -> None:
        """Open on the first-block probe where the chosen gate's calibration was not measured on
        the model that runs (``Variant.uncalibrated_reason``: no TeaCache numbers, a model folder,
        LoRAs), and go back to the gate it replaced once it is again (the user can always pick
        another gate; that pick stays)."""
        variant = self.variant
        reason = variant.uncalibrated_reason(self.loras)
        target = self.gate
        if reason is not None and not gate_kind(self.gate).calibration_free:
            target, self._moved_gate = variant.default_gate(self.loras), self.gate
        elif reason is None and self._moved_gate is not None:
            if variant.gate_unavailable_reason(self._moved_gate) is None:
                target = self._moved_gate
            self._moved_gate = None
        if target != self.gate:
            self.remember()
            self.gate = target
            self.threshold = self._remembered_threshold(variant)
        self._refresh_gate_note()

    def _refresh_gate_note(self) -> None:
        reason = self.variant.uncalibrated_reason(self.loras)
        self.gate_note = reason if reason and gate_kind(self.gate).calibration_free else ""

    def _remembered_threshold(self, variant: Variant) -> float:
        key = threshold_key(variant.id, self.gate)
        return self.settings.thresholds.get(key, ui_default_threshold(variant, self.gate))

    def remember(self) -> None:
        """Write the current inputs into the settings object (saved by the window).

        Threshold, steps and guidance are kept only where they differ from the variant's
        defaults, so a recalibrated default (a new threshold, a new guidance) reaches everyone
        who never chose their own value."""
        s, vid, variant = self.settings, self.variant_id, self.variant
        s.last_variant = vid
        s.last_gate = self.gate
        if self.fill == DEFAULT_FILL:
            s.fills.pop(vid, None)
        else:
            s.fills[vid] = self.fill
        _remember(
            s.thresholds,
            threshold_key(vid, self.gate),
            round(float(self.threshold), 6),
            ui_default_threshold(variant, self.gate),
        )
        _remember(s.steps, vid, int(self.steps), variant.default_steps)
        if size_allowed(variant, self.size):
            s.sizes[vid] = [int(self.size[0]), int(self.size[1])]
        else:
            s.sizes.pop(vid, None)
        if self.guidance is not None:
            _remember(s.guidance, vid, float(self.guidance), variant.default_guidance)
        if self.loras and variant.family.supports_lora:
            s.loras[vid] = [[lora.path, lora.scale] for lora in self.loras]
        else:
            s.loras.pop(vid, None)
        default = initial_quantize(variant, self.size, self.memory_bytes)
        fixed = not variant.family.quantizable or variant.stored_quantize is not None
        if fixed or self.quantize == default:
            s.quantize.pop(vid, None)
        else:
            s.quantize[vid] = 0 if self.quantize is None else int(self.quantize)
        s.seed = int(self.seed)
        s.last_prompt = self.prompt

    def steps_problem(self) -> str | None:
        """The request check's sentence where the steps are outside the variant's range."""
        try:
            check_steps(self.variant, int(self.steps))
        except RequestError as exc:
            return str(exc)[:1].upper() + str(exc)[1:] + "."
        return None

    def request(self) -> GenerationRequest:
        """Raises ``RequestError`` with a user-facing sentence."""
        return make_request(
            self.variant_id,
            self.prompt,
            seed=int(self.seed),
            steps=int(self.steps),
            threshold=float(self.threshold),
            size=(int(self.size[0]), int(self.size[1])),
            guidance=self.guidance,
            loras=self.loras,
            quantize=self.quantize if self.variant.family.quantizable else None,
            previews=self.live_previews,
            gate=self.gate,
            fill=self.fill,
            **self.picture_inputs(),
        )

    def apply_request(self, request: GenerationRequest) -> None:
        """Fill the inputs from a request (reopening a run from the history)."""
        if request.variant_id != self.variant_id:
            self.remember()
            self._load_variant(request.variant_id)
        self.prompt = request.prompt
        self.seed = request.seed
        self.steps = request.steps
        self._moved_gate = None
        self.gate = request.gate
        self.fill = request.fill
        self.threshold = request.threshold
        self.size = (request.width, request.height)
        if self.variant.default_guidance is not None:
            self.guidance = request.guidance
        self.loras = request.loras
        self.quantize = request.quantize
        self._refresh_gate_note()
        self.request_applied.emit(request)

    def _load_variant(self, variant_id: str) -> None:
        variant = get_variant(variant_id)
        s = self.settings
        steps = s.steps.get(variant_id, variant.default_steps)
        if not variant.min_steps <= steps <= MAX_STEPS:
            steps = variant.default_steps
        stored = s.sizes.get(variant_id)
        size = (
            (int(stored[0]), int(stored[1]))
            if stored and size_allowed(variant, stored)
            else size_presets(variant)[0]
        )
        guidance = None
        if variant.default_guidance is not None:
            guidance = s.guidance.get(variant_id, variant.default_guidance)
            low, high = GUIDANCE_RANGE
            if not low <= guidance <= high:
                guidance = variant.default_guidance
        stored_loras = s.loras.get(variant_id, []) if variant.family.supports_lora else []
        loras = tuple(LoraSpec(str(path), float(scale)) for path, scale in stored_loras)  # type: ignore[arg-type]
        self.variant_id = variant_id
        self.steps = steps
        self.fill = s.fills.get(variant_id, DEFAULT_FILL)
        if self._moved_gate is not None and variant.uncalibrated_reason(loras) is None:
            if variant.gate_unavailable_reason(self._moved_gate) is None:
                self.gate = self._moved_gate  # back to what the last model moved away from
            self._moved_gate = None
        if variant.gate_unavailable_reason(self.gate) is not None:
            self.gate = variant.default_gate(loras)  # the variant's own default
        elif variant.uncalibrated_reason(loras) and not gate_kind(self.gate).calibration_free:
            self._moved_gate, self.gate = self.gate, variant.default_gate(loras)
        self.threshold = self._remembered_threshold(variant)
        self.size = size
        self.guidance = guidance
        self.loras = loras
        self._refresh_gate_note()
        self.quantize = initial_quantize(variant, size, self.memory_bytes)
        stored_choice = s.quantize.get(variant_id)
        chooses = variant.family.quantizable and variant.stored_quantize is None
        if stored_choice is not None and chooses:
            self.quantize = stored_choice or None  # 0: full precision
        self.variant_loaded.emit(variant_id)
