"""What a gate kind is: everything the app knows about one decision rule, in one object.

A kind names its rule (``name``, ``label``), says what its threshold means in plain words, builds
its parameters from its own calibration (``calibration_of`` reads the variant's calibration for
this gate), simulates a vanilla trace, finds where skipping begins, lists the target search's
candidates, builds its live gate and its vanilla recorder, owns its figures on a step
(``StepEvent.signals[name]``) and in a report (``report_fields``) with their JSON, and words them
for the plot, the timeline, the Details, exports and the history. Every module outside
``app/gate`` asks the registry (``app.gate.kinds``) instead of branching on a gate's name.

Plain Python: no MLX until ``make_live`` (the live gates are imported on first use).
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from app.gate.decision import Decision, Verdict
from app.gate.events import (
    Figure,
    Figures,
    StepEvent,
    figure_to_json,
    figures_from_json,
)
from app.gate.signals import Signal
from app.gate.simulator import Engagement

if TYPE_CHECKING:  # the live gates import MLX
    from app.gate.live import LiveGate, TapRecorder

THRESHOLD_DECIMALS = 4  # what the window's threshold entry holds; candidates are rounded to it


class CalibrationMethod(StrEnum):
    """How ``teacache-studio calibrate`` measures a kind's calibration from vanilla runs."""

    polynomial = "polynomial"  # (signal change, output change) pairs, a degree-4 fit
    ratio_table = "ratio-table"  # per-step mean magnitude ratios of the residual


class Calibrated(Protocol):
    """What a kind reads from a variant: its calibration for each gate that has one."""

    @property
    def calibrations(self) -> Mapping[str, object]: ...


@dataclass(frozen=True, slots=True)
class PlotSpec:
    """What the gate plot draws for a kind: the y axis, and the legend of its two series (the
    vanilla run's value per step from ``GateKind.plot_value``, the gated pass's ``accumulated``
    against the threshold line)."""

    axis_label: str
    vanilla_legend: str
    gated_legend: str


