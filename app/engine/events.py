"""Typed engine events. The engine emits them from its thread; one handler applies them to the
view-model. Payloads are immutable and hold plain data (numpy images, floats), never MLX arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from app.engine.calibration import CalibrationResult, PromptCapture
from app.engine.comparison import ComparisonResult
from app.engine.report import RunReport, TargetProbe
from app.engine.threshold_rule import Trial, TrialSpec
from app.gate.decision import Decision
from app.gate.events import StepEvent
from app.gate.simulator import Engagement


class Pass(StrEnum):
    vanilla = "vanilla"
    gated = "gated"


@dataclass(frozen=True, slots=True)
class LoadProgress:
    variant_id: str
    message: str
    done_bytes: int | None = None
    total_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ModelReady:
    variant_id: str
    seconds: float


@dataclass(frozen=True, slots=True)
class PassStarted:
    run_id: int
    which: Pass
    num_steps: int
    resumed_from: int | None = None  # gated pass resumed from vanilla latents before this step
    cached: bool = False  # vanilla result reused from the cache: no steps will follow


@dataclass(frozen=True, slots=True)
class StepDone:
    run_id: int
    which: Pass
    step: StepEvent


@dataclass(frozen=True, slots=True)
class StepPreview:
    """One step's predicted clean image (``GenerationRequest.previews``): a small uint8 RGB
    thumbnail (the demo: the exact image), emitted right after that step's ``StepDone``."""

    run_id: int
    which: Pass
    index: int
    image: np.ndarray  # uint8 RGB, C-contiguous, at most 256 pixels on the long side
    decision: Decision


@dataclass(frozen=True, slots=True)
class PassFinished:
    run_id: int
    which: Pass
    image: np.ndarray  # uint8 RGB, C-contiguous
    seconds: float
    steps: tuple[StepEvent, ...]


@dataclass(frozen=True, slots=True)
class RunWarning:
    """An inline, non-fatal notice (the distilled-schedule banner, an untested mflux...).
    ``details`` are its words for the history; what the window computes with travels typed
    (``engagement``: where skipping begins on this run, on an engagement warning)."""

    run_id: int
    kind: str
    message: str
    details: dict[str, object] = field(default_factory=dict)
    engagement: Engagement | None = None


@dataclass(frozen=True, slots=True)
class TargetProbed:
    """A target search finished one pass (``index`` from 0; at most ``max_passes``)."""

    run_id: int
    probe: TargetProbe
    index: int
    max_passes: int


@dataclass(frozen=True, slots=True)
class RunFinished:
    run_id: int
    report: RunReport


@dataclass(frozen=True, slots=True)
class RunCancelled:
    run_id: int
    at_step: int | None


@dataclass(frozen=True, slots=True)
class RunFailed:
    run_id: int
    message: str  # one line for the banner
    details: str  # the traceback, for the copy button and the log


@dataclass(frozen=True, slots=True)
class ComparisonEntryDone:
    """One threshold of a comparison finished (``index`` in the comparison's threshold order)."""

    run_id: int
    index: int
    report: RunReport


@dataclass(frozen=True, slots=True)
class ComparisonFinished:
    """A comparison's terminal event once at least one entry finished (also when it was
    cancelled or failed after that: the finished entries are kept)."""

    run_id: int
    result: ComparisonResult


@dataclass(frozen=True, slots=True)
class SweepEntryDone:
    """One threshold of an in-process sweep (``app.engine.jobs.ThresholdSweep``) finished
    (``index`` in the sweep's threshold order)."""

    run_id: int
    index: int
    report: RunReport


@dataclass(frozen=True, slots=True)
class SweepFinished:
    """A sweep's terminal event once at least one entry finished: the finished entries, in order,
    and why it stopped early (cancel, or a pass's failure message) where it did."""

    run_id: int
    reports: tuple[RunReport, ...]
    cancelled: bool = False
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class CalibrationProgress:
    """A calibration measured one more prompt (``index`` in the job's prompt order); ``done`` of
    ``total`` prompts are measured now (a resumed command's earlier ones included)."""

    run_id: int
    index: int
    done: int
    total: int
    capture: PromptCapture


@dataclass(frozen=True, slots=True)
class CalibrationTrials:
    """A calibration is choosing its default thresholds (``app.engine.threshold_rule``): ``done``
    gated passes have finished; ``trial`` is the one that just finished, ``trying`` the one
    starting now (each None where there is none; how many more the rule needs is not known
    ahead: it walks the thresholds until it has its answer)."""

    run_id: int
    done: int
    trial: Trial | None = None
    trying: TrialSpec | None = None


@dataclass(frozen=True, slots=True)
class CalibrationFinished:
    """A calibration's terminal event once its file is written (a cancel or a failure before
    that ends with ``RunCancelled``/``RunFailed`` and writes nothing)."""

    run_id: int
    result: CalibrationResult


EngineEvent = (
    LoadProgress
    | ModelReady
    | PassStarted
    | StepDone
    | StepPreview
    | PassFinished
    | RunWarning
    | TargetProbed
    | RunFinished
    | RunCancelled
    | RunFailed
    | ComparisonEntryDone
    | ComparisonFinished
    | SweepEntryDone
    | SweepFinished
    | CalibrationProgress
    | CalibrationTrials
    | CalibrationFinished
)
