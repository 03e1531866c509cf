"""Calibrate This Model…: what the dialog's buttons do and the state it shows. Qt-free.

``ModelCalibrator`` builds one frozen ``Calibrate`` job (``app.engine.calibration``) from the
form's model and settings (its variant — a user calibration's base —, model folder, steps, size,
seed, guidance, quantization and LoRA set) and the user's prompts and name, refuses bad input in
one sentence before anything runs, and hands the job to the engine thread like a Generate. The
engine runs one vanilla pass per prompt; the progress follows the steps (with the time left),
Cancel stops after the current step and writes nothing. When the job has written the calibration,
``saved`` listeners (the window's picker) hear its id, and then ``adopt`` selects it
(``Session.adopt_calibration``, connected in ``Studio.build``). The fit is put in plain words
here; its figures are the Details.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.engine.calibration import (
    Calibrate,
    CalibrationResult,
    check_calibration,
    default_prompts,
    free_name,
    parse_prompts,
)
from app.engine.events import (
    CalibrationFinished,
    CalibrationProgress,
    CalibrationTrials,
    LoadProgress,
    ModelReady,
    Pass,
    PassStarted,
    RunCancelled,
    RunFailed,
    StepDone,
)
from app.engine.request import GenerationRequest, RequestError
from app.engine.threshold_rule import RULE_WORDS, TrialSpec
from app.errors import UserFacingError
from app.gate.kinds import gate_kind, magcache_from_document
from app.hardware import hardware_label
from app.ui.job_slot import EngineLink, JobSlot, JobStatus
from app.variants import Variant, get_variant
from app.variants.catalog import quantize_label
from app.variants.user import calibration_base, user_variant_id

if TYPE_CHECKING:
    from app.ui.availability_model import Availability
    from app.ui.form_model import FormModel

# The time left is shown once this many steps have been timed (the first step after a load can
# carry one-time costs).
STEPS_BEFORE_ESTIMATE = 2


class ModelCalibrator:
    """See the module docstring. ``listeners`` are called after every change of state; ``saved``
    listeners with the new variant's id once the calibration is written (before ``adopt``
    selects it, so a picker can list it first). It reads the inputs (``form``) and whether the
    model is on disk (``availability``)."""

    def __init__(
        self,
        form: FormModel,
        availability: Availability,
        engine: EngineLink,
        *,
        adopt: Callable[[str, Calibrate], object],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.form = form
        self.availability = availability
        self.adopt = adopt
        self.slot = JobSlot(engine)  # the calibration's run on the engine thread
        self.clock = clock
        self.listeners: list[Callable[[], None]] = []
        self.saved: list[Callable[[str], None]] = []
        self.job: Calibrate | None = None
        self.result: CalibrationResult | None = None
        self.message = ""  # why nothing started, why it stopped, or what is loading
        self.prompts_done = 0
        self.steps_done = 0  # vanilla steps of the current prompt
        self.current: int | None = None  # the prompt being measured (its index)
        # Choosing the default thresholds (after the prompts): the passes done, the one running.
        self.choosing = False
        self.trials_done = 0
        self.trying: TrialSpec | None = None
        self._pending: list[int] = []
        self._started_at: float | None = None  # the first timed step's start
        self._timed_steps = 0
        self._finished_at: float | None = None

    @property
    def status(self) -> JobStatus:
        return self.slot.status

    @status.setter
    def status(self, value: JobStatus) -> None:
        self.slot.status = value

    @property
    def run_id(self) -> int | None:
        return self.slot.run_id

    # -- what the dialog offers --------------------------------------------------------------------
    def base_variant(self) -> Variant:
        """The variant a calibration from the form measures: a user calibration's base."""
        return get_variant(calibration_base(self.form.variant_id))

    def suggested_prompts(self) -> str:
        return "\n".join(default_prompts(self.base_variant()))

    def suggested_name(self) -> str:
        return free_name(self.base_variant().id)

    def saved_as_text(self, name: str) -> str:
        """The line under the name: the id the calibration will be saved as, or, for a name
        that cannot be one (a space, a capital), why, before anything is started."""
        name = name.strip()
        if not name:
            return ""
        try:
            return f"Will be saved as {user_variant_id(self.base_variant().id, name)}"
        except ValueError as exc:
            return _sentence(str(exc))

    def target_text(self) -> str:
        """What will be measured, from the form: the model and its settings, in one line."""
        f = self.form
        variant = self.base_variant()
        width, height = f.size
        parts = [variant.display_name, f"{int(f.steps)} steps", f"{width} × {height}"]
        parts.append(f"seed {int(f.seed)}")
        if f.guidance is not None:
            parts.append(f"guidance {float(f.guidance):g}")
        if variant.family.quantizable:
            parts.append(quantize_label(f.quantize))
        return " · ".join(parts)

    def scope_text(self) -> str:
        """What the calibration will be for beyond the model: its LoRA set and its folder."""
        f, variant = self.form, self.base_variant()
        lines = []
        if f.loras:
            names = ", ".join(lora.label() for lora in f.loras)
            lines.append(f"With LoRA {names}: the calibration is for this LoRA set only.")
        if variant.model_path is not None:
            lines.append(f"On the model folder {variant.model_path}.")
        return " ".join(lines)

    # -- actions -----------------------------------------------------------------------------------
    def start(self, prompts_text: str, name: str) -> int | None:
        """Start a calibration of the form's model with these prompts (one per line) saved as
        ``name``; returns the run id, or None with ``message`` saying why in one sentence."""
        if self.slot.engine.busy or self.status.busy:
            return self._refuse("Wait for the current run to finish.")
        try:
            request = self._request()
        except RequestError as exc:
            return self._refuse(_sentence(str(exc)))
        if not self.availability.is_available(request.variant_id):
            variant = get_variant(request.variant_id)
            return self._refuse(
                f"{variant.display_name} is not on this machine: download it first "
                f"({self.availability.download_label(variant)}), then calibrate."
            )
        job = Calibrate(request, name.strip(), parse_prompts(prompts_text))
        try:
            check_calibration(job)
        except UserFacingError as exc:
            return self._refuse(_sentence(str(exc)))
        run_id = self.slot.submit(job)
        if run_id is None:
            return self._refuse("Wait for the current run to finish.")
        self.job, self.result = job, None
        self.status = JobStatus.running
        self.message = ""
        self.prompts_done = self.steps_done = self._timed_steps = 0
        self.current = None
        self.choosing, self.trials_done, self.trying = False, 0, None
        self._pending = job.pending()
        self._started_at = self._finished_at = None
        self._changed()
        return run_id

    def cancel(self) -> bool:
        if self.status is not JobStatus.running or not self.slot.cancel():
            return False
        self._changed()
        return True

    def forget_last_run(self) -> None:
        """Back to idle after a run that ended (finished, cancelled or failed): a dialog opened
        again starts fresh instead of showing that run's progress and outcome as if current. The
        saved calibration stays in the picker. Nothing changes while a run goes on."""
        if self.status.busy:
            return
        self.status = JobStatus.idle
        self.slot.run_id = self.job = self.result = None
        self.message = ""
        self.prompts_done = self.steps_done = self._timed_steps = 0
        self.current = None
        self.choosing, self.trials_done, self.trying = False, 0, None
        self._pending = []
        self._started_at = self._finished_at = None
        self._changed()

    def _request(self) -> GenerationRequest:
        request = self.form.request()
        # A calibration measures whole schedules from noise, whatever picture the inputs hold.
        return replace(
            request, variant_id=calibration_base(request.variant_id), images=(), strength=None
        )

    def _refuse(self, message: str) -> None:
        self.message = message
        if not self.status.busy:
            self.status = JobStatus.idle
        self._changed()
        return None

    # -- engine events -----------------------------------------------------------------------------
    def owns(self, event: object) -> bool:
        """The event belongs to the calibration going on (a model's load has no run id)."""
        return self.slot.owns(event)

    def handle_event(self, event: object) -> None:
        if not self.owns(event):
            return
        match event:
            case LoadProgress():
                self.message = _sentence(event.message)
            case ModelReady():
                self.message = ""
            case CalibrationTrials():
                self.choosing = True
                self.trials_done = event.done
                self.trying = event.trying or self.trying
                self.message = ""
            case PassStarted() | StepDone() if self.choosing:
                return  # a threshold trial's pass: the line follows the trials
            case PassStarted(which=Pass.vanilla):
                remaining = self._remaining()
                self.current = remaining[0] if remaining else None
                self.steps_done = 0
                self.message = ""
            case StepDone(which=Pass.vanilla):
                self.steps_done += 1
                now = self.clock()
                if self._started_at is None:
                    self._started_at = now - event.step.seconds
                self._timed_steps += 1
            case CalibrationProgress():
                self.prompts_done += 1
                self.steps_done = 0
            case CalibrationFinished():
                self._finished_at = self.clock()
                self.result = event.result
                self.status = JobStatus.finished
                self.message = ""
                for listener in list(self.saved):  # the picker lists it first...
                    listener(event.result.variant_id)
                self.adopt(event.result.variant_id, event.result.job)
            case RunCancelled():
                self.status = JobStatus.cancelled
                self.message = "Cancelled: nothing was saved."
            case RunFailed():
                self.status = JobStatus.failed
                self.message = _sentence(event.message) + " Nothing was saved."
            case _:
                return
        self._changed()

    def _remaining(self) -> list[int]:
        return self._pending[self.prompts_done :]

    # -- progress ----------------------------------------------------------------------------------
    @property
    def total_prompts(self) -> int:
        return len(self._pending)

    def progress(self) -> float:
        """0–1 over the prompts to measure, by steps; -1 (indeterminate) before the first step
        and while the thresholds are chosen (how many passes that takes is known at its end)."""
        if self.job is None or not self._pending:
            return 0.0
        if self.status is JobStatus.finished:
            return 1.0
        if self.choosing and self.status.busy:
            return -1.0
        steps = self.job.request.steps
        done = self.prompts_done + min(self.steps_done, steps) / steps
        if done <= 0 and self.status.busy:
            return -1.0
        return done / len(self._pending)

    def seconds_left(self) -> float | None:
        """The time left for the prompts at the pace so far (None until
        ``STEPS_BEFORE_ESTIMATE`` steps are timed, and while the thresholds are chosen):
        elapsed × what is left / what is done, by the same measure as ``progress``, so a
        prompt's untimed share (its decode, the replayed pass) is in the pace too."""
        fraction = self.progress()
        if (
            not self.status.busy
            or self._started_at is None
            or self._timed_steps < STEPS_BEFORE_ESTIMATE
            or fraction <= 0
        ):
            return None
        elapsed = self.clock() - self._started_at
        return elapsed * (1.0 - fraction) / fraction

    def progress_text(self) -> str:
        """ "Prompt 2 of 6 · about 40 s left for the prompts", "Loading FLUX.1 dev…", "Choosing
        thresholds…", or the end's sentence."""
        if self.status is JobStatus.finished and self.result is not None:
            trials = (
                f" and {self.trials_done} trial passes chose the thresholds"
                if self.trials_done
                else ""
            )
            return f"Done: {self.total_prompts} prompts measured{trials} in {self._took()}."
        if not self.status.busy:
            return self.message
        if self.status is JobStatus.cancelling:
            return "Cancelling after this step…"
        if self.message:
            return self.message
        if self.choosing:
            return self._choosing_text()
        number = min(self.prompts_done + 1, self.total_prompts)
        text = f"Prompt {number} of {self.total_prompts}"
        left = self.seconds_left()
        if left is not None:
            text += f" · about {format_duration(left)} left"
            if self.job is not None and self.job.chooses_thresholds():
                text += " for the prompts"  # the threshold trials follow; their count is not known
        return text

    def _choosing_text(self) -> str:
        """ "Choosing thresholds: TeaCache at 0.08, prompt 3 of 5 (12 passes done)"."""
        text = "Choosing thresholds on your prompts"
        trying = self.trying
        if trying is not None:
            text += (
                f": {gate_kind(trying.gate).label} at {trying.threshold:g}, prompt "
                f"{trying.prompt + 1} of {len(self.job.prompts) if self.job else 0}"
            )
        done = self.trials_done
        return text + f" ({done} pass{'es' if done != 1 else ''} done)"

    def _took(self) -> str:
        if self._started_at is None or self._finished_at is None:
            return "no time (every prompt was measured before)"
        return format_duration(self._finished_at - self._started_at)

    # -- the result in words -----------------------------------------------------------------------
    def result_lines(self) -> list[str]:
        """The fit in plain words (``docs/ui-strings.md``): how well TeaCache's formula follows
        the model and the changes it knows, MagCache's table, and what was saved."""
        result = self.result
        if result is None:
            return []
        return fit_words(result, get_variant(result.job.request.variant_id))

    def details_lines(self) -> list[str]:
        """The figures and the provenance, for Details."""
        return [] if self.result is None else detail_words(self.result)

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()


