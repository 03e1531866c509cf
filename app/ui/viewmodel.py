"""The window's observable state. Widgets only render these models; one method
(``RunModel.handle_event``) applies engine events, and ``FormModel`` holds the inputs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Literal, TypeVar

import numpy as np
from PySide6.QtCore import QObject, Signal

from app.engine.events import (
    EngineEvent,
    LoadProgress,
    ModelReady,
    Pass,
    PassFinished,
    PassStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunWarning,
    StepDone,
    StepPreview,
)
from app.engine.loader import MEMORY_WARNING
from app.engine.report import RunReport
from app.engine.request import (
    GUIDANCE_RANGE,
    MAX_STEPS,
    GenerationRequest,
    LoraSpec,
    make_request,
)
from app.gate import StepEvent
from app.hardware import physical_memory_bytes
from app.storage.history import HistoryEntry, friendly_time
from app.storage.settings import Settings
from app.ui.analysis import (
    EngagementBand,
    Notice,
    NoticeKind,
    RunAnalysis,
    RunSaved,
    count_skips,
    difference_map,
    engagement_band,
)
from app.ui.defaults import (
    DEFAULT_PROMPT,
    default_threshold,
    size_allowed,
    size_presets,
)
from app.ui.memory import initial_quantize
from app.ui.observable import Prop
from app.variants import DEFAULT_VARIANT, Variant, all_variants, get_variant

StepRow = tuple[StepEvent | None, ...]
PreviewRow = tuple[np.ndarray | None, ...]  # one step preview per step, None until it arrives
SCHEDULE_WARNING_KINDS = frozenset({"distilled", "schedule", "engagement", "distilled-schedule"})


class RunStatus(StrEnum):
    idle = "idle"
    loading = "loading"
    running = "running"
    cancelling = "cancelling"
    finished = "finished"
    cancelled = "cancelled"
    failed = "failed"

    @property
    def busy(self) -> bool:
        return self in (RunStatus.loading, RunStatus.running, RunStatus.cancelling)


def ui_default_threshold(variant: Variant, gate: str = "teacache") -> float:
    """The slider's default (``app.ui.defaults.default_threshold``)."""
    return default_threshold(variant, gate)


def threshold_key(variant_id: str, gate: str) -> str:
    """Where a threshold is remembered: per variant, and per gate (their scales differ)."""
    return variant_id if gate == "teacache" else f"{variant_id}@{gate}"


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

    variant_id = Prop(DEFAULT_VARIANT)
    prompt = Prop(DEFAULT_PROMPT)
    steps = Prop(28)
    seed = Prop(42)
    threshold = Prop(0.1)
    size = Prop[tuple[int, int]]((128, 128))
    guidance = Prop[float | None](None)
    loras = Prop[tuple[LoraSpec, ...]](())  # always () for the demo models (not mflux models)
    quantize = Prop[int | None](None)  # None: full precision (and every embedded variant)
    # The window asks for live step previews; a timing benchmark may turn them off (their cost
    # is charged to no step, but it is wall time).
    live_previews = True
    gate = Prop("teacache")  # "teacache" or "magcache"

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
        self._load_variant(variant_id)

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
        self.gate = gate
        self.threshold = self._remembered_threshold(self.variant)

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
        if self.loras and not variant.embedded:
            s.loras[vid] = [[lora.path, lora.scale] for lora in self.loras]
        else:
            s.loras.pop(vid, None)
        default = initial_quantize(variant, self.size, self.memory_bytes)
        if variant.embedded or variant.stored_quantize is not None or self.quantize == default:
            s.quantize.pop(vid, None)
        else:
            s.quantize[vid] = 0 if self.quantize is None else int(self.quantize)
        s.seed = int(self.seed)
        s.last_prompt = self.prompt

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
            quantize=None if self.variant.embedded else self.quantize,
            previews=self.live_previews,
            gate=self.gate,
        )

    def apply_request(self, request: GenerationRequest) -> None:
        """Fill the inputs from a request (reopening a run from the history)."""
        if request.variant_id != self.variant_id:
            self.remember()
            self._load_variant(request.variant_id)
        self.prompt = request.prompt
        self.seed = request.seed
        self.steps = request.steps
        self.gate = request.gate
        self.threshold = request.threshold
        self.size = (request.width, request.height)
        if self.variant.default_guidance is not None:
            self.guidance = request.guidance
        self.loras = request.loras
        self.quantize = request.quantize

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
        self.variant_id = variant_id
        self.steps = steps
        if variant.gate_unavailable_reason(self.gate) is not None:
            self.gate = "teacache"  # every variant has TeaCache numbers
        self.threshold = self._remembered_threshold(variant)
        self.size = size
        self.guidance = guidance
        stored_loras = [] if variant.embedded else s.loras.get(variant_id, [])
        self.loras = tuple(LoraSpec(str(path), float(scale)) for path, scale in stored_loras)  # type: ignore[arg-type]
        self.quantize = initial_quantize(variant, size, self.memory_bytes)
        stored_choice = s.quantize.get(variant_id)
        if stored_choice is not None and not variant.embedded and variant.stored_quantize is None:
            self.quantize = stored_choice or None  # 0: full precision
        self.variant_loaded.emit(variant_id)