@dataclass(frozen=True, slots=True)
class ScheduleFacts:
    """A schedule's answer for one kind, weight-free: the eligible steps, and the floor (no
    threshold at or below it skips where ``GateKind.skips_at_onset`` is False, none below it
    where True); None where no eligible step can ever skip."""

    eligible: int
    floor: float | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One interval of the threshold axis with one simulated skip pattern, and the threshold
    tried for it (inside the interval, at the entry's precision)."""

    threshold: float
    low: float  # the interval is (low, high], or [low, high) where ``low_closed``
    high: float
    predicted_skipped: int
    pattern: str
    low_closed: bool = False

    def holds(self, threshold: float) -> bool:
        if self.low_closed:
            return self.low <= threshold < self.high
        return self.low < threshold <= self.high


class GateParamsLike(Protocol):
    """What every kind's parameters share (the engine, reports and notices read only this)."""

    gate: ClassVar[str]

    @property
    def threshold(self) -> float: ...

    @property
    def enabled(self) -> bool: ...

    def with_threshold(self, threshold: float) -> Any: ...

    def eligible_steps(self, num_steps: int) -> int: ...


P = TypeVar("P")
C = TypeVar("C")
T = TypeVar("T")  # one step of a kind's trace (``trace``): what its simulator reads


class GateKind(ABC, Generic[P, C, T]):
    """One decision rule. Subclasses set the class attributes and implement the methods.

    A kind's trace (``trace``) is its own: a float per step for TeaCache and MagCache, a tuple of
    changes for the first-block probe; callers only pass it back to the same kind."""

    name: ClassVar[str]  # as typed on the command line, stored in requests and history
    label: ClassVar[str]  # as shown: the picker, captions, the summary line
    threshold_meaning: ClassVar[str]  # the picker's hint line and the command line's help
    threshold_quantity: ClassVar[str]  # what the threshold is compared with, for Details
    params_type: ClassVar[type]
    calibration_type: ClassVar[type]  # what ``calibration_of`` accepts from a variant
    # Where a variant has no calibration of ``calibration_type`` for this gate: None (the gate
    # cannot run there), or the kind's own settings where it needs none (the first-block probe).
    uncalibrated: ClassVar[Any] = None
    signal: ClassVar[Signal]
    calibration_method: ClassVar[CalibrationMethod | None]  # None: runs on defaults alone
    fallback_threshold: ClassVar[float]  # where neither a variant nor its base has a default
    skips_at_onset: ClassVar[bool]  # a threshold equal to the onset skips (the rule uses <=)
    exact_simulation: ClassVar[bool]  # the simulator is exact for a whole run (reads no latents)
    forced_skips: ClassVar[bool] = False  # ``bench --forced-skips`` drives this kind's numbers
    # Runs without numbers measured on the model that runs: a model folder or a LoRA set leaves
    # it as valid as on the base model (the first-block probe measures the model itself).
    calibration_free: ClassVar[bool] = False
    plot: ClassVar[PlotSpec]
    # The engagement notice's words: where the onset comes from and what it is the smallest of.
    onset_source: ClassVar[str]
    onset_quantity: ClassVar[str]
    onset_noun: ClassVar[str]  # the same, short and plural-able: "every prediction is above it"
    floor_source: ClassVar[str]  # the banner's words for ``ScheduleFacts.floor``
    no_default_reason: ClassVar[str]  # a calibration without a default threshold
    no_skip_reason: ClassVar[str]  # a target search that found no threshold that skips

    # -- calibration and parameters ----------------------------------------------------------
    def calibration_of(self, variant: Calibrated) -> C | None:
        """The variant's calibration for this gate (one of ``calibration_type``, under the
        gate's name); ``uncalibrated`` where it has none."""
        found = variant.calibrations.get(self.name)
        return found if isinstance(found, self.calibration_type) else self.uncalibrated  # type: ignore[return-value]

    def calibration_from_json(self, section: Mapping[str, Any]) -> C:
        """A calibration of this kind from its section of a calibration file (``ValueError`` or
        ``KeyError`` where the section is malformed)."""
        raise NotImplementedError(f"the {self.label} reads no calibration section")

    @abstractmethod
    def params(self, calibration: C, threshold: float | None = None) -> P:
        """The parameters at ``threshold`` (the calibration's default where None; off where it
        has none)."""

    @abstractmethod
    def default_threshold(self, calibration: C) -> float | None: ...

    def forced(self, calibration: C, skips_per_compute: int) -> P | None:
        """Timing only (``bench --forced-skips``): parameters that skip ``skips_per_compute``
        steps after each computed one whatever the weights, where the kind forces its own
        pattern; None where the bench forces it otherwise (TeaCache: a constant polynomial)."""
        return None

    def warmup(self) -> P | None:
        """Parameters that compute, skip and compute over three steps whatever the weights and
        with no calibration (the engine's untimed warm-up, ``warmup_gate``); None where the
        kind has none."""
        return None

    def for_steps_run(self, params: P, steps: int, left_out: int) -> P:
        """``params`` for a run from a picture, which runs only the steps after the first
        ``left_out`` of a ``steps`` schedule (the gate then counts only those). A kind whose rule
        reads the step's place in the schedule (MagCache's table) cuts its numbers there; one
        that reads only the steps that ran (TeaCache, the first-block probe) keeps them."""
        return params

    def threshold_key(self, variant_id: str) -> str:
        """Where the window's settings remember this gate's threshold for a variant."""
        return f"{variant_id}@{self.name}"

    # -- its figures: on a step, in a report, in JSON ------------------------------------------
    def verdict_figures(self, verdict: Verdict) -> dict[str, Figure]:
        """This kind's figures of a step it decided (the live gate's and the simulator's alike):
        ``StepEvent.signals[name]``."""
        return {}

    def step_event(
        self, verdict: Verdict, *, num_steps: int, threshold: float, seconds: float
    ) -> StepEvent:
        """The event of a step this kind decided as ``verdict`` (a simulated step's, say)."""
        return StepEvent(
            verdict.index,
            num_steps,
            verdict.decision,
            threshold=threshold,
            seconds=seconds,
            gate=self.name,
            accumulated=verdict.accumulated,
            signals={self.name: self.verdict_figures(verdict)},
        )

    def figures_to_json(self, figures: Figures) -> dict[str, object]:
        """This kind's section of a step in JSON (``StepEvent.as_dict``)."""
        return {key: figure_to_json(value) for key, value in figures.items()}

    def figures_from_json(self, section: object) -> dict[str, Figure]:
        """``figures_to_json`` read back, leniently."""
        return figures_from_json(section)

    def legacy_figures(
        self, row: Mapping[str, Any], *, deciding: bool, vanilla: bool
    ) -> dict[str, Figure] | None:
        """This kind's section from a step row of a file written before steps had sections (its
        figures were flat keys of the row; ``app.storage.migrate``): ``deciding`` where the row's
        gate was this kind, ``vanilla`` on a vanilla pass's row; None where it held none."""
        return None

    def vanilla_columns(self, steps: Sequence[StepEvent]) -> dict[str, object]:
        """This kind's per-step columns of a vanilla pass in a report's JSON (report.json's keys
        since before steps were written whole); empty where it keeps none."""
        return {}

    def column_figures(self, report: Mapping[str, Any], steps: int) -> list[dict[str, Figure]]:
        """``vanilla_columns`` read back as this kind's figures of each of ``steps`` steps (a
        report without the vanilla steps whole); empty where it keeps none."""
        return []

    def report_fields(self, params: P) -> dict[str, Any]:
        """The parameters a run report records beside the gate's name and threshold
        (``RunReport.gate_fields[name]``)."""
        return {}

    def report_fields_to_json(self, fields: Mapping[str, Any]) -> dict[str, object]:
        return {
            key: list(value) if isinstance(value, tuple) else value for key, value in fields.items()
        }

    def report_fields_from_json(self, section: object) -> dict[str, Any]:
        """``report_fields_to_json`` read back (lists as tuples), leniently."""
        if not isinstance(section, Mapping):
            return {}
        return {
            str(key): tuple(value) if isinstance(value, list) else value
            for key, value in section.items()
        }

    def legacy_report_fields(self, report: Mapping[str, Any]) -> dict[str, Any] | None:
        """This kind's report fields from a report written before they had a section of their
        own (flat keys of the report; ``app.storage.migrate``); None where it held none."""
        return None

    # -- its record of a vanilla pass ----------------------------------------------------------
    def recorder(self, calibration: C | None, *, calibrating: bool = False) -> TapRecorder | None:
        """What this kind records on a vanilla pass (the trace its simulator reads, and with
        ``calibrating`` the data its calibration is measured from), for a variant whose
        calibration for it is ``calibration``; None where it records nothing."""
        return None

    # -- traces and simulation ---------------------------------------------------------------
    @abstractmethod
    def trace(self, steps: Sequence[StepEvent | None]) -> list[T | None]:
        """This kind's signal on a vanilla run's steps (what its simulator reads)."""

    @abstractmethod
    def traced(self, trace: Sequence[T | None]) -> bool:
        """Whether ``trace`` carries what the simulator needs."""

    @abstractmethod
    def simulate(self, params: P, trace: Sequence[T | None]) -> list[Verdict]: ...

    @abstractmethod
    def engagement(self, params: P, trace: Sequence[T | None]) -> Engagement:
        """Where skipping begins on ``trace`` (the onset and its step)."""

    @abstractmethod
    def candidates(self, params: P, trace: Sequence[T | None]) -> list[Candidate]:
        """The simulator's skip patterns on ``trace`` as threshold intervals, in threshold
        order, that skip at least one step (the target search bisects over them)."""

    def engages(self, threshold: float, onset: float | None) -> bool:
        """Whether ``threshold`` skips at least one step where skipping begins at ``onset``."""
        if onset is None:
            return False
        return threshold >= onset if self.skips_at_onset else threshold > onset

    def skipped(self, params: P, trace: Sequence[T | None]) -> int:
        return sum(v.decision is Decision.skipped for v in self.simulate(params, trace))

    def smallest_engaging(self, onset: float) -> float | None:
        """The smallest threshold the entry can hold (``THRESHOLD_DECIMALS``) that skips where
        skipping begins at ``onset``; None above 1."""
        scale = 10**THRESHOLD_DECIMALS
        if self.skips_at_onset:
            value = math.ceil(onset * scale - 1e-6) / scale
        else:
            value = math.floor(onset * scale + 1e-6) / scale
        while not self.engages(value, onset):  # float rounding at the last decimal
            value = round(value + 1 / scale, THRESHOLD_DECIMALS)
        return value if value <= 1.0 else None

    def format_onset(self, onset: float) -> str:
        """An onset at the entry's decimals, rounded to the side that keeps "skipping begins
        above X" (or "at X") true: the entry's value next to it is the first that skips."""
        scale = 10**THRESHOLD_DECIMALS
        if self.skips_at_onset:
            value = math.ceil(onset * scale - 1e-6) / scale
        else:
            value = math.floor(onset * scale + 1e-6) / scale
        return f"{value:.{THRESHOLD_DECIMALS}f}"

    def onset_words(self, onset: float) -> str:
        """Where skipping begins, in the words every view uses: "skipping begins above 0.2765"."""
        where = "at" if self.skips_at_onset else "above"
        return f"skipping begins {where} {self.format_onset(onset)}"

    @abstractmethod
    def live_class(self) -> type[LiveGate]: ...

    def make_live(
        self,
        params: P,
        *,
        on_step: Callable[[StepEvent], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> LiveGate:
        """The live gate for ``params``, writing this kind's figures on each step it decides
        (``verdict_figures``: a gate class need not repeat them)."""
        live = self.live_class()
        return live(params, on_step=on_step, clock=clock, figures=self.verdict_figures)  # type: ignore[call-arg]

    # -- the weight-free schedule check --------------------------------------------------------
    @abstractmethod
    def schedule(self, params: P, steps: int) -> ScheduleFacts: ...

    @abstractmethod
    def no_eligible_reason(self, params: P, steps: int) -> str: ...

    @abstractmethod
    def floor_reason(self, params: P, steps: int, floor: float) -> str:
        """Why ``params.threshold`` at or below (or below) ``floor`` cannot skip a step."""

    @abstractmethod
    def eligible_reason(self, eligible: int, steps: int) -> str: ...

    def calibration_blocks(self, calibration: C, threshold: float) -> str | None:
        """On a distilled schedule: the calibration's own evidence that ``threshold`` cannot
        skip, as a sentence; None where it has none."""
        return None

    def calibration_floor(self, calibration: C, steps: int) -> float | None:
        """The smallest onset the calibration measured at ``steps`` steps, if it records one."""
        return None

    @abstractmethod
    def calibration_says_skips(self, calibration: C, steps: int, threshold: float) -> bool:
        """Whether the calibration is evidence that ``steps`` steps skip at ``threshold``."""

    # -- words -----------------------------------------------------------------------------------
    @property
    def threshold_words(self) -> str:
        """What the threshold means, without the gate's name (the command line's help)."""
        return self.threshold_meaning.removeprefix(f"{self.label}: ")

    @property
    def pass_name(self) -> str:
        return f"{self.label} pass"

    def caption(self, threshold: float | None) -> str:
        """The gated image's name in captions and history rows: "MagCache t=0.02"."""
        return self.label if threshold is None else f"{self.label} t={threshold:.4g}"

    @abstractmethod
    def plot_value(self, step: StepEvent) -> float | None:
        """The gate plot's vanilla series: this kind's comparable value on one vanilla step."""

    @abstractmethod
    def step_lines(self, step: StepEvent, gated: bool) -> list[str]:
        """The timeline tooltip's figures for one step (after its title and decision)."""

    @abstractmethod
    def calibration_lines(self, calibration: C) -> list[str]:
        """Details: the calibration's own figures (a polynomial, a table's recipe)."""

    @abstractmethod
    def provenance_text(self, calibration: C) -> str:
        """Where the calibration's numbers come from, in a few short sentences (Details, the
        calibration box's tooltip)."""

    @abstractmethod
    def calibration_summary(self, calibration: C) -> str:
        """The sidebar's one plain line about the calibration."""

    @abstractmethod
    def threshold_hint(
        self, params: P, steps: int, *, measured: bool = False, onset: float | None = None
    ) -> str:
        """The hint under the threshold: eligible steps, and where skipping begins. ``measured``:
        a vanilla run of this schedule exists, and ``onset`` is where skipping began on it."""


def column(report: Mapping[str, Any], key: str, steps: int) -> list[object]:
    """A report's per-step column (``GateKind.vanilla_columns``), or Nones where it has none of
    that length."""
    values = report.get(key)
    return list(values) if isinstance(values, list) and len(values) == steps else [None] * steps


def format_threshold(value: float) -> str:
    """Thresholds and predicted changes: four significant decimals where values are small."""
    return f"{value:.4f}" if abs(value) < 0.1 else f"{value:.3f}"


def format_figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def inside_open_low(low: float, high: float) -> float | None:
    """A threshold in (low, high] with ``THRESHOLD_DECIMALS`` decimals, near the middle (both
    ends keep a margin for the drift after the first skip), or None where the interval is
    narrower than the entry's precision."""
    scale = 10**THRESHOLD_DECIMALS
    middle = round((low + high) / 2, THRESHOLD_DECIMALS)
    if low < middle <= high:
        return middle
    smallest = math.floor(low * scale + 1) / scale
    return smallest if low < smallest <= high else None


def walk_candidates(
    simulate_at: Callable[[float], list[Verdict]], could_skip: Callable[[Verdict], bool]
) -> list[Candidate]:
    """Every skip pattern of a gate that skips where a computed step's value (its
    ``accumulated``) is below the threshold: the pattern only changes where the threshold passes
    such a value, so walking from one to the next visits each pattern once. ``simulate_at`` runs
    the gate along a trace at a threshold; ``could_skip`` keeps the computed steps the gate could
    have skipped (the values that move the pattern)."""
    found: list[Candidate] = []
    low = 0.0
    while low < 1.0:
        probe = math.nextafter(low, math.inf)
        verdicts = simulate_at(probe)
        above = [
            v.accumulated
            for v in verdicts
            if v.decision is Decision.computed
            and v.accumulated is not None
            and v.accumulated >= probe
            and could_skip(v)
        ]
        high = min(min(above), 1.0) if above else 1.0
        skipped = sum(v.decision is Decision.skipped for v in verdicts)
        if skipped:
            threshold = inside_open_low(low, high)
            if threshold is not None:
                pattern = "".join(v.decision.letter for v in verdicts)
                found.append(Candidate(threshold, low, high, skipped, pattern))
        if not above:
            break
        low = high
    return found


def inside_closed_low(low: float, high: float) -> float | None:
    """A threshold in [low, high) with ``THRESHOLD_DECIMALS`` decimals, near the middle."""
    scale = 10**THRESHOLD_DECIMALS
    middle = round((low + high) / 2, THRESHOLD_DECIMALS)
    if low <= middle < high or (high >= 1.0 and middle == 1.0):
        return middle
    smallest = math.ceil(low * scale) / scale
    return smallest if low <= smallest < high else None
