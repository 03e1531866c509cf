"""A threshold comparison in the history: one entry, reopened as a comparison.

The entry is an ordinary history folder (so older builds and the side-by-side export still read
it, as the run at the threshold the user had): ``gated.png`` and ``vanilla.png`` are that run's,
and ``run.json`` gains ``"kind": "comparison"`` and a ``comparison`` object with one row per
finished threshold (threshold, skips, SSIM, times, the speedup and its label, the full report)
whose image is ``compare-<i>.png``. Written through ``HistoryStore.save``: one atomic rename.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from app.engine.comparison import ComparisonResult
from app.engine.report import RunReport
from app.storage.history import HistoryEntry, HistoryStore, RunRecord, encode_png

KIND = "comparison"


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
    record = RunRecord.from_report(result.reports[shown], warnings)
    rows = [ComparisonRow.from_report(r) for r in result.reports]
    files = {image_name(i): encode_png(r.gated.image, r) for i, r in enumerate(result.reports)}
    same = same_skips(rows)
    table = []
    for i, (row, report) in enumerate(zip(rows, result.reports, strict=True)):
        data = row.to_json(image_name(i))
        data["same_skips_as"] = same.get(i)
        data["report"] = report.to_json()
        table.append(data)
    meta = {
        "kind": KIND,
        "comparison": {
            "thresholds": list(result.comparison.thresholds),
            "base_threshold": result.comparison.base.threshold,
            "shown": shown,
            "cancelled": result.cancelled,
            "failure": result.failure,
            "hardware": hardware,
            "entries": table,
        },
    }
    return store.save(record, extra_files=files, extra_meta=meta)


def is_comparison(entry: HistoryEntry) -> bool:
    return entry.meta.get("kind") == KIND and isinstance(entry.meta.get("comparison"), dict)


def load_comparison(entry: HistoryEntry) -> SavedComparison:
    """Read a comparison entry back with its images; ``ValueError`` or ``OSError`` where the
    folder is damaged (one sentence)."""
    data = entry.meta.get("comparison")
    if not is_comparison(entry) or not isinstance(data, dict):
        raise ValueError("this history entry is not a threshold comparison")
    raw_rows = data.get("entries")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise ValueError("the comparison lists no entries")
    _, vanilla = entry.load_images()
    rows = tuple(_row(raw, entry, vanilla) for raw in raw_rows)
    thresholds = data.get("thresholds")
    asked = (
        tuple(float(t) for t in thresholds if _number(t))
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


def _row(raw: Any, entry: HistoryEntry, vanilla: np.ndarray | None) -> ComparisonRow:
    if not isinstance(raw, dict) or not _number(raw.get("threshold")):
        raise ValueError("a comparison entry has no threshold")
    name = raw.get("image")
    if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError("a comparison entry names no image")
    image = _read_png(entry.folder / name)
    data = raw.get("report")
    if isinstance(data, dict):
        try:
            report = RunReport.from_json(
                data,
                gated_image=image,
                vanilla_image=vanilla,
                vanilla_steps=entry.step_events("vanilla"),
            )
        except ValueError:
            pass  # an incomplete report: the row's own figures below
        else:
            return ComparisonRow.from_report(report)
    steps = raw.get("steps")
    return ComparisonRow(
        threshold=float(raw["threshold"]),
        image=image,
        skips=_int(raw.get("skips")),
        steps=int(steps) if isinstance(steps, int) else entry.steps,
        ssim=_float(raw.get("ssim")),
        gated_seconds=_float(raw.get("gated_seconds")),
        vanilla_seconds=_float(raw.get("vanilla_seconds")),
        speedup=_float(raw.get("speedup")),
        speedup_label=str(raw.get("speedup_label") or ""),
        resumed_from=_int(raw.get("resumed_from")),
        pattern=str(raw.get("pattern") or ""),
    )


def _read_png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _float(value: object) -> float | None:
    return float(value) if _number(value) else None  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
