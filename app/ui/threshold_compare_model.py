"""Compare thresholds: what the comparison view's buttons do, and the state it shows. Qt-free.

``ThresholdComparer`` validates the user's list (one sentence where it is wrong), builds one
frozen ``ThresholdComparison`` from the form and hands it to the engine thread like a Generate;
the engine runs vanilla once and one resumed gated pass per threshold. Entries fill in as
``ComparisonEntryDone`` events arrive; cancel stops the batch and keeps what finished (the worker
saves it to the history as one entry). Picking an entry sets the form's threshold and shows that
result in the main window. A saved comparison reopens here from the history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from app.engine.comparison import (
    MAX_THRESHOLDS,
    MIN_THRESHOLDS,
    ComparisonResult,
    ThresholdComparison,
    default_thresholds,
    format_thresholds,
    parse_thresholds,
)
from app.engine.events import (
    ComparisonEntryDone,
    ComparisonFinished,
    EngineEvent,
    Pass,
    PassStarted,
    RunCancelled,
    RunFailed,
    RunWarning,
    StepDone,
)
from app.engine.request import GenerationRequest, RequestError
from app.gate.kinds import gate_kind
from app.hardware import hardware_label
from app.storage.comparisons import ComparisonRow, load_comparison, same_skips, save_comparison
from app.storage.history import HistoryEntry, HistoryStore, friendly_time
from app.ui.analysis import RunSaved
from app.ui.job_slot import EngineLink, JobSlot, JobStatus

if TYPE_CHECKING:
    from app.ui.availability_model import Availability
    from app.ui.form_model import FormModel
    from app.ui.run_model import RunModel


def comparison_saver(
    store: HistoryStore,
) -> Callable[[ComparisonResult, tuple[dict[str, object], ...]], HistoryEntry]:
    """The worker's ``save_comparison``: one history entry, labelled with the hardware."""

    def save(result: ComparisonResult, warnings: tuple[dict[str, object], ...]) -> HistoryEntry:
        hardware = hardware_label(result.reports[0].versions) if result.reports else ""
        return save_comparison(store, result, hardware=hardware, warnings=warnings)

    return save