def fit_words(result: CalibrationResult, base: Variant) -> list[str]:
    lines: list[str] = []
    document = result.document
    fit = result.fit
    if fit is not None:
        chosen = fit["fits"][fit["chosen"]]
        held = chosen["heldout_r2"]
        on_unseen = (
            f", and {held:.2f} on the {len(fit['heldout_prompts'])} prompt"
            f"{'s' if len(fit['heldout_prompts']) != 1 else ''} it was not fitted on"
            if held is not None
            else ""
        )
        before = base.provenance.fit_value
        compared = (
            f" The calibration it was using scored {before:.2f}."
            if before is not None and base.provenance.fit_metric in ("R²", "held-out R²")
            else ""
        )
        low, high = document["calibrated_range"]
        lines.append(
            f"TeaCache: its formula now follows how this model's picture changes from step to "
            f"step with a score of {chosen['r2']:.2f} out of 1{on_unseen}.{compared}"
        )
        lines.append(
            f"It knows step changes from {low:.3f} to {high:.3f}; a step that changes more or "
            "less than that is always computed."
        )
    table = magcache_from_document(document)
    if table is not None and result.magcache_spread is not None:
        ratios = table.ratios[1:]
        lines.append(
            f"MagCache: a table of how strongly each of the {len(table.ratios)} steps moves the "
            f"picture ({min(ratios):.3f} to {max(ratios):.3f}); your prompts agree within "
            f"{result.magcache_spread:.3f}."
        )
    for choice in result.choices:
        lines.append(f"{gate_kind(choice.gate).label}'s threshold: {_sentence(choice.reason)}")
    variant = get_variant(result.variant_id)
    gate = result.job.gates[0]
    threshold = variant.default_threshold_for(gate)
    at = f" at threshold {threshold:g}" if threshold is not None else ", with no default threshold"
    lines.append(
        f"Saved as “{variant.display_name}” and selected: {gate_kind(gate).label} is its gate{at}."
    )
    scope = variant.calibration_scope
    if scope is not None and scope.loras:
        lines.append(f"Made {scope.lora_words()}: it is the calibration for that LoRA set only.")
    return lines


