"""Every finished run, saved under ``app.paths.history_dir()``.

One folder per run holds ``gated.png``, ``vanilla.png`` (when a vanilla pass exists),
``input-<i>.png`` for each picture a run started from (as the model saw it: oriented and at the
run's size; the report records the original file's path and SHA-256) and ``run.json``:
``{format, id, created, warnings, versions, report}``, where ``report`` is the run's
``RunReport.to_json`` (written once: its one serialisation), ``warnings`` the notes the run gave
and ``versions`` the software that made it. A threshold comparison adds its table
(``app.storage.comparisons``). A run is written into a hidden temporary folder that is renamed
into place when complete, so the history never shows half an entry.

Older run.json files are upgraded as they are read (``app.storage.migrate``, the one place that
knows them) and never rewritten. Listing skips any folder that cannot be read back, with one
sentence in ``HistoryStore.warnings``, and leaves it on disk as it is. The captioned export and
every PNG's text chunks are ``app.storage.export``'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from app import paths
from app.engine.report import RunReport, replayed_steps, request_from_json, steps_from_json
from app.engine.request import GenerationRequest, RequestError, make_request
from app.fileio.atomic import atomic_write_bytes, atomic_write_text
from app.fileio.jsonio import dumps_json, json_float, json_int, json_str
from app.gate.kinds import DEFAULT_GATE
from app.storage.export import png_bytes, report_metadata
from app.storage.migrate import CURRENT_FORMAT, upgrade

log = logging.getLogger(__name__)

HISTORY_FORMAT = CURRENT_FORMAT
META_FILE = "run.json"
GATED_FILE = "gated.png"
VANILLA_FILE = "vanilla.png"
INPUT_FILE = "input-{index}.png"

SavedWarning = Mapping[str, Any]  # {"kind", "message", "details"}: one RunWarning as saved


@dataclass(frozen=True)
class HistoryEntry:
    """One saved run as read back from disk: its id and folder, when it ran, its report (run.json's
    report object, upgraded where an older build wrote it) and the notes it gave. Everything else
    is derived from those: the run's figures are its ``report``'s (``RunReport.from_json``, with
    the images saved beside it), never copied; only the speedup with its label stays as it was
    saved (the rules of the build that saved it; this build's are its report's)."""

    id: str
    folder: Path
    created: str
    report_json: Mapping[str, Any]
    warnings: tuple[SavedWarning, ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict)
    comparison: Mapping[str, Any] | None = None  # a threshold comparison's table

    @cached_property
    def request(self) -> GenerationRequest:
        """The request as it ran (from the report, without reading the images)."""
        return request_from_json(self.report_json)

    @property
    def report(self) -> RunReport:
        """The run as the engine reported it (read once; the images are decoded here).
        ``ValueError`` or ``OSError`` where the folder is damaged."""
        return self._report

    @cached_property
    def _report(self) -> RunReport:
        vanilla_path = self.vanilla_path
        return RunReport.from_json(
            self.report_json,
            gated_image=read_png(self.gated_path),
            vanilla_image=read_png(vanilla_path) if vanilla_path is not None else None,
        )

    @property
    def warning_messages(self) -> tuple[str, ...]:
        """The notes the run (or comparison) gave, as saved."""
        return tuple(w["message"] for w in self.warnings if isinstance(w.get("message"), str))

    @property
    def speedup(self) -> float | None:
        """As saved, with its label (``speedup_label``): a figure and its label are one record,
        made under the rules of the build that saved it. For an entry saved by this build they
        are its report's."""
        return json_float(self.report_json.get("speedup"))

    @property
    def speedup_label(self) -> str:
        """As saved (``app.storage.migrate`` derived it for files from before labels)."""
        return json_str(self.report_json.get("speedup_label")) or ""

    @property
    def speedup_estimated(self) -> bool:
        """Gated steps were replayed from vanilla, or the figure was re-timed."""
        resumed_from = json_int(self.report_json.get("resumed_from_step"))
        replayed = replayed_steps(resumed_from, self.request.steps)
        estimate = self.speedup_label.startswith(("estimate", "re-timed"))
        return self.speedup is not None and (replayed > 0 or estimate)

    @property
    def gated_path(self) -> Path:
        return self.folder / GATED_FILE

    @property
    def vanilla_path(self) -> Path | None:
        path = self.folder / VANILLA_FILE
        return path if path.exists() else None

    def input_pictures(self) -> tuple[Path, ...]:
        """The pictures the run started from, to show and to run again: each original file
        where it still holds the recorded bytes (its SHA-256), else the copy saved with the run;
        a picture with neither is left out."""
        found = []
        for index, image in enumerate(self.request.images):
            original = Path(image.path)
            saved = self.folder / INPUT_FILE.format(index=index)
            if _sha256(original) == image.sha256:
                found.append(original)
            elif saved.is_file():
                found.append(saved)
        return tuple(found)

    def load_images(self) -> tuple[np.ndarray, np.ndarray | None]:
        report = self.report
        return report.gated.image, (report.vanilla.image if report.vanilla is not None else None)

    def to_request(self) -> GenerationRequest | None:
        """The request that reproduces this run, checked again as new input: None if the
        variant (or a LoRA file) no longer exists."""
        data, recorded = self.report_json, self.request
        pictures = self.input_pictures() if recorded.images else ()
        try:
            return make_request(
                recorded.variant_id,
                recorded.prompt,
                seed=recorded.seed,
                steps=recorded.steps,
                threshold=recorded.threshold,
                size=(recorded.width, recorded.height),
                guidance=recorded.guidance,
                quantize=recorded.quantize,
                model_path=recorded.model_path,
                compare_vanilla=json_float(data.get("vanilla_seconds")) is not None,
                loras=recorded.loras,
                gate=str(data.get("gate") or DEFAULT_GATE),  # as written: a gate gone refuses
                fill=recorded.fill,  # read leniently: a fill this version lacks reads as reuse
                images=pictures,
                strength=recorded.strength if pictures else None,
            )
        except (RequestError, TypeError, ValueError):
            return None


