"""A threshold comparison in the history: one entry, reopened as a comparison.

The entry is an ordinary history folder (``app.storage.history``), read as one run wherever a run
is read (the History list, the side-by-side export, reopening it in the window): its report,
``gated.png`` and ``vanilla.png`` are the run at the threshold the user had (``representative``).
run.json gains a ``comparison`` object: the thresholds asked for, whether the comparison was
cancelled or failed, the hardware, and one row per finished threshold, which is its image
(``compare-<i>.png``) and its report (``RunReport.to_json``; the shown row's is the entry's own
report, not written twice). Every figure a row shows is its report's. Written through
``HistoryStore.save``: one atomic rename.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.engine.comparison import ComparisonResult
from app.engine.report import RunReport
from app.fileio.jsonio import json_float, json_int
from app.storage.export import png_bytes, report_metadata
from app.storage.history import HistoryEntry, HistoryStore, read_png


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One threshold's result as the comparison view and the history see it."""

    threshold: float
    image: np.ndarray | None
    skips: int | None
    steps: int
    ssim: float | None
    gated_seconds: float | None
    vanilla_seconds: float | None
    speedup: float | None
    speedup_label: str
    resumed_from: int | None = None
    pattern: str = ""
    report: RunReport | None = None  # for showing it as the current run

    @classmethod
    def from_report(cls, report: RunReport) -> ComparisonRow:
        vanilla = report.vanilla
        return cls(
            threshold=report.request.threshold,
            image=report.gated.image,
            skips=report.gated.skipped,
            steps=len(report.gated.steps),
            ssim=report.ssim,
            gated_seconds=report.gated.loop_seconds,
            vanilla_seconds=vanilla.loop_seconds if vanilla is not None else None,
            speedup=report.speedup,
            speedup_label=report.speedup_label,
            resumed_from=report.gated.resumed_from,
            pattern=report.gated.pattern,
            report=report,
        )

    @property
    def local_diff(self) -> float | None:
        """The worst window's mean difference (0–1) of its report; None without one."""
        return self.report.local_diff_value if self.report is not None else None

    @property
    def ssimulacra2(self) -> float | None:
        """SSIMULACRA2 against vanilla of its report; None without one."""
        return self.report.ssimulacra2 if self.report is not None else None

    def to_json(self, image_file: str) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            "image": image_file,
            "skips": self.skips,
            "steps": self.steps,
            "pattern": self.pattern,
            "ssim": self.ssim,
            "gated_seconds": self.gated_seconds,
            "vanilla_seconds": self.vanilla_seconds,
            "speedup": self.speedup,
            "speedup_label": self.speedup_label,
            "resumed_from": self.resumed_from,
        }


@dataclass(frozen=True, slots=True)
class SavedComparison:
    """A comparison read back from the history."""

    entry: HistoryEntry
    rows: tuple[ComparisonRow, ...]
    thresholds: tuple[float, ...]  # every threshold asked for (rows may be fewer: cancelled)
    cancelled: bool
    failure: str | None
    hardware: str
    vanilla: np.ndarray | None


def image_name(index: int) -> str:
    return f"compare-{index}.png"


def representative(result: ComparisonResult) -> int:
    """The entry shown where a comparison is read as one run: the user's threshold, or the one
    nearest it."""
    base = result.comparison.base.threshold
    thresholds = [r.request.threshold for r in result.reports]
    return min(range(len(thresholds)), key=lambda i: abs(thresholds[i] - base))


def save_comparison(
    store: HistoryStore,
    result: ComparisonResult,
    *,
    hardware: str,
    warnings: tuple[dict[str, object], ...] = (),
) -> HistoryEntry:
    """One history entry for the finished entries of ``result`` (at least one)."""
    if not result.reports:
        raise ValueError("a comparison with no finished entry is not saved")
    shown = representative(result)
    files = {
        image_name(i): png_bytes(r.gated.image, report_metadata(r))
        for i, r in enumerate(result.reports)
    }
    rows: list[dict[str, object]] = [
        {"image": image_name(i)} if i == shown else {"image": image_name(i), "report": r.to_json()}
        for i, r in enumerate(result.reports)
    ]
    table = {
        "thresholds": list(result.comparison.thresholds),
        "base_threshold": result.comparison.base.threshold,
        "shown": shown,
        "cancelled": result.cancelled,
        "failure": result.failure,
        "hardware": hardware,
        "entries": rows,
    }
    return store.save(result.reports[shown], warnings, extra_files=files, comparison=table)


def is_comparison(entry: HistoryEntry) -> bool:
    return entry.comparison is not None


def load_comparison(entry: HistoryEntry) -> SavedComparison:
    """Read a comparison entry back with its images; ``ValueError`` or ``OSError`` where the
    folder is damaged (one sentence)."""
    data = entry.comparison
    if data is None:
        raise ValueError("this history entry is not a threshold comparison")
    raw_rows = data.get("entries")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise ValueError("the comparison lists no entries")
    _, vanilla = entry.load_images()
    shown = json_int(data.get("shown"))
    rows = tuple(_row(raw, entry, vanilla, i == shown) for i, raw in enumerate(raw_rows))
    thresholds = data.get("thresholds")
    asked = (
        tuple(t for t in map(json_float, thresholds) if t is not None)
        if isinstance(thresholds, list)
        else tuple(r.threshold for r in rows)
    )
    failure = data.get("failure")
    return SavedComparison(
        entry=entry,
        rows=rows,
        thresholds=asked,
        cancelled=data.get("cancelled") is True,
        failure=failure if isinstance(failure, str) else None,
        hardware=str(data.get("hardware", "")),
        vanilla=vanilla,
    )


def same_skips(rows: Sequence[ComparisonRow]) -> dict[int, int]:
    """Row index → the first earlier row that skipped exactly the same steps."""
    first: dict[str, int] = {}
    same: dict[int, int] = {}
    for i, row in enumerate(rows):
        if not row.pattern:
            continue
        if row.pattern in first:
            same[i] = first[row.pattern]
        else:
            first[row.pattern] = i
    return same


def _row(raw: Any, entry: HistoryEntry, vanilla: np.ndarray | None, shown: bool) -> ComparisonRow:
    if not isinstance(raw, Mapping):
        raise ValueError("a comparison entry is malformed")
    name = raw.get("image")
    if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError("a comparison entry names no image")
    data = raw.get("report", entry.report_json if shown else None)
    if not isinstance(data, Mapping):
        raise ValueError("a comparison entry has no report")
    image = read_png(entry.folder / name)
    return ComparisonRow.from_report(
        RunReport.from_json(data, gated_image=image, vanilla_image=vanilla)
    )