class ThresholdComparer:
    """See the module docstring. ``listeners`` are called after every change of state. The
    comparison reads the inputs (``form``) and shows a picked entry on the main window's
    ``run``; ``remember`` saves the inputs it started from (``Session.remember_inputs``)."""

    def __init__(
        self,
        form: FormModel,
        run: RunModel,
        availability: Availability,
        engine: EngineLink,
        *,
        remember: Callable[[str], None],
    ) -> None:
        self.form = form
        self.run = run
        self.availability = availability
        self.remember = remember
        self.slot = JobSlot(engine)
        self.listeners: list[Callable[[], None]] = []
        self.base: GenerationRequest | None = None
        self.thresholds: tuple[float, ...] = ()
        self.rows: list[ComparisonRow | None] = []
        self.vanilla: np.ndarray | None = None
        self.message = ""  # why nothing started, or why the batch stopped early
        self.warnings: list[str] = []
        self.progress = ""
        self.saved_entry: str | None = None
        self.hardware = ""
        self.origin = ""  # "" for a comparison run now; "from history, …" for a reopened one
        # The entry made current (picked here, or the one the History opened in the main window)
        # with the report the main window showed then: current while it still shows that one.
        self._current: tuple[int, object] | None = None

    @property
    def status(self) -> JobStatus:
        return self.slot.status

    @status.setter
    def status(self, value: JobStatus) -> None:
        self.slot.status = value

    @property
    def run_id(self) -> int | None:
        return self.slot.run_id

    # -- actions -----------------------------------------------------------------------------------
    def default_text(self) -> str:
        """Thresholds around the form's, spread where the last vanilla run of this schedule
        changes the skip count (the simulator), else multiples of it."""
        form, run = self.form, self.run
        trace = None
        try:
            current = form.request()
        except RequestError:
            current = None
        shown = run.request
        if current is not None and shown is not None:
            complete = run.vanilla_steps and all(s is not None for s in run.vanilla_steps)
            if shown.vanilla_key() == current.vanilla_key() and complete:
                trace = gate_kind(form.gate).trace(run.vanilla_steps)
        steps = current.active_steps if current is not None else int(form.steps)
        values = default_thresholds(
            form.variant, steps, trace, around=float(form.threshold), gate=form.gate
        )
        return format_thresholds(values)

    def start(self, text: str) -> int | None:
        """Start a comparison of the thresholds in ``text`` with the form's other inputs; returns
        the run id, or None with ``message`` saying why in one sentence."""
        if self.slot.engine.busy:
            return self._refuse("wait for the current run to finish")
        try:
            thresholds = parse_thresholds(text)
            base = self.form.request()
            comparison = ThresholdComparison(base, thresholds)
        except RequestError as exc:
            return self._refuse(str(exc))
        if not self.availability.is_available(base.variant_id):
            return self._refuse(f"{base.variant.display_name} is not downloaded yet")
        run_id = self.slot.submit(comparison)
        if run_id is None:
            return self._refuse("wait for the current run to finish")
        self.remember(base.prompt)
        self.status = JobStatus.running
        self.base = base
        self.thresholds = comparison.thresholds
        self.rows = [None] * len(thresholds)
        self.vanilla = None
        self.message = ""
        self.warnings = []
        self.progress = "Starting…"
        self.saved_entry = None
        self.hardware = ""
        self.origin = ""
        self._current = None
        self._changed()
        return run_id

    def cancel(self) -> bool:
        if not self.slot.cancel():
            return False
        self.progress = "Cancelling… the finished entries are kept"
        self._changed()
        return True

    def pick(self, index: int) -> bool:
        """Make entry ``index`` the current threshold: the form takes the comparison's inputs
        with its threshold, and the main window shows its result."""
        row = self.rows[index] if 0 <= index < len(self.rows) else None
        if row is None or self.base is None:
            return False
        if self.run.busy:
            self.message = "wait for the current run to finish before picking an entry"
            self._changed()
            return False
        self.form.apply_request(replace(self.base, threshold=row.threshold))
        if row.report is not None:
            where = self.origin or "this comparison"
            self.run.show(row.report, f"{where}, t={row.threshold:g}")
        self._current = (index, self.run.report)
        self._changed()
        return True

    def open_entry(self, entry: HistoryEntry) -> bool:
        """Show a saved comparison. Refused while a comparison runs."""
        if self.status.busy:
            self.message = "wait for the comparison to finish before opening another"
            self._changed()
            return False
        try:
            saved = load_comparison(entry)
        except (OSError, ValueError) as exc:
            self.message = f"could not open the saved comparison: {exc}"
            self._changed()
            return False
        self.status = JobStatus.opened
        self.slot.run_id = None
        self.base = entry.to_request()
        self.thresholds = saved.thresholds
        self.rows = [*saved.rows, *([None] * max(0, len(saved.thresholds) - len(saved.rows)))]
        self.vanilla = saved.vanilla
        self.message = saved.failure or ""
        self.warnings = []
        self.saved_entry = str(entry.folder)
        self.hardware = saved.hardware
        self.origin = f"the comparison of {friendly_time(entry.created)}"
        self.progress = _finished_text(len(saved.rows), len(saved.thresholds), saved.cancelled)
        self.warnings = list(entry.warning_messages)  # its notes, as when it ran
        shown = self._shown_index(entry)
        self._current = None if shown is None else (shown, self.run.report)
        self._changed()
        return True

    @property
    def picked(self) -> int | None:
        """The entry whose result the main window shows (its tile reads "✓ current"): the one
        picked here or opened from the History, until the main window shows another result (a
        Generate, another run reopened). A view redraws on the run's ``report_changed``."""
        if self._current is None:
            return None
        index, shown = self._current
        return index if self.run.report is shown else None

    def _shown_index(self, entry: HistoryEntry) -> int | None:
        """The entry the main window shows where it shows this comparison (the History opens
        its run there first): that one is the current one."""
        run = self.run
        if run.saved_entry != str(entry.folder) or run.request is None:
            return None
        threshold = run.request.threshold
        return next(
            (i for i, r in enumerate(self.rows) if r is not None and r.threshold == threshold),
            None,
        )

    # -- what the view reads -----------------------------------------------------------------------
    def same_skips(self) -> dict[int, int]:
        """Entry → the earlier entry that skipped exactly the same steps (the same image)."""
        rows = [r if r is not None else _EMPTY for r in self.rows]
        return same_skips(rows)

    def _gate_label(self) -> str:
        """The gate the comparison runs (its base request's)."""
        gate = self.base.gate if self.base is not None else self.form.gate
        return gate_kind(gate).label

    def limits_text(self) -> str:
        return f"{MIN_THRESHOLDS}–{MAX_THRESHOLDS} values between 0 and 1, separated by commas"

    def hint_text(self) -> str:
        """The view's line under the thresholds: how a comparison runs, naming its gate."""
        return (
            f"{self.limits_text()}. Vanilla runs once; each threshold's {self._gate_label()} pass "
            "resumes from it. Scroll to zoom and drag to pan (all images move together); click an "
            "image to make its threshold the current one."
        )

    # -- engine events -----------------------------------------------------------------------------
    def handle_event(self, event: EngineEvent | RunSaved | object) -> None:
        if not self.slot.owns(event):
            return
        match event:
            case PassStarted():
                index = self._running_index()
                what = "vanilla" if event.which is Pass.vanilla else self._gate_label()
                if event.cached:
                    self.progress = f"{self._entry_label(index)} · vanilla from the cache"
                else:
                    self.progress = f"{self._entry_label(index)} · {what} pass"
            case StepDone():
                index = self._running_index()
                what = "vanilla" if event.which is Pass.vanilla else self._gate_label()
                step = event.step
                self.progress = (
                    f"{self._entry_label(index)} · {what} step {step.index + 1} of {step.num_steps}"
                )
                if self.status is JobStatus.cancelling:
                    self.progress = "Cancelling… the finished entries are kept"
            case ComparisonEntryDone():
                if 0 <= event.index < len(self.rows):
                    self.rows[event.index] = ComparisonRow.from_report(event.report)
                vanilla = event.report.vanilla
                if vanilla is not None:
                    self.vanilla = vanilla.image
                if not self.hardware:
                    self.hardware = hardware_label(event.report.versions)
            case ComparisonFinished():
                self._finish(event.result)
            case RunWarning():
                if event.message not in self.warnings:
                    self.warnings.append(event.message)
            case RunSaved():
                self.saved_entry = event.folder
            case RunCancelled():
                self.status = JobStatus.cancelled
                self.progress = "Cancelled before any threshold finished"
            case RunFailed():
                self.status = JobStatus.failed
                self.message = event.message
                self.progress = "Failed"
            case _:
                return
        self._changed()

    # -- internals ---------------------------------------------------------------------------------
    def _finish(self, result: ComparisonResult) -> None:
        done = len(result.reports)
        if result.failure is not None:
            self.status = JobStatus.failed
            self.message = result.failure
        elif result.cancelled:
            self.status = JobStatus.cancelled
        else:
            self.status = JobStatus.finished
        self.progress = _finished_text(done, len(self.thresholds), result.cancelled)

    def _running_index(self) -> int:
        return next((i for i, row in enumerate(self.rows) if row is None), len(self.rows) - 1)

    def _entry_label(self, index: int) -> str:
        if not self.thresholds:
            return ""
        return f"t={self.thresholds[index]:g} ({index + 1} of {len(self.thresholds)})"

    def _refuse(self, message: str) -> None:
        self.message = message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")
        self._changed()
        return None

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()


_EMPTY = ComparisonRow(0.0, None, None, 0, None, None, None, None, "")


def _finished_text(done: int, total: int, cancelled: bool) -> str:
    if done == total:
        return f"Finished · {total} thresholds"
    stopped = "cancelled" if cancelled else "stopped"
    return f"{done} of {total} thresholds finished · {stopped}; the finished ones are kept"
