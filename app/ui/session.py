"""What the window's run does: generate, cancel, reopen a saved run, and the inputs around them
(the model picked, a threshold-only re-run, a calibration adopted, recent prompts, settings saved,
closing).

The model half of krita-ai-diffusion's model/ui split: ``MainWindow`` builds widgets, binds them to
``FormModel``/``RunModel`` properties and connects signals to these methods
(``generate_button.clicked.connect(session.generate)``). The session imports no Qt: it reaches the
engine thread through the run's ``JobSlot`` (``app.ui.job_slot``: ``EngineHost`` in the app, a
plain fake in tests), and the view-models only through their attributes and methods. The window's
other actions are their own Qt-free models, built beside it in ``app.ui.app``: exports
(``export_model``), availability and downloads (``availability_model``), the banners and their
fixes (``notices_model``), the gate advice (``gate_advice_model``), model folders
(``model_folders_model``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.engine.calibration import Calibrate
from app.engine.jobs import Generate, Job
from app.engine.request import RequestError
from app.engine.target import QualitySearch
from app.storage.export import lora_captions
from app.storage.history import HistoryEntry, friendly_time, history_origin
from app.storage.settings import Settings, SettingsStore
from app.ui.defaults import MAX_SEED, MIN_SEED

if TYPE_CHECKING:
    from app.ui.availability_model import Availability
    from app.ui.form_model import FormModel
    from app.ui.quality_model import QualityModel
    from app.ui.run_model import RunModel

log = logging.getLogger(__name__)
OPEN_TITLE = "Cannot open the saved run"


class Session:
    """The run's actions and the inputs around them. Qt-free; see the module docstring.
    ``run_starting`` listeners hear a new run just before it begins, ``variant_selected`` ones
    that another model is picked (``Studio.build`` connects the banners' ``Notices``)."""

    def __init__(
        self,
        form: FormModel,
        run: RunModel,
        availability: Availability,
        *,
        settings: Settings,
        settings_store: SettingsStore,
        started: Callable[[int], None] | None = None,
        quality: QualityModel | None = None,
    ) -> None:
        self.form = form
        self.run = run
        self.availability = availability
        self.engine = run.slot.engine  # the engine thread, busy with any job (a comparison too)
        self.settings = settings
        self.settings_store = settings_store
        self.started = started  # told the id of each run it starts (the window signals it)
        self.quality = quality  # target-quality mode (``app.ui.quality_model``)
        self.run_starting: list[Callable[[], None]] = []
        self.variant_selected: list[Callable[[], None]] = []
        self._shut_down = False
        self._stopped = False

    @property
    def busy(self) -> bool:
        """A job on the engine thread, or the run still winding down: the inputs' model stays."""
        return self.engine.busy or self.run.busy

    # -- runs --------------------------------------------------------------------------------------
    def generate(self) -> int | None:
        """Start a run from the inputs; returns its id, or None if nothing was started."""
        if self.engine.busy or self._shut_down:
            return None
        try:
            request = self.form.request()
        except RequestError as exc:
            self.run.fail_locally(str(exc))
            return None
        if not self.availability.is_available(request.variant_id):
            self.run.error = self.availability.not_downloaded_notice(request.variant_id)
            return None
        # Resume the gated pass from the cached vanilla trajectory only for a re-run of the same
        # vanilla (a threshold change): a first run times both passes in full, so its speedup is
        # measured, not an estimate over replayed steps.
        previous = self.run.request
        same_vanilla = previous is not None and previous.vanilla_key() == request.vanilla_key()
        request = replace(request, resume=same_vanilla)
        target = self.quality.target() if self.quality is not None else None
        # With a quality target, search from the slider's threshold for it.
        job: Job = Generate(request) if target is None else QualitySearch(request, target)
        run_id = self.run.slot.submit(job)
        if run_id is None:
            return None
        self.remember_inputs(request.prompt)
        for listener in list(self.run_starting):
            listener()
        self.run.begin(run_id, request)
        if target is not None and self.quality is not None:
            self.quality.begin(run_id)
        if self.started is not None:
            self.started(run_id)
        return run_id

    def apply_target_result(self, event: object) -> None:
        """A target search finished: its result is the chosen threshold's run, so the slider
        moves there and the run's request becomes that threshold's (the result then matches the
        inputs). Called before the run model shows the same event's report
        (``app.ui.event_router``)."""
        from app.engine.events import RunFinished

        if not isinstance(event, RunFinished) or event.run_id != self.run.run_id:
            return
        search = event.report.target_search
        if search is None:
            return
        self.run.request = event.report.request
        self.form.threshold = search.chosen_threshold

    def select_variant(self, variant_id: str) -> bool:
        """Change the model. Refused while a run is going (its result belongs to the selection
        that made it); the banners of the old selection go."""
        if self.busy:
            return False
        if variant_id == self.form.variant_id:
            return True
        self.form.select_variant(variant_id)
        if self.form.variant_id != variant_id:
            return False
        if self.run.error is not None:
            self.run.error = None  # "not downloaded", "cannot generate": about the old selection
        self.run.notices = ()
        for listener in list(self.variant_selected):
            listener()
        return True

    def result_caption(self) -> str:
        """Empty while the shown result matches the inputs (or a run is going); else what made
        the shown result, e.g. "previous run: demo-turbo, 4 steps, threshold 0.3"."""
        r = self.run
        request = r.request
        if request is None or r.busy or (r.gated_image is None and not r.gated_steps):
            return ""
        try:
            current = self.form.request()
        except RequestError:
            current = None
        # How the result was reached (resumed from a cached vanilla, drawn live step by step)
        # changes none of its figures: a reopened run whose settings match is not stale.
        how = {"resume": request.resume, "previews": request.previews}
        if current is not None and replace(current, **how) == request:
            return ""
        what = "run from history" if r.run_id < 0 else "previous run"
        parts = [request.variant_id, f"{request.steps} steps", f"threshold {request.threshold:g}"]
        if current is not None and current.variant_id == request.variant_id:
            if current.width != request.width or current.height != request.height:
                parts.append(f"{request.width} × {request.height}")
            if current.seed != request.seed:
                parts.append(f"seed {request.seed}")
            if current.prompt != request.prompt:
                parts.append("another prompt")
            if (current.images, current.strength) != (request.images, request.strength):
                parts.append(
                    f"from {request.images[0].name} at strength {request.strength:g}"
                    if request.images and request.strength is not None
                    else "from noise"
                )
        current_loras = current.loras if current is not None else ()
        if (request.loras or current_loras) and current_loras != request.loras:
            parts += lora_captions(request.loras) or ["no LoRA"]
        return f"{what}: " + ", ".join(parts)

    def cancel(self) -> bool:
        if not self.engine.cancel():
            return False
        self.run.mark_cancelling()
        return True

    def randomize_seed(self) -> None:
        self.form.seed = random.randint(MIN_SEED, MAX_SEED)

    def threshold_only_change(self) -> bool:
        """The inputs differ from the finished run's only in the threshold (a cheap re-run)."""
        request = self.run.request
        if request is None or self.engine.busy or not self.run.finished:
            return False
        try:
            new = self.form.request()
        except RequestError:
            return False
        return new.vanilla_key() == request.vanilla_key() and new.threshold != request.threshold

    def wants_threshold_rerun(self) -> bool:
        return self.settings.rerun_on_threshold_change and self.threshold_only_change()

    def rerun_threshold(self) -> int | None:
        return self.generate() if self.threshold_only_change() else None

    def set_rerun_on_threshold_change(self, enabled: bool) -> None:
        self.settings.rerun_on_threshold_change = enabled
        self.save_settings()

    def set_details_expanded(self, expanded: bool) -> None:
        self.settings.details_expanded = expanded
        self.save_settings()

    # -- the history -------------------------------------------------------------------------------
    def open_entry(self, entry: HistoryEntry) -> bool:
        """Show a saved run (inputs and results). Refused while a run is going."""
        if self.engine.busy:
            self.run.fail_locally(
                "wait for the current run to finish before opening another", title=OPEN_TITLE
            )
            return False
        try:
            report = entry.report
        except (OSError, ValueError) as exc:
            self.run.fail_locally(f"could not read the saved run: {exc}", title=OPEN_TITLE)
            return False
        request = entry.to_request()
        if request is not None:
            self.form.apply_request(request)
        self.run.show(
            report,
            history_origin(entry.created),
            saved_entry=str(entry.folder),
            phase=f"Opened from history · {friendly_time(entry.created)}",
        )
        return True

    # -- prompts and settings ----------------------------------------------------------------------
    @property
    def recent_prompts(self) -> list[str]:
        return list(self.settings.prompt_history)

    def use_prompt(self, prompt: str) -> None:
        self.form.prompt = prompt

    def remember_inputs(self, prompt: str) -> None:
        """A job started from the inputs (a run, a comparison): its prompt leads the recent ones,
        and the inputs are saved."""
        self.settings.remember_prompt(prompt)
        self.form.remember()
        self.save_settings()

    def clear_recent_prompts(self) -> None:
        self.settings.prompt_history = []
        self.save_settings()

    def save_settings(self) -> None:
        try:
            self.settings_store.save(self.settings)
        except OSError as exc:
            log.warning("could not save settings: %s", exc)

    def persist_inputs(self) -> None:
        """Write the inputs to the settings file now (closing saves them before it waits)."""
        self.form.remember()
        self.save_settings()

    def begin_close(self) -> bool:
        """Closing during a run: save the inputs, cancel the run (it stops after the current
        step; a finished run is saved before it is reported, so nothing saved is lost) and accept
        no new run. True if the engine is still busy, so the caller must wait for it."""
        self.persist_inputs()
        self._shut_down = True  # no Generate from here on
        if not self.engine.busy:
            return False
        self.engine.cancel()
        if self.run.busy:
            self.run.mark_cancelling()
        return True

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Persist the inputs, stop downloads and the engine thread (bounded)."""
        if self._shut_down and self._stopped:
            return True
        self._shut_down = self._stopped = True
        self.persist_inputs()
        self.availability.shutdown()
        return self.engine.shutdown(timeout_ms)

    # -- calibrations ------------------------------------------------------------------------------
    def adopt_calibration(self, variant_id: str, job: Calibrate) -> bool:
        """A calibration was just saved (``app.ui.calibrate_model``): select it with the inputs
        it was measured with (steps, size, seed, guidance, quantization, LoRA set; the prompt
        stays), its first calibrated gate at its own default threshold, and remember them."""
        r = job.request
        if not self.select_variant(variant_id):
            return False
        f = self.form
        f.steps, f.seed, f.size = r.steps, r.seed, (r.width, r.height)
        if r.guidance is not None:
            f.guidance = r.guidance
        f.loras, f.quantize = r.loras, r.quantize
        f.select_gate(job.gates[0])
        f.reset_threshold()
        self.persist_inputs()
        return True