class HistoryStore:
    """Saves, lists and deletes runs. ``warnings`` holds what the last ``entries()`` skipped."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else paths.history_dir()
        self.warnings: list[str] = []

    def save(
        self,
        report: RunReport,
        warnings: Sequence[SavedWarning] = (),
        *,
        created: datetime | None = None,
        extra_files: Mapping[str, bytes] | None = None,
        comparison: Mapping[str, object] | None = None,
    ) -> HistoryEntry:
        """``report`` with the notes the run gave. ``extra_files`` and ``comparison`` (a
        comparison's images and table) land in the same folder and run.json, in the same one
        rename."""
        created = created or datetime.now().astimezone()
        self.root.mkdir(parents=True, exist_ok=True)
        entry_id = _entry_id(report.request, created)
        staging = self.root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            png_metadata = report_metadata(report)
            atomic_write_bytes(staging / GATED_FILE, png_bytes(report.gated.image, png_metadata))
            if report.vanilla is not None:
                vanilla = png_bytes(report.vanilla.image, png_metadata)
                atomic_write_bytes(staging / VANILLA_FILE, vanilla)
            for index, image in enumerate(report.request.images):
                picture = input_png(Path(image.path), (report.request.width, report.request.height))
                if picture is not None:
                    atomic_write_bytes(staging / INPUT_FILE.format(index=index), picture)
            for name, data in (extra_files or {}).items():
                atomic_write_bytes(staging / name, data)
            meta: dict[str, object] = {
                "format": HISTORY_FORMAT,
                "id": entry_id,
                "created": created.isoformat(timespec="seconds"),
                "warnings": list(warnings),
                "versions": collect_versions(),
                "report": report.to_json(),
            }
            if comparison is not None:
                meta["comparison"] = comparison
            text = dumps_json(meta, indent=2, default=_jsonable)
            atomic_write_text(staging / META_FILE, text)
            final = self.root / entry_id
            while final.exists():  # two runs in the same microsecond: keep both
                final = self.root / f"{entry_id}-{uuid.uuid4().hex[:4]}"
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return _entry(final, json.loads(text))

    def entries(self) -> list[HistoryEntry]:
        """Newest first; unreadable folders are skipped with a warning (and left as they are)."""
        self.warnings = []
        if not self.root.is_dir():
            return []
        found = []
        for folder in sorted(self.root.iterdir(), reverse=True):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            entry = self._read(folder)
            if entry is not None:
                found.append(entry)
        return found

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self.entries())

    def get(self, entry_id: str) -> HistoryEntry | None:
        folder = self.root / entry_id
        return self._read(folder) if folder.is_dir() else None

    def delete(self, entry: HistoryEntry) -> None:
        shutil.rmtree(entry.folder)

    def _read(self, folder: Path) -> HistoryEntry | None:
        try:
            meta = upgrade(json.loads((folder / META_FILE).read_text(encoding="utf-8")))
            entry = _entry(folder, meta)
            if not (folder / GATED_FILE).is_file():
                raise ValueError(f"{GATED_FILE} is missing")
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            warning = f"history entry {folder.name} skipped: {exc}"
            log.warning("%s", warning)
            self.warnings.append(warning)
            return None
        return entry


def _entry(folder: Path, meta: Mapping[str, Any]) -> HistoryEntry:
    """The entry a format-``HISTORY_FORMAT`` run.json describes; ``ValueError`` (one sentence)
    where its report does not record the run (its request and its steps)."""
    report = meta.get("report")
    if not isinstance(report, dict):
        raise ValueError("the report is missing")
    request_from_json(report)
    steps_from_json(report)
    if "vanilla_steps_detail" in report:
        steps_from_json(report, "vanilla_steps_detail")
    warnings, versions = meta.get("warnings"), meta.get("versions")
    comparison = meta.get("comparison")
    return HistoryEntry(
        id=folder.name,
        folder=folder,
        created=str(meta.get("created") or ""),
        report_json=report,
        warnings=tuple(w for w in warnings if isinstance(w, dict))
        if isinstance(warnings, list)
        else (),
        versions=versions if isinstance(versions, dict) else {},
        comparison=comparison if isinstance(comparison, dict) else None,
    )


def friendly_time(created: str) -> str:
    """``2026-11-30T01:23:54+00:00`` → ``30 Nov 2026, 01:23``."""
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return created
    return f"{when.day} {when:%b %Y, %H:%M}"


def history_origin(created: str, now: datetime | None = None) -> str:
    """Where a reopened run came from: ``from history, run at 14:02`` (the day too when it was
    not today)."""
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return "from history"
    today = (now or datetime.now(when.tzinfo)).date()
    if when.date() == today:
        return f"from history, run at {when:%H:%M}"
    return f"from history, run {friendly_time(created)}"


def collect_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in ("teacache-studio", "mlx", "mflux", "PySide6-Essentials", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def read_png(path: Path) -> np.ndarray:
    """A saved PNG as uint8 RGB."""
    with Image.open(path) as image:
        return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))


def input_png(path: Path, size: tuple[int, int]) -> bytes | None:
    """A picture a run started from as the model saw it, PNG bytes: its EXIF orientation applied,
    transparency over white and resized to the run's ``size`` (as mflux loads it); None where the
    file can no longer be read (the report still records its path and hash)."""
    try:
        with Image.open(path) as opened:
            picture = ImageOps.exif_transpose(opened)
            if picture.has_transparency_data:
                white = Image.new("RGBA", picture.size, (255, 255, 255, 255))
                picture = Image.alpha_composite(white, picture.convert("RGBA"))
            picture = picture.convert("RGB")
            if picture.size != size:
                picture = picture.resize(size, Image.Resampling.LANCZOS)
            return png_bytes(np.asarray(picture, dtype=np.uint8))
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def _sha256(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _entry_id(request: GenerationRequest, created: datetime) -> str:
    stamp = created.strftime("%Y%m%d-%H%M%S-%f")
    return f"{stamp}-{request.variant_id}-s{request.seed}"


def _jsonable(value: object) -> object:
    """What strict JSON cannot hold in a warning's details: numpy values as plain ones, arrays
    described, other sequences as lists, anything else as its text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return f"<array {value.shape} {value.dtype}>"
    if isinstance(value, Sequence | set):
        return list(value)
    return str(value)
