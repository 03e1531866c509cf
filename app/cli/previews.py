"""Which step previews ``generate --previews`` writes: each pass's thumbnails by step index, and
with ``--target-ssim`` the gated ones of the chosen threshold's pass only (a search runs several
gated passes; mixing their steps would show frames no single run produced)."""

from __future__ import annotations

import numpy as np

from app.engine import events as ev
from app.engine.report import RunReport


class PreviewCollector:
    """Fed every event of one run; ``chosen`` gives the previews of the reported passes."""

    def __init__(self) -> None:
        self.vanilla: dict[int, np.ndarray] = {}  # one vanilla, re-sent from the cache per pass
        self.gated: dict[int, np.ndarray] = {}  # the gated pass now running
        self.gated_by_probe: dict[int, dict[int, np.ndarray]] = {}

    def on_event(self, event: object) -> None:
        if isinstance(event, ev.PassStarted) and event.which is ev.Pass.gated:
            self.gated = {}
        elif isinstance(event, ev.StepPreview):
            target = self.vanilla if event.which is ev.Pass.vanilla else self.gated
            target[event.index] = event.image
        elif isinstance(event, ev.TargetProbed):  # the gated pass just finished was this probe's
            self.gated_by_probe[event.index] = self.gated

    def chosen(self, report: RunReport) -> dict[str, dict[int, np.ndarray]]:
        """The vanilla previews and the gated ones of ``report``'s pass: with a target search,
        the chosen threshold's probe (the search re-shows that pass without re-sending steps)."""
        gated = self.gated
        search = report.target_search
        if search is not None:
            picked = [
                i for i, p in enumerate(search.probes) if p.threshold == search.chosen_threshold
            ]
            gated = self.gated_by_probe.get(picked[-1], {}) if picked else {}
        return {"vanilla": self.vanilla, "gated": gated}