def detail_words(result: CalibrationResult) -> list[str]:
    document = result.document
    job = result.job
    r = job.request
    lines: list[str] = []
    fit = result.fit
    if fit is not None:
        for mode, values in fit["fits"].items():
            chosen = " (chosen)" if mode == fit["chosen"] else ""
            coefficients = ", ".join(f"{c:.5g}" for c in values["coefficients"])
            held = values["heldout_r2"]
            held_text = "—" if held is None else f"{held:.4f}"
            lines.append(
                f"TeaCache polynomial, {mode} fit{chosen}: {coefficients} (c4 … c0) · "
                f"R² {values['r2']:.4f} on {fit['fit_pairs']} pairs · held-out R² {held_text} "
                f"({fit['heldout_pairs']} pairs of the last {len(fit['heldout_prompts'])} "
                "prompts)"
            )
        low, high = document["calibrated_range"]
        lines.append(f"Calibrated rel-L1 range: {low:.4f} – {high:.4f}")
        lines.append(f"Choice: {fit['choice_rule']}")
    table = magcache_from_document(document)
    if table is not None and result.magcache_spread is not None:
        ratios = ", ".join(f"{v:.4f}" for v in table.ratios)
        lines.append(
            f"MagCache ratios ({len(table.ratios)} steps): {ratios} · retention "
            f"{table.retention_ratio:g}, at most {table.max_consecutive_skips} reused in a row"
        )
    for choice in result.choices:
        if not choice.rows:
            continue
        tried = "; ".join(
            f"{row.threshold:g}: {row.mean_skipped:.1f} skipped, SSIM {row.mean_ssim:.4f} "
            f"(worst {row.min_ssim:.4f})"
            for row in choice.rows
        )
        lines.append(
            f"{gate_kind(choice.gate).label} threshold, by {RULE_WORDS}; tried on "
            f"{len(job.prompts)} prompts × {r.steps} steps (mean): {tried}"
        )
    provenance = document["provenance"]
    lines.append(f"Provenance: {provenance['source']}")
    if provenance.get("data_size"):
        lines.append(f"Data: {provenance['data_size']}")
    if provenance.get("notes"):
        lines.append(f"Notes: {provenance['notes']}")
    scope = document.get("scope", {})
    base = get_variant(r.variant_id)
    measured = [quantize_label(r.quantize)] if base.family.quantizable else []
    if scope.get("loras"):
        measured.append(
            "LoRA " + ", ".join(f"{x['path']} × {x['scale']:g}" for x in scope["loras"])
        )
    if scope.get("model_path"):
        measured.append(f"model folder {scope['model_path']}")
    if measured:
        lines.append("Measured with " + "; ".join(measured))
    versions = document.get("versions", {})
    where = hardware_label(versions) if versions else ""
    names = ", ".join(f"{k} {versions[k]}" for k in ("mlx", "mflux") if k in versions)
    if where or names:
        lines.append("Measured on " + " · ".join(p for p in (where, names) if p))
    lines.append(f"File: {result.path}")
    return lines


def format_duration(seconds: float) -> str:
    """ "8 s", "40 s", "3 min", "1 h 5 min": a time left, rounded as a person would say it."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "…", "!", "?")) else text + "."
