"""The banners above the result and what their buttons do. Qt-free.

``Notices.notices`` puts them in one order: the run's error, the schedule banner (the gate advice's,
in the picked gate's numbers), the memory banner, the run's own notes, then the notes of this
session (settings partly reset, a model folder refused). A dismissed schedule or memory banner
stays away until a new run starts (``run_starting``) or another model is picked
(``variant_selected``): ``Studio.build`` connects both to the session. A banner's fix
(``BannerFix``) sets the inputs, picks a variant through the session or starts a download.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from app.ui.analysis import BannerFix, FixKind, Notice, NoticeKind
from app.ui.quantize_model import MEMORY_NOTICE, memory_notice

if TYPE_CHECKING:
    from app.ui.availability_model import Availability
    from app.ui.form_model import FormModel
    from app.ui.gate_advice_model import GateAdvice
    from app.ui.run_model import RunModel

SCHEDULE_NOTICE = "schedule"


class Notices:
    """See the module docstring. ``select_variant`` is the session's (refused while a run goes);
    ``warnings`` are the settings file's (each one banner)."""

    def __init__(
        self,
        form: FormModel,
        run: RunModel,
        advice: GateAdvice,
        availability: Availability,
        *,
        select_variant: Callable[[str], bool],
        warnings: Sequence[str] = (),
    ) -> None:
        self.form = form
        self.run = run
        self.advice = advice
        self.availability = availability
        self.select_variant = select_variant
        self._dismissed: set[str] = set()
        self.startup_notices: list[Notice] = [
            Notice(NoticeKind.info, "Settings were partly reset", w, key=f"settings-{i}")
            for i, w in enumerate(warnings)
        ]

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
        schedule = self.advice.schedule_notice()
        if schedule is not None:
            found.append(schedule)
        memory = self.memory_notice()
        if memory is not None:
            found.append(memory)
        found.extend(self.run.notices)
        found.extend(self.startup_notices)
        return tuple(n for n in found if n.key not in self._dismissed)

    def put(self, notice: Notice) -> None:
        """Show a note of this session (it replaces an earlier one with its key)."""
        self.startup_notices = [n for n in self.startup_notices if n.key != notice.key]
        self.startup_notices.append(notice)

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
                self.availability.download_current()
            case FixKind.quantize:
                self.form.quantize = fix.quantize
        self._dismissed.discard(SCHEDULE_NOTICE)

    def download_failed(self, message: str) -> None:
        self.run.error = Notice(NoticeKind.error, "Download failed", message, key="error")

    # -- told by the session (``Studio.build`` connects them) ----------------------------------
    def run_starting(self) -> None:
        """A new run: every dismissed banner may return."""
        self._dismissed.clear()

    def variant_selected(self) -> None:
        """Another model: its schedule and memory banners are new ones."""
        self._dismissed.discard(SCHEDULE_NOTICE)
        self._dismissed.discard(MEMORY_NOTICE)