class RunModel(QObject):
    """Everything the result side of the window shows about the current (or reopened) run."""

    status_changed = Signal(object)
    run_id_changed = Signal(object)
    request_changed = Signal(object)
    phase_changed = Signal(object)
    progress_changed = Signal(object)
    active_pass_changed = Signal(object)
    gated_steps_changed = Signal(object)
    vanilla_steps_changed = Signal(object)
    resumed_from_changed = Signal(object)
    vanilla_cached_changed = Signal(object)
    gated_image_changed = Signal(object)
    vanilla_image_changed = Signal(object)
    difference_changed = Signal(object)
    gated_seconds_changed = Signal(object)
    vanilla_seconds_changed = Signal(object)
    ssim_changed = Signal(object)
    local_diff_changed = Signal(object)
    speedup_changed = Signal(object)
    speedup_estimated_changed = Signal(object)
    speedup_label_changed = Signal(object)
    skips_changed = Signal(object)
    error_changed = Signal(object)
    notices_changed = Signal(object)
    band_changed = Signal(object)
    saved_entry_changed = Signal(object)
    load_seconds_changed = Signal(object)
    engine_details_changed = Signal(object)
    origin_changed = Signal(object)
    gated_preview_changed = Signal(object)
    vanilla_preview_changed = Signal(object)
    gated_thumbnails_changed = Signal(object)
    vanilla_thumbnails_changed = Signal(object)
    report_changed = Signal(object)

    status = Prop(RunStatus.idle)
    run_id = Prop(0)
    request = Prop[GenerationRequest | None](None)
    phase = Prop("Ready")
    progress = Prop(0.0)  # 0–1, or -1 while indeterminate (loading)
    active_pass = Prop[Pass | None](None)
    gated_steps = Prop[StepRow](())
    vanilla_steps = Prop[StepRow](())
    resumed_from = Prop[int | None](None)
    vanilla_cached = Prop(False)
    gated_image = Prop[np.ndarray | None](None)
    vanilla_image = Prop[np.ndarray | None](None)
    difference = Prop[np.ndarray | None](None)
    gated_seconds = Prop[float | None](None)
    vanilla_seconds = Prop[float | None](None)
    ssim = Prop[float | None](None)
    local_diff = Prop[float | None](None)  # the worst window of the difference (app.metrics)
    speedup = Prop[float | None](None)
    speedup_estimated = Prop(False)
    speedup_label = Prop("")  # how the speedup was measured (app.engine.report.speedup_label)
    skips = Prop[int | None](None)
    error = Prop[Notice | None](None)
    notices = Prop[tuple[Notice, ...]](())
    band = Prop[EngagementBand | None](None)
    saved_entry = Prop[str | None](None)
    load_seconds = Prop[float | None](None)
    engine_details = Prop[dict[str, object] | None](None)  # the engine's schedule notices, merged
    # Where the shown result came from when not from a run of this session, e.g. "from history,
    # run at 14:02": an opened run's "vanilla cached" described its own run, not this showing.
    origin = Prop("")
    # Live step previews of the running passes: the latest one (shown until the pass's image
    # arrives) and every step's, for the timeline's hover.
    gated_preview = Prop[np.ndarray | None](None)
    vanilla_preview = Prop[np.ndarray | None](None)
    gated_thumbnails = Prop[PreviewRow](())
    vanilla_thumbnails = Prop[PreviewRow](())
    report = Prop[RunReport | None](None)  # the finished run's report (None: running, or reopened)

    def __init__(
        self, parent: QObject | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(parent)
        self.clock = clock
        self._pass_started_at: float | None = None  # clock() when the running pass began
        self._step_ended_at: float | None = None  # clock() when its last step arrived

    @property
    def busy(self) -> bool:
        return self.status.busy

    @property
    def finished(self) -> bool:
        return self.status is RunStatus.finished

    def status_text(self) -> str:
        """The phase, and while a pass runs, how long is left of it: from the mean of the finished
        step times of this pass (before the gated pass has any, the vanilla pass's), else
        "first step… 12 s" while the first step is still going."""
        which, started = self.active_pass, self._pass_started_at
        if which is None or started is None or self.status is not RunStatus.running:
            return self.phase
        row = self.gated_steps if which is Pass.gated else self.vanilla_steps
        done = [s for s in row if s is not None]
        left = len(row) - len(done)
        if left <= 0:
            return self.phase
        now = self.clock()
        sample = done if done else ([] if which is Pass.vanilla else self._finished_vanilla())
        if not sample:
            return f"{self.phase} · first step… {_duration(now - started)}"
        mean = sum(s.seconds for s in sample) / len(sample)
        into_step = now - (self._step_ended_at if done and self._step_ended_at else started)
        remaining = max(0.0, left * mean - into_step)
        if remaining < 1.0:  # slower than the mean says "finishing", not "0 s"
            tail = "finishing…" if into_step > mean else "less than a second left in this pass"
            return f"{self.phase} · {tail}"
        return f"{self.phase} · about {_duration(remaining)} left in this pass"

    def _finished_vanilla(self) -> list[StepEvent]:
        if self.vanilla_cached:
            return []  # a cached pass's times are another load's, and another run's
        return [s for s in self.vanilla_steps if s is not None and s.seconds > 0]

    # -- lifecycle driven by the controller -------------------------------------------------------
    def begin(self, run_id: int, request: GenerationRequest) -> None:
        self._pass_started_at = self._step_ended_at = None
        self.run_id = run_id
        self.request = request
        self.status = RunStatus.loading
        self.phase = "Starting…"
        self.progress = -1.0
        self.active_pass = None
        blank: StepRow = (None,) * request.steps
        self.gated_steps = blank
        self.vanilla_steps = blank if request.compare_vanilla else ()
        self.resumed_from = None
        self.vanilla_cached = False
        self.gated_image = None
        self.difference = None
        self.gated_seconds = None
        self.ssim = None
        self.local_diff = None
        self.speedup = None
        self.speedup_estimated = False
        self.speedup_label = ""
        self.skips = None
        self.error = None
        self.notices = ()
        self.saved_entry = None
        self.engine_details = None
        self.origin = ""
        self.report = None
        # Keep the previous vanilla image and band until the new ones arrive: a threshold-only
        # re-run shows the same vanilla, and blanking it would flicker.
        if self.band is not None and (self.band.variant_id, self.band.steps) != (
            request.variant_id,
            request.steps,
        ):
            self.band = None
        self.vanilla_image = None if not request.compare_vanilla else self.vanilla_image
        self.vanilla_seconds = None
        self.gated_preview = self.vanilla_preview = None
        self.gated_thumbnails = (None,) * request.steps
        self.vanilla_thumbnails = (None,) * request.steps if request.compare_vanilla else ()

    def mark_cancelling(self) -> None:
        if self.status.busy:
            self.status = RunStatus.cancelling
            self.phase = "Cancelling…"

    def fail_locally(self, message: str, details: str = "") -> None:
        """A failure found before anything reached the engine (invalid input)."""
        self.error = Notice(NoticeKind.error, "Cannot generate", message, details, key="error")

    def dismiss(self, key: str) -> None:
        if self.error is not None and self.error.key == key:
            self.error = None
        self.notices = tuple(n for n in self.notices if n.key != key)

    # -- the one event handler ---------------------------------------------------------------------
    def handle_event(self, event: EngineEvent | RunAnalysis | RunSaved) -> None:
        if isinstance(event, LoadProgress | ModelReady):
            self._on_load(event)
            return
        if event.run_id != self.run_id:
            return  # a late event of an earlier run
        match event:
            case PassStarted():
                self._on_pass_started(event)
            case StepDone():
                self._on_step(event)
            case StepPreview():
                self._on_preview(event)
            case PassFinished():
                self._on_pass_finished(event)
            case RunWarning():
                if event.kind == MEMORY_WARNING:
                    return  # the memory banner says it before the run (app.ui.memory)
                if event.kind in SCHEDULE_WARNING_KINDS:
                    # Folded into the schedule banner (with the numbers), not shown on its own.
                    self.engine_details = {**(self.engine_details or {}), **event.details}
                    return
                title = "Not saved to history" if event.kind == "history" else "Engine notice"
                notice = Notice(
                    NoticeKind.warning,
                    title,
                    event.message,
                    "\n".join(f"{k}: {v}" for k, v in event.details.items()),
                    key=event.kind,
                )
                self.notices = (*(n for n in self.notices if n.key != notice.key), notice)
            case RunAnalysis():
                self.difference = event.difference
            case RunSaved():
                self.saved_entry = event.folder
            case RunFinished():
                self._on_finished(event)
            case RunCancelled():
                self.active_pass = None
                at = "" if event.at_step is None else f" at step {event.at_step + 1}"
                self.phase = f"Cancelled{at}"
                self.progress = 0.0
                self.status = RunStatus.cancelled  # last: listeners see the final state
            case RunFailed():
                self.active_pass = None
                self.phase = "Failed"
                self.progress = 0.0
                self.error = Notice(
                    NoticeKind.error, "Generation failed", event.message, event.details, key="error"
                )
                self.status = RunStatus.failed

    def _on_load(self, event: LoadProgress | ModelReady) -> None:
        if not self.status.busy:
            return
        if isinstance(event, LoadProgress):
            self.status = RunStatus.loading
            self.phase = event.message[:1].upper() + event.message[1:]
            total = event.total_bytes
            self.progress = (event.done_bytes or 0) / total if total else -1.0
        else:
            self.load_seconds = event.seconds
            self.phase = "Model ready"

    def _on_pass_started(self, event: PassStarted) -> None:
        if self.status is not RunStatus.cancelling:
            self.status = RunStatus.running
        self._pass_started_at = self.clock()
        self._step_ended_at = None
        if event.which is Pass.vanilla:
            self.vanilla_cached = event.cached
            self.vanilla_steps = _resize(self.vanilla_steps, event.num_steps, keep=event.cached)
            self.vanilla_thumbnails = (None,) * event.num_steps
            self.vanilla_preview = None
            if event.cached:
                self.phase = "Vanilla reused from the cache"
            else:
                self.vanilla_image = None
                self.active_pass = Pass.vanilla
                self.phase = f"Vanilla pass · step 0 of {event.num_steps}"
        else:
            self.active_pass = Pass.gated
            self.resumed_from = event.resumed_from
            self.gated_steps = (None,) * event.num_steps
            self.gated_thumbnails = (None,) * event.num_steps
            self.gated_preview = None
            resumed = f" (resumed at step {event.resumed_from + 1})" if event.resumed_from else ""
            self.phase = f"TeaCache pass{resumed} · step 0 of {event.num_steps}"
        self._update_progress()

    def _on_step(self, event: StepDone) -> None:
        step = event.step
        name = "gated_steps" if event.which is Pass.gated else "vanilla_steps"
        row = list(_resize(getattr(self, name), step.num_steps, keep=True))
        row[step.index] = step
        self._step_ended_at = self.clock()
        setattr(self, name, tuple(row))
        if event.which is Pass.gated:
            self.skips = count_skips(self.gated_steps)
        label = "TeaCache pass" if event.which is Pass.gated else "Vanilla pass"
        if self.status is not RunStatus.cancelling:
            self.phase = f"{label} · step {step.index + 1} of {step.num_steps}"
        self._update_progress()

    def _on_preview(self, event: StepPreview) -> None:
        name = "gated" if event.which is Pass.gated else "vanilla"
        row = list(getattr(self, f"{name}_thumbnails"))
        if event.index >= len(row):
            row.extend([None] * (event.index + 1 - len(row)))
        row[event.index] = event.image
        setattr(self, f"{name}_thumbnails", tuple(row))
        setattr(self, f"{name}_preview", event.image)

    def _on_pass_finished(self, event: PassFinished) -> None:
        if event.which is Pass.vanilla:
            self.vanilla_steps = tuple(event.steps) if event.steps else self.vanilla_steps
            self.vanilla_image = event.image
            self.vanilla_seconds = event.seconds
            self._update_band()
        else:
            if event.steps:
                self.gated_steps = tuple(event.steps)
            self.gated_image = event.image
            self.gated_seconds = event.seconds
            self.skips = count_skips(self.gated_steps)
        self._update_progress()

    def _on_finished(self, event: RunFinished) -> None:
        report = event.report
        vanilla = report.vanilla
        if vanilla is not None and self.vanilla_image is None:
            # An engine may reuse its cached vanilla without re-sending it: the report has it.
            self.vanilla_steps = vanilla.steps
            self.vanilla_image = vanilla.image
            self.vanilla_seconds = vanilla.loop_seconds
            self.vanilla_cached = vanilla.cached
            self._update_band()
        self.report = report
        self.ssim = report.ssim
        self.local_diff = report.local_diff.value if report.local_diff is not None else None
        self.speedup = report.speedup
        self.speedup_estimated = report.speedup_estimated
        self.speedup_label = report.speedup_label
        self.active_pass = None
        self.progress = 1.0
        skips = self.skips if self.skips is not None else 0
        total = self.gated_seconds or 0.0
        self.phase = f"Finished · {skips} of {len(self.gated_steps)} steps skipped · {total:.2f} s"
        self.status = RunStatus.finished  # last: listeners see the final state

    def _update_band(self) -> None:
        request = self.request
        if request is None:
            return
        self.band = engagement_band(
            request.variant, request.threshold, self.vanilla_steps, request.gate
        )

    def _update_progress(self) -> None:
        request = self.request
        if request is None or self.status is RunStatus.cancelling:
            return
        n = request.steps
        vanilla_total = n if request.compare_vanilla else 0
        done = 0
        if vanilla_total:
            done += n if self.vanilla_cached else sum(s is not None for s in self.vanilla_steps)
        if self.active_pass is Pass.gated or self.gated_image is not None:
            done += sum(s is not None for s in self.gated_steps) + (self.resumed_from or 0)
        self.progress = min(1.0, done / max(1, vanilla_total + n))

    # -- reopening ---------------------------------------------------------------------------------
    def show_entry(self, entry: HistoryEntry, request: GenerationRequest | None) -> None:
        """Show a saved run as if it had just finished (no engine involved)."""
        gated, vanilla = entry.load_images()
        self.run_id = -1
        self.request = request
        self.report = None
        self.error = None
        self.notices = ()
        self.gated_steps = entry.step_events("gated")
        self.vanilla_steps = entry.step_events("vanilla")
        self.resumed_from = _int_or_none(entry.result.get("resumed_from"))
        self.vanilla_cached = bool(entry.result.get("vanilla_cached", False))
        self.gated_image = gated
        self.vanilla_image = vanilla
        self.gated_preview = self.vanilla_preview = None
        self.gated_thumbnails = self.vanilla_thumbnails = ()  # the history keeps no previews
        self.difference = difference_map(gated, vanilla) if vanilla is not None else None
        self.gated_seconds = entry.gated_seconds
        self.vanilla_seconds = entry.vanilla_seconds
        self.ssim = entry.ssim
        self.local_diff = entry.local_diff
        self.speedup = entry.speedup
        self.speedup_estimated = entry.speedup_estimated
        self.speedup_label = entry.speedup_label
        self.skips = count_skips(self.gated_steps)
        self.saved_entry = str(entry.folder)
        self.band = (
            engagement_band(request.variant, request.threshold, self.vanilla_steps, request.gate)
            if request is not None
            else None
        )
        self.origin = history_origin(entry.created)
        self.status = RunStatus.finished
        self.progress = 1.0
        self.phase = f"Opened from history · {friendly_time(entry.created)}"

    def show_report(self, report: RunReport, origin: str) -> None:
        """Show one finished report as the current result (a threshold comparison's entry;
        no engine involved). ``origin`` says where it came from."""
        vanilla = report.vanilla
        self.run_id = -1
        self.request = report.request
        self.error = None
        self.notices = ()
        self.gated_steps = report.gated.steps
        self.vanilla_steps = vanilla.steps if vanilla is not None else ()
        self.resumed_from = report.gated.resumed_from
        self.vanilla_cached = report.vanilla_cached
        self.gated_image = report.gated.image
        self.vanilla_image = vanilla.image if vanilla is not None else None
        self.difference = (
            difference_map(report.gated.image, vanilla.image) if vanilla is not None else None
        )
        self.gated_seconds = report.gated.loop_seconds
        self.vanilla_seconds = vanilla.loop_seconds if vanilla is not None else None
        self.ssim = report.ssim
        self.speedup = report.speedup
        self.speedup_estimated = report.speedup_estimated
        self.speedup_label = report.speedup_label
        self.skips = count_skips(self.gated_steps)
        self.saved_entry = None
        self._update_band()
        self.origin = origin
        self.status = RunStatus.finished
        self.progress = 1.0
        self.phase = f"Showing {origin}"


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest:02d} s"


def history_origin(created: str, now: datetime | None = None) -> str:
    """``from history, run at 14:02`` (the day too when it was not today)."""
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return "from history"
    today = (now or datetime.now(when.tzinfo)).date()
    if when.date() == today:
        return f"from history, run at {when:%H:%M}"
    return f"from history, run {friendly_time(created)}"


def _resize(row: Sequence[StepEvent | None], n: int, *, keep: bool) -> StepRow:
    if len(row) == n and keep:
        return tuple(row)
    if not keep:
        return (None,) * n
    return tuple(row[:n]) + (None,) * max(0, n - len(row))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def threshold_step_events(steps: StepRow, threshold: float) -> StepRow:
    """The same rows with a different threshold recorded (display only)."""
    return tuple(None if s is None else replace(s, threshold=threshold) for s in steps)


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
