"""What the window's buttons, menus and banners do: generate, cancel, reopen a saved run, export,
download, banner fixes, and the notices and texts derived from the view-models.

The model half of krita-ai-diffusion's model/ui split: ``MainWindow`` builds widgets, binds them to
``FormModel``/``RunModel`` properties and connects signals to these methods
(``generate_button.clicked.connect(session.generate)``). The session imports no Qt: it reaches the
engine thread through ``EngineLink`` and downloads through ``DownloadLink`` (``EngineHost`` and
``DownloadController`` in the app, plain fakes in tests), and the view-models only through their
attributes and methods.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.engine.calibration import Calibrate
from app.engine.jobs import Generate, Job
from app.engine.notices import schedule_check
from app.engine.request import RequestError, check_steps
from app.engine.target import QualitySearch
from app.errors import UserFacingError
from app.gate import StepEvent
from app.gate.kinds import gate_kind
from app.storage.export import (
    export_entry,
    export_metadata,
    export_name,
    export_side_by_side,
    gated_caption,
    lora_captions,
    report_metadata,
    speedup_caption,
)
from app.storage.history import HistoryEntry, HistoryStore, friendly_time, history_origin
from app.storage.settings import Settings, SettingsStore
from app.ui.analysis import (
    BannerFix,
    EngagementBand,
    FixKind,
    Notice,
    NoticeAction,
    NoticeKind,
    curve_drift_note,
    engagement_band,
    lora_calibration_note,
    schedule_notice,
)
from app.ui.defaults import MAX_SEED, MIN_SEED
from app.ui.plain_words import gate_unavailable
from app.ui.quantize_model import MEMORY_NOTICE, memory_notice
from app.variants import (
    DEFAULT_VARIANT,
    UnknownVariantError,
    Variant,
    all_variants,
    get_variant,
)

if TYPE_CHECKING:
    from app.ui.downloads import ModelStore
    from app.ui.form_model import FormModel
    from app.ui.quality_model import QualityModel
    from app.ui.run_model import RunModel

log = logging.getLogger(__name__)
SCHEDULE_NOTICE = "schedule"
MODEL_FOLDER_NOTICE = "model-folder"
EXPORT_TITLE = "Cannot export"
OPEN_TITLE = "Cannot open the saved run"


@dataclass(frozen=True, slots=True)
class GatePlotData:
    """What the gate plot draws (``Session.gate_plot_data``)."""

    gate: str
    gated: Sequence[StepEvent | None]
    vanilla: Sequence[StepEvent | None]
    threshold: float
    band: EngagementBand | None
    preview: float | None  # the inputs' threshold, drawn dotted where it differs


class EngineLink(Protocol):
    """The engine thread as the session sees it (``app.ui.worker.EngineHost``)."""

    @property
    def busy(self) -> bool: ...

    def submit(self, job: Job) -> int | None: ...

    def cancel(self) -> bool: ...

    def shutdown(self, timeout_ms: int = 10_000) -> bool: ...


class DownloadLink(Protocol):
    """Weight downloads as the session sees them (``app.ui.downloads.DownloadController``)."""

    @property
    def busy(self) -> bool: ...

    @property
    def variant_id(self) -> str | None: ...

    def start(self, variant: Variant) -> bool: ...

    def shutdown(self, timeout_ms: int = 3000) -> None: ...


class Session:
    """The window's actions and derived state. Qt-free; see the module docstring."""

    def __init__(
        self,
        form: FormModel,
        run: RunModel,
        engine: EngineLink,
        downloads: DownloadLink,
        *,
        settings: Settings,
        settings_store: SettingsStore,
        history: HistoryStore,
        model_store: ModelStore,
        started: Callable[[int], None] | None = None,
        quality: QualityModel | None = None,
    ) -> None:
        self.form = form
        self.run = run
        self.engine = engine
        self.downloads = downloads
        self.settings = settings
        self.settings_store = settings_store
        self.history = history
        self.model_store = model_store
        self.started = started  # told the id of each run it starts (the window signals it)
        self.quality = quality  # target-quality mode (``app.ui.quality_model``)
        self._shut_down = False
        self._stopped = False
        self._dismissed: set[str] = set()
        # The picked gate's band when the shown run ran another (``gate_band``), memoised.
        self._gate_band: tuple[object, EngagementBand | None] | None = None
        self._wide_band: tuple[object, EngagementBand | None] | None = None
        self.startup_notices: list[Notice] = [
            Notice(NoticeKind.info, "Settings were partly reset", w, key=f"settings-{i}")
            for i, w in enumerate(settings_store.warnings)
        ]

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
        if not self.is_available(request.variant_id):
            self.run.error = self._not_downloaded_notice(request.variant_id)
            return None
        # Resume the gated pass from the cached vanilla trajectory only for a re-run of the same
        # vanilla (a threshold change): a first run times both passes in full, so its speedup is
        # measured, not an estimate over replayed steps.
        previous = self.run.request
        same_vanilla = previous is not None and previous.vanilla_key() == request.vanilla_key()
        request = replace(request, resume=same_vanilla)
        target = self.quality.target() if self.quality is not None else None
        # With a quality target, search from the slider's threshold for it.
        job = Generate(request) if target is None else QualitySearch(request, target)
        run_id = self.engine.submit(job)
        if run_id is None:
            return None
        self.settings.remember_prompt(request.prompt)
        self.form.remember()
        self.save_settings()
        self._dismissed.clear()
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
        if self.engine.busy or self.run.busy:
            return False
        if variant_id == self.form.variant_id:
            return True
        self.form.select_variant(variant_id)
        if self.form.variant_id != variant_id:
            return False
        if self.run.error is not None:
            self.run.error = None  # "not downloaded", "cannot generate": about the old selection
        self.run.notices = ()
        self._dismissed.discard(SCHEDULE_NOTICE)
        self._dismissed.discard(MEMORY_NOTICE)
        return True

    def steps_problem(self) -> str | None:
        """The request check's sentence where the steps are outside the variant's range."""
        try:
            check_steps(self.form.variant, int(self.form.steps))
        except RequestError as exc:
            return str(exc)[:1].upper() + str(exc)[1:] + "."
        return None

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
        current_loras = current.loras if current is not None else ()
        if (request.loras or current_loras) and current_loras != request.loras:
            parts += lora_captions(request.loras) or ["no LoRA"]
        return f"{what}: " + ", ".join(parts)

    def gate_plot_note(self) -> str:
        """The gate plot's caveats: the shown run's LoRAs (the form's before any run) against
        what its variant's calibration was made with, and a run that skipped another number of
        steps than the simulated skip curve says (``curve_drift_note``)."""
        request = self.run.request
        if request is None:
            return lora_calibration_note(self.form.loras, self.form.variant, self.form.gate)
        try:
            variant = request.variant
        except UnknownVariantError:  # a run from the history whose calibration is gone
            variant = None
        data = self.gate_plot_data()
        notes = (
            lora_calibration_note(request.loras, variant, request.gate),
            curve_drift_note(data.band, data.threshold, data.gated),
        )
        return " ".join(note for note in notes if note)

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

    def suggested_export_name(self) -> str:
        """The shown run's file name (the inputs' before any run): the gate that ran first."""
        request = self.run.request
        if request is not None:
            return export_name(request.gate, request.variant_id, request.seed)
        return export_name(self.form.gate, self.form.variant_id, int(self.form.seed))

    def can_export(self) -> bool:
        """A finished result is on screen (File ▸ Export is enabled only then)."""
        if self.run.gated_image is None:
            self.run.fail_locally("there is no finished run to export yet", title=EXPORT_TITLE)
            return False
        return True

    def export(self, path: Path) -> Path | None:
        """The side-by-side PNG of the shown run (from its history entry where it was saved), with
        its numbers in the PNG's metadata; ``.png`` is added where the name lacks it. Returns the
        path written, or None with one clear message where nothing could be written."""
        gated = self.run.gated_image
        if gated is None:
            self.run.fail_locally("there is no finished run to export yet", title=EXPORT_TITLE)
            return None
        saved = self.run.saved_entry
        entry = self.history.get(Path(saved).name) if saved else None
        try:
            if entry is not None:
                return export_entry(entry, path)
            return export_side_by_side(
                path,
                gated,
                self.run.vanilla_image,
                **self.export_captions(),
                metadata=self.export_metadata(),
            )
        except OSError as exc:
            self.run.fail_locally(
                f"could not export to {path}: {exc.strerror or exc}", title=EXPORT_TITLE
            )
            return None

    def export_metadata(self) -> dict[str, str]:
        """The shown run's numbers for the PNG's text chunks: its report's, with the speedup as
        the card shows it (before the report, the request's, else the form's)."""
        r, f = self.run, self.form
        if r.report is not None:
            return report_metadata(r.report, shown_speedup=(r.speedup, r.speedup_label))
        request = r.request
        return export_metadata(
            prompt=request.prompt if request is not None else f.prompt,
            seed=request.seed if request is not None else int(f.seed),
            variant=request.variant_id if request is not None else f.variant_id,
            steps=request.steps if request is not None else int(f.steps),
            threshold=request.threshold if request is not None else float(f.threshold),
            gate=request.gate if request is not None else f.gate,
            skips=r.skips,
            ssim=r.ssim,
            gated_seconds=r.gated_seconds,
            vanilla_seconds=r.vanilla_seconds,
            speedup=r.speedup,
            speedup_label=r.speedup_label if r.speedup is not None else "",
            loras=request.loras if request is not None else self.form.loras,
            quantize=request.quantize if request is not None else None,
            model_path=request.model_path if request is not None else None,
        )

    def export_captions(self) -> dict[str, str]:
        r = self.run
        request = r.request
        skips = f"{r.skips}/{len(r.gated_steps)} skipped" if r.skips is not None else ""
        threshold = request.threshold if request is not None else self.form.threshold
        gate = request.gate if request is not None else self.form.gate
        gated = gated_caption(gate, threshold, skips)
        if r.gated_seconds is not None:
            gated += f"  {r.gated_seconds:.2f} s"
        vanilla = "Vanilla" + (f"  {r.vanilla_seconds:.2f} s" if r.vanilla_seconds else "")
        variant, seed, steps = (
            (request.variant_id, request.seed, request.steps)
            if request is not None
            else (self.form.variant_id, int(self.form.seed), int(self.form.steps))
        )
        parts = [variant, f"seed {seed}", f"{steps} steps"]
        parts += lora_captions(request.loras if request is not None else self.form.loras)
        if r.ssim is not None:
            parts.append(f"SSIM {r.ssim:.4f}")
        if r.speedup is not None:
            parts.append(speedup_caption(r.speedup, r.speedup_label))
        prompt = request.prompt if request is not None else self.form.prompt
        return {
            "gated_caption": gated,
            "vanilla_caption": vanilla,
            "footer": f"“{prompt}”  ·  " + "  ·  ".join(parts),
        }

    # -- prompts and settings ----------------------------------------------------------------------
    @property
    def recent_prompts(self) -> list[str]:
        return list(self.settings.prompt_history)

    def use_prompt(self, prompt: str) -> None:
        self.form.prompt = prompt

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
        self.downloads.shutdown()
        return self.engine.shutdown(timeout_ms)

    # -- banners -----------------------------------------------------------------------------------
    @property
    def same_schedule(self) -> bool:
        """The shown run has the inputs' variant and steps: its trace and numbers apply to them."""
        request = self.run.request
        return request is not None and (request.variant_id, request.steps) == (
            self.form.variant_id,
            self.form.steps,
        )

    def gate_band(self) -> EngagementBand | None:
        """The shown run's band for the picker's gate: the run's own where it ran that gate,
        else the picked gate's on the run's vanilla steps (a vanilla pass records every gate's
        trace), so nothing about one gate is read off another's numbers."""
        f, r = self.form, self.run
        band, request = r.band, r.request
        if band is None or band.gate == f.gate or request is None:
            return band
        key = (band, request.variant_id, f.gate, float(f.threshold))
        if self._gate_band is None or self._gate_band[0] != key:
            found = engagement_band(request.variant, float(f.threshold), r.vanilla_steps, f.gate)
            self._gate_band = (key, found)
        return self._gate_band[1]

    def schedule_notice(self) -> Notice | None:
        """The schedule banner for the inputs, in the picked gate's numbers: after a run of the
        same variant and steps, its own band on the shown run's vanilla steps, and what the run
        measured (its engagement) only where that run ran this gate, and the check the engine
        warned it with only at that run's threshold: never another result's, nor another
        gate's, nor another threshold's."""
        f, r = self.form, self.run
        if self.steps_problem() is not None:
            return None  # no schedule to judge: the steps' own sentence is under Steps
        shown = r.request if self.same_schedule else None
        same_gate = shown if shown is not None and shown.gate == f.gate else None
        # The engine's check judged that run's threshold: at another one (a fix just applied)
        # it says nothing, and the run's trace decides.
        same_threshold = (
            same_gate if same_gate is not None and same_gate.threshold == f.threshold else None
        )
        return schedule_notice(
            f.variant,
            int(f.steps),
            float(f.threshold),
            measured=self.gate_band() if shown is not None else None,
            engagement=r.engagement if same_gate is not None else None,
            run_check=schedule_check(same_threshold) if same_threshold is not None else None,
            gate=f.gate,
        )

    def gate_plot_data(self) -> GatePlotData:
        """What the gate plot draws: the shown run in its gate's terms, with the inputs'
        threshold as a what-if line on the same vanilla run; where the picker holds another gate
        (and no run is going), that gate's own trace, band and threshold instead (the other
        gate's gated row is on another scale, so it is left out)."""
        f, r = self.form, self.run
        request = r.request
        same = self.same_schedule
        if request is not None and request.gate != f.gate and same and not r.busy:
            band = self._band_reaching(self.gate_band(), float(f.threshold))
            return GatePlotData(f.gate, (), r.vanilla_steps, float(f.threshold), band, None)
        gate = request.gate if request is not None else f.gate
        threshold = request.threshold if request is not None else float(f.threshold)
        # The threshold the gated steps drawn were decided against: a target search runs other
        # thresholds than the request's, and shows its chosen one's pass at the end.
        threshold = next((s.threshold for s in reversed(r.gated_steps) if s is not None), threshold)
        preview = float(f.threshold) if same else None
        band = self._band_reaching(r.band, max(threshold, preview or 0.0))
        return GatePlotData(gate, r.gated_steps, r.vanilla_steps, threshold, band, preview)

    def _band_reaching(
        self, band: EngagementBand | None, threshold: float
    ) -> EngagementBand | None:
        """``band`` with its skip curve drawn as far as ``threshold`` (the slider's what-if):
        the same trace, simulated further (the walk: the curve's axis stopped near 0.15 while
        the slider was at 0.35)."""
        request = self.run.request
        if band is None or request is None or not band.curve or band.curve[-1][0] >= threshold:
            return band
        key = (band, threshold)
        if self._wide_band is None or self._wide_band[0] != key:
            try:
                variant = request.variant
            except UnknownVariantError:  # a reopened run of a variant since removed
                return band
            wide = engagement_band(variant, threshold, self.run.vanilla_steps, band.gate)
            self._wide_band = (key, wide if wide is not None else band)
        return self._wide_band[1]

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

    # -- model folders -----------------------------------------------------------------------------
    def add_model_folder(self, folder: str | Path, base_variant: str | None) -> str | None:
        """Check and remember a local model folder; its variant id (for ``select_variant`` once
        the picker lists it), or None with the check's sentence in a banner."""
        from app.variants.folders import add_model_folder

        try:
            entry = add_model_folder(folder, base_variant)
        except UserFacingError as exc:
            self._folder_notice(str(exc))
            return None
        except OSError as exc:  # the list of folders could not be written
            self._folder_notice(f"could not remember {folder}: {exc.strerror or exc}")
            return None
        self.dismiss(MODEL_FOLDER_NOTICE)
        return entry.variant_id

    def remove_model_folder(self, variant_id: str) -> bool:
        """Forget a model folder (its files stay); the form falls back to its base variant."""
        from app.variants.folders import model_folders, remove_model_folder

        folder = next((f for f in model_folders() if f.variant_id == variant_id), None)
        if folder is None or self.engine.busy or self.run.busy:
            return False
        if self.form.variant_id == variant_id:
            self.select_variant(folder.base_variant)
        return remove_model_folder(variant_id)

    def _folder_notice(self, message: str) -> None:
        self.startup_notices = [n for n in self.startup_notices if n.key != MODEL_FOLDER_NOTICE]
        title = "Cannot add the model folder"
        notice = Notice(NoticeKind.error, title, message, key=MODEL_FOLDER_NOTICE)
        self.startup_notices.append(notice)

    def memory_notice(self) -> Notice | None:
        """The load check's refusal for the inputs' model, quantization and size, before any
        load; its button picks the most precise quantization that fits."""
        f = self.form
        width, height = f.size
        return memory_notice(f.variant, f.quantize, (int(width), int(height)), f.memory_bytes)

    def notices(self) -> tuple[Notice, ...]:
        """The banners to show, in order, without the dismissed ones."""
        found: list[Notice] = []
        if self.run.error is not None:
            found.append(self.run.error)
        schedule = self.schedule_notice()
        if schedule is not None:
            found.append(schedule)
        memory = self.memory_notice()
        if memory is not None:
            found.append(memory)
        found.extend(self.run.notices)
        found.extend(self.startup_notices)
        return tuple(n for n in found if n.key not in self._dismissed)

    def dismiss(self, key: str) -> None:
        self.startup_notices = [n for n in self.startup_notices if n.key != key]
        if key in (SCHEDULE_NOTICE, MEMORY_NOTICE):
            self._dismissed.add(key)
        self.run.dismiss(key)

    def apply_fix(self, fix: BannerFix) -> None:
        match fix.kind:
            case FixKind.variant if fix.variant is not None:
                if self.select_variant(fix.variant) and self.form.variant_id == fix.variant:
                    if fix.steps is not None:
                        self.form.steps = fix.steps
                    if fix.threshold is not None:
                        self.form.threshold = fix.threshold
            case FixKind.steps if fix.steps is not None:
                self.form.steps = fix.steps
            case FixKind.threshold if fix.threshold is not None:
                self.form.threshold = fix.threshold
            case FixKind.download:
                self.download_current()
            case FixKind.quantize:
                self.form.quantize = fix.quantize
        self._dismissed.discard(SCHEDULE_NOTICE)

    def threshold_hint(self) -> str:
        """Eligible steps and where skipping begins, in the picked gate's own numbers."""
        f = self.form
        if self.steps_problem() is not None:
            return ""  # the steps' own sentence is the one message
        kind = gate_kind(f.gate)
        calibration = kind.calibration_of(f.variant)
        if calibration is None:
            return gate_unavailable(f.variant, f.gate) or ""
        params = kind.params(calibration, max(float(f.threshold), 1e-9))
        band = self.gate_band()
        measured = band is not None and band.variant_id == f.variant_id and band.steps == f.steps
        onset = band.onset if band is not None else None
        return kind.threshold_hint(params, int(f.steps), measured=measured, onset=onset)

    # -- model availability and downloads ----------------------------------------------------------
    def is_available(self, variant_id: str) -> bool:
        try:
            variant = get_variant(variant_id)
            if variant.model_path is not None:  # a model folder: checked again when it loads
                return Path(variant.model_path).is_dir()
            return self.model_store.is_available(variant)
        except Exception:  # treat a broken check as "not on disk"
            log.exception("availability check failed for %s", variant_id)
            return False

    def download_label(self, variant: Variant) -> str:
        from app.ui.downloads import format_bytes

        return format_bytes(self.model_store.download_size(variant))

    def availability_badges(self) -> dict[str, str]:
        """The variant picker's badge per real model: on disk, or its download size."""
        badges: dict[str, str] = {}
        for variant in all_variants().values():
            if variant.family.weights_shipped:
                continue
            on_disk = self.is_available(variant.id)
            if variant.model_path is not None:
                badges[variant.id] = "folder" if on_disk else "folder missing"
                continue
            badges[variant.id] = "on disk" if on_disk else f"≈{self.download_label(variant)} ↓"
        return badges

    def variant_info(self) -> str:
        variant = self.form.variant
        parts = []
        if variant.family.weights_shipped:
            parts.append("Built in, runs offline")
        elif variant.model_path is not None:
            missing = "" if self.is_available(variant.id) else " (missing)"
            parts.append(f"Model folder {variant.model_path}{missing}")
        elif self.is_available(variant.id):
            parts.append("Downloaded")
        else:
            parts.append(f"Not downloaded · {self.download_label(variant)}")
            # Said before the download starts too (``Variant.licence_note``).
            if variant.gated_repo:
                parts.append("licence to accept on Hugging Face first")
            elif variant.licence is not None:
                parts.append(f"under the {variant.licence}")
        if variant.distilled:
            parts.append("distilled")
        parts.append(f"{variant.default_steps} steps by default")
        return " · ".join(parts)

    def needs_download(self) -> bool:
        variant = self.form.variant
        return not variant.family.weights_shipped and not self.is_available(variant.id)

    def download_current(self) -> bool:
        variant = self.form.variant
        if self.is_available(variant.id) or self.downloads.busy:
            return False
        return self.downloads.start(variant)

    def download_failed(self, message: str) -> None:
        self.run.error = Notice(NoticeKind.error, "Download failed", message, key="error")

    def _not_downloaded_notice(self, variant_id: str) -> Notice:
        variant = get_variant(variant_id)
        return Notice(
            NoticeKind.error,
            f"{variant.display_name} is not downloaded",
            f"Download it first ({self.download_label(variant)}), or pick the built-in demo model."
            + (f" {variant.licence_note}." if variant.licence_note is not None else ""),
            actions=(
                NoticeAction("Download", BannerFix.download()),
                NoticeAction("Use the demo model", BannerFix.use_variant(DEFAULT_VARIANT)),
            ),
            key="error",
        )
