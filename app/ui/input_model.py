"""The picture a run starts from (image-to-image), its state and actions: ``InputModel`` holds
the picture (checked and hashed as the request checks it) and the strength, says whether the
picked model can start from a picture at all (``Family.img2img``) and what strength leaves the
gate, and hands the form's request its picture (``FormModel.picture_inputs``). The sidebar's
input panel (``app.ui.input_view``) binds to it; a picture dropped anywhere on the window comes
here too.

The size follows a chosen picture (mflux's rule, ``app.engine.request.size_for_image``) unless
the model draws one size only; a size set afterwards stays. A picture is kept when another model
is picked; where that model cannot start from one it is not used, and the panel says so. Edit
models will take more than one picture: the request already carries a tuple.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.engine.request import (
    DEFAULT_STRENGTH,
    GenerationRequest,
    InputImage,
    RequestError,
    check_image_file,
    size_for_image,
)
from app.paths import DEMO_SKETCH
from app.ui.observable import Prop
from app.variants.schedule import steps_left_out

if TYPE_CHECKING:
    from app.ui.form_model import FormModel

# The slider's steps: strength in hundredths, from 0.01 to 1.
STRENGTH_STEPS = 100


class InputModel(QObject):
    """The picture to start from and its strength; ``message`` says why the last file chosen was
    refused (one sentence), ``unused`` why the picture is not used by the picked model."""

    picture_changed = Signal(object)
    strength_changed = Signal(object)
    offered_changed = Signal(object)
    message_changed = Signal(object)
    unused_changed = Signal(object)
    note_changed = Signal(object)

    picture = Prop[InputImage | None](None)
    strength = Prop(DEFAULT_STRENGTH)
    offered = Prop(True)  # the picked model can start from a picture
    message = Prop("")
    unused = Prop("")
    note = Prop("")  # what the strength leaves the gate at the form's steps (``steps_note``)

    def __init__(self, form: FormModel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.form = form
        form.picture_inputs = self.request_inputs
        form.variant_loaded.connect(lambda _variant: self._refresh_offer())
        form.request_applied.connect(self.show_request)
        self.picture_changed.connect(lambda _picture: self._refresh_offer())
        for signal in (self.picture_changed, self.strength_changed, self.offered_changed):
            signal.connect(lambda _value: self._refresh_note())
        form.steps_changed.connect(lambda _steps: self._refresh_note())
        self._refresh_offer()
        self._refresh_note()

    # -- actions ------------------------------------------------------------------------------
    def choose(self, path: str | Path) -> bool:
        """Start from the picture at ``path``; False with ``message`` saying why not."""
        try:
            picture = check_image_file(path)
        except RequestError as exc:
            self.message = str(exc)[:1].upper() + str(exc)[1:] + "."
            return False
        self.message = ""
        self.picture = picture
        variant = self.form.variant
        if self.offered and not variant.family.fixed_size:
            self.form.size = size_for_image(picture)
        return True

    def use_sample(self) -> bool:
        """Start from the sketch that ships with the app (the demo's own world)."""
        return self.choose(DEMO_SKETCH)

    def clear(self) -> None:
        self.picture = None
        self.message = ""

    def set_strength(self, value: float) -> None:
        self.strength = min(1.0, max(1.0 / STRENGTH_STEPS, round(float(value), 2)))

    def show_request(self, request: GenerationRequest) -> None:
        """A request put back in the inputs (a run reopened from the history): its picture, or
        none."""
        self.message = ""
        self.picture = request.images[0] if request.images else None
        if request.strength is not None:
            self.strength = request.strength

    # -- what the request and the panel read -------------------------------------------------
    def request_inputs(self) -> dict[str, Any]:
        """The request's picture and strength (``make_request``'s keywords); none where there is
        no picture or the picked model cannot start from one."""
        if self.picture is None or not self.offered:
            return {}
        return {"images": (self.picture.path,), "strength": float(self.strength)}

    def label(self) -> str:
        """The picture's name and size ("sketch.png · 128 × 128"), or "" without one."""
        picture = self.picture
        return "" if picture is None else f"{picture.name} · {picture.width} × {picture.height}"

    def steps_note(self) -> str:
        """What the strength leaves the gate at the form's steps, in one line."""
        if self.picture is None or not self.offered:
            return ""
        steps = int(self.form.steps)
        left_out = steps_left_out(steps, float(self.strength))
        if left_out <= 0:
            return (
                f"Strength 1: all {steps} steps run, from noise (the picture sets only the size)."
            )
        return (
            f"Strength {float(self.strength):.2f}: the first {left_out} of {steps} steps never "
            f"run; the gate decides among the last {steps - left_out}."
        )

    def _refresh_note(self) -> None:
        self.note = self.steps_note()

    def _refresh_offer(self) -> None:
        family = self.form.variant.family
        self.offered = family.img2img
        self.unused = (
            f"{family.display_name} cannot start from a picture (mflux has no image-to-image "
            "path for it): the picture is kept for another model."
            if self.picture is not None and not family.img2img
            else ""
        )
