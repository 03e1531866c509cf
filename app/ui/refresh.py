"""The window's refresh cadence: how often the result side repaints while a run is going.

A refresh is asked for by name ("plot", "timeline", "previews", "stats", "status") and runs its
callback later, coalesced: at most one per frame interval while a run is going (a software-rendered
plot costs milliseconds per paint), at once otherwise. The plot, the timeline and the live previews
keep a slower cadence of their own during a run (``SLOW_REFRESHES``); numbers go at frame rate.
Whoever waits for a run's end calls ``flush`` and sees the final state at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QTimer

FRAME_INTERVAL_MS = 100  # number and progress refresh cadence during a run
# The gate plot's cadence during a run. A software-rendered pyqtgraph repaint (axes included) costs
# the GUI thread several milliseconds, on the cores and under the GIL the engine thread's timed
# steps need: lab.bench.window_timing measures the window's step time against the command line's.
RUN_PLOT_INTERVAL_MS = 500
# The step timeline's cadence during a run, for the same reason: a repaint per step (about ten a
# second on the demo) runs inside the engine's timed steps. Filled in live at this cadence; the
# final state is painted at once when the run ends (and at once whenever no run is going).
RUN_TIMELINE_INTERVAL_MS = 500
# Live step previews in the image panes, at the timeline's cadence (an image upload per step
# would cost the GUI thread as a repaint does).
SLOW_REFRESHES = {
    "plot": RUN_PLOT_INTERVAL_MS,
    "timeline": RUN_TIMELINE_INTERVAL_MS,
    "previews": RUN_TIMELINE_INTERVAL_MS,
}


class RefreshScheduler(QObject):
    """Coalesces the named refreshes in ``refreshers`` (run in their order); ``busy`` says
    whether a run is going (the run cadence applies only then)."""

    def __init__(
        self,
        busy: Callable[[], bool],
        refreshers: Mapping[str, Callable[[], None]],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._busy = busy
        self._refreshers = dict(refreshers)
        self._pending: set[str] = set()
        self._refreshed_at: dict[str, float] = {}  # time.monotonic() of each slow refresh
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.flush)

    def schedule(self, what: str) -> None:
        self._pending.add(what)
        if not self._timer.isActive():
            self._timer.start(FRAME_INTERVAL_MS if self._busy() else 0)

    def now(self, what: str) -> None:
        """Refresh ``what`` at once (dropping a pending one)."""
        self._pending.discard(what)
        self._refreshers[what]()

    def flush(self, *also: str) -> None:
        """Run what is due (and ``also``); a slow refresh not yet due during a run waits for its
        cadence."""
        self._timer.stop()
        pending, self._pending = self._pending | set(also), set()
        busy = self._busy()
        for what, interval_ms in SLOW_REFRESHES.items():
            if what not in pending or not busy:
                continue
            wait_ms = interval_ms - 1000 * (time.monotonic() - self._refreshed_at.get(what, 0.0))
            if wait_ms > 0:
                pending.discard(what)
                self._pending.add(what)
                self._timer.start(min(FRAME_INTERVAL_MS, math.ceil(wait_ms)))
        for what, refresh in self._refreshers.items():
            if what in pending:
                if what in SLOW_REFRESHES:
                    self._refreshed_at[what] = time.monotonic()
                refresh()

    def stop(self) -> None:
        self._timer.stop()
