"""Every finished run, saved under ``app.paths.history_dir()``.

One folder per run holds ``gated.png``, ``vanilla.png`` (when a vanilla pass exists) and
``run.json`` (prompt, seed, variant, steps, threshold, skips, pattern, SSIM, timings, the per-step
trace, versions). A run is written into a hidden temporary folder that is renamed into place when
complete, so the history never shows half an entry. Listing skips (and warns about) any folder
that cannot be read back.
"""

from __future__ import annotations

import json
import logging
import math
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
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

from app import __version__, paths
from app.engine.report import RunReport, legacy_speedup_label, replayed_steps, step_from_json
from app.engine.request import GenerationRequest, LoraSpec, RequestError, make_request
from app.fileio.atomic import atomic_write_bytes, atomic_write_text
from app.fileio.jsonio import dumps_json
from app.gate import Decision, StepEvent
from app.gate.kinds import DEFAULT_GATE, gate_kind, recorded_gate
from app.metrics import difference_image

log = logging.getLogger(__name__)

HISTORY_FORMAT = 1
META_FILE = "run.json"
GATED_FILE = "gated.png"
VANILLA_FILE = "vanilla.png"
_REQUIRED_REQUEST_KEYS = {"variant_id": str, "prompt": str, "seed": int, "steps": int}


@dataclass(frozen=True)
class RunRecord:
    """A finished run as it is saved. ``from_report`` builds it from the engine's ``RunReport``:
    the metrics are the report's, never measured again here."""

    request: GenerationRequest
    gated_image: np.ndarray
    vanilla_image: np.ndarray | None
    gated_steps: tuple[StepEvent, ...]
    vanilla_steps: tuple[StepEvent, ...]
    gated_seconds: float | None
    vanilla_seconds: float | None
    ssim: float | None = None
    speedup: float | None = None
    speedup_estimated: bool = False  # gated steps were replayed from vanilla: their time is
    vanilla_cached: bool = False  # vanilla's, so the ratio is an estimate
    resumed_from: int | None = None
    report: dict[str, object] = field(default_factory=dict)
    warnings: tuple[dict[str, object], ...] = ()
    created: datetime = field(default_factory=lambda: datetime.now().astimezone())
    vanilla_measured_at: datetime | None = None
    png_metadata: dict[str, str] = field(default_factory=dict)  # report_metadata, for its PNGs

    @classmethod
    def from_report(
        cls, report: RunReport, warnings: tuple[dict[str, object], ...] = ()
    ) -> RunRecord:
        vanilla = report.vanilla
        return cls(
            request=report.request,
            gated_image=report.gated.image,
            vanilla_image=vanilla.image if vanilla is not None else None,
            gated_steps=report.gated.steps,
            vanilla_steps=vanilla.steps if vanilla is not None else (),
            gated_seconds=report.gated.loop_seconds,
            vanilla_seconds=vanilla.loop_seconds if vanilla is not None else None,
            ssim=report.ssim,
            speedup=report.speedup,
            speedup_estimated=report.speedup_estimated,
            vanilla_cached=report.vanilla_cached,
            resumed_from=report.gated.resumed_from,
            report=report.to_json(),
            warnings=warnings,
            vanilla_measured_at=vanilla.measured_at if vanilla is not None else None,
            png_metadata=report_metadata(report),
        )

    @property
    def speedup_label(self) -> str:
        """The report's full label (one wording everywhere); derived only for a record made
        without a report."""
        saved = self.report.get("speedup_label")
        if isinstance(saved, str):
            return saved
        if self.speedup is None:
            return ""
        return legacy_speedup_label(
            replayed_steps=replayed_steps(self.resumed_from, len(self.gated_steps)),
            steps=len(self.gated_steps),
            vanilla_cached=self.vanilla_cached,
            vanilla_measured_at=self.vanilla_measured_at,
        )

    @property
    def skips(self) -> int:
        return sum(s.decision is Decision.skipped for s in self.gated_steps)

    @property
    def pattern(self) -> str:
        return "".join(s.decision.letter for s in self.gated_steps)

    @property
    def vanilla_pattern(self) -> str:
        return "".join(s.decision.letter for s in self.vanilla_steps)


@dataclass(frozen=True)
class HistoryEntry:
    """One saved run as read back from disk. Its figures are its ``report``'s: run.json's report
    object read back by ``RunReport.from_json`` (with the images and the vanilla steps saved
    beside it), never copied field by field; only the speedup with its label stays as it was
    saved (the rules of the build that saved it; this build's are its report's)."""

    id: str
    folder: Path
    meta: dict[str, Any]

    @property
    def request_data(self) -> dict[str, Any]:
        return self.meta["request"]

    @property
    def warning_messages(self) -> tuple[str, ...]:
        """The notes the run (or comparison) gave, as saved."""
        saved = self.meta.get("warnings")
        if not isinstance(saved, list):
            return ()
        return tuple(
            w["message"] for w in saved if isinstance(w, dict) and isinstance(w.get("message"), str)
        )

    @property
    def result(self) -> dict[str, Any]:
        return self.meta.get("result", {})

    @property
    def created(self) -> str:
        return str(self.meta.get("created", ""))

    @property
    def prompt(self) -> str:
        return self.request_data["prompt"]

    @property
    def variant_id(self) -> str:
        return self.request_data["variant_id"]

    @property
    def seed(self) -> int:
        return self.request_data["seed"]

    @property
    def steps(self) -> int:
        return self.request_data["steps"]

    @property
    def threshold(self) -> float | None:
        value = self.request_data.get("threshold")
        return float(value) if isinstance(value, int | float) else None

    @cached_property
    def report(self) -> RunReport:
        """The run as the engine reported it (read once; the images are decoded here).
        ``ValueError`` or ``OSError`` where the folder is damaged."""
        gated = _read_png(self.gated_path)
        vanilla_path = self.vanilla_path
        vanilla = _read_png(vanilla_path) if vanilla_path is not None else None
        return RunReport.from_json(
            report_json(self.meta),
            gated_image=gated,
            vanilla_image=vanilla,
            vanilla_steps=self.step_events("vanilla"),
        )

    @property
    def gate(self) -> str:
        """The gate that ran (entries from before there was a second gate ran TeaCache)."""
        return recorded_gate(self.request_data.get("gate"))

    @property
    def gate_label(self) -> str:
        return gate_kind(self.gate).label

    @property
    def skips(self) -> int:
        return self.report.gated.skipped

    @property
    def pattern(self) -> str:
        return self.report.gated.pattern

    @property
    def ssim(self) -> float | None:
        return self.report.ssim

    @property
    def local_diff(self) -> float | None:
        return self.report.local_diff_value

    @property
    def gated_seconds(self) -> float | None:
        return self.report.gated.loop_seconds

    @property
    def vanilla_seconds(self) -> float | None:
        vanilla = self.report.vanilla
        return vanilla.loop_seconds if vanilla is not None else None

    @property
    def speedup(self) -> float | None:
        """As saved, with its label (``speedup_label``): a figure and its label are one record,
        made under the rules of the build that saved it. For an entry saved by this build they
        are its report's."""
        return _opt_float(self.result.get("speedup"))

    @property
    def speedup_estimated(self) -> bool:
        """Gated steps were replayed from vanilla, or the figure was re-timed (recomputed: files
        before the label said so for a pass resumed at step 0 too, where nothing was replayed)."""
        steps = _opt_int(self.result.get("steps")) or self.steps
        replayed = replayed_steps(_opt_int(self.result.get("resumed_from")), steps)
        estimate = self.speedup_label.startswith(("estimate", "re-timed"))
        return self.speedup is not None and (replayed > 0 or estimate)

    @property
    def speedup_label(self) -> str:
        """As saved: the report's full label where the entry has a report (entries saved before
        it was copied whole kept a shortened one in ``result``), else ``result``'s; for entries
        written before the label existed, derived from the same fields (a pass resumed at step 0
        replayed nothing: "measured")."""
        report = self.meta.get("report")
        for saved in (report.get("speedup_label") if isinstance(report, dict) else None,
                      self.result.get("speedup_label")):  # fmt: skip
            if isinstance(saved, str) and saved:
                return saved
        if self.speedup is None:
            return ""
        steps = _opt_int(self.result.get("steps")) or self.steps
        measured_at = self.result.get("vanilla_measured_at")
        return legacy_speedup_label(
            replayed_steps=replayed_steps(_opt_int(self.result.get("resumed_from")), steps),
            steps=steps,
            vanilla_cached=self.result.get("vanilla_cached") is True,
            vanilla_measured_at=_opt_time(measured_at),
        )

    @property
    def gated_path(self) -> Path:
        return self.folder / GATED_FILE

    @property
    def vanilla_path(self) -> Path | None:
        path = self.folder / VANILLA_FILE
        return path if path.exists() else None

    def load_images(self) -> tuple[np.ndarray, np.ndarray | None]:
        report = self.report
        return report.gated.image, (report.vanilla.image if report.vanilla is not None else None)

    def step_events(self, which: str) -> tuple[StepEvent, ...]:
        rows = self.meta.get("steps", {}).get(which, [])
        return tuple(step_from_json(row, len(rows)) for row in rows)

    @property
    def loras(self) -> tuple[LoraSpec, ...]:
        """The run's LoRAs as recorded (an entry from before LoRA support has none)."""
        rows = self.request_data.get("loras") or []
        return tuple(
            LoraSpec(str(row["path"]), float(row["scale"]))
            for row in rows
            if isinstance(row, dict)
            and isinstance(row.get("path"), str)
            and isinstance(row.get("scale"), int | float)
        )

    def to_request(self) -> GenerationRequest | None:
        """The request that reproduces this run, or None if the variant (or a LoRA file) no
        longer exists."""
        data = self.request_data
        try:
            width, height = int(data["width"]), int(data["height"])
            return make_request(
                data["variant_id"],
                data["prompt"],
                seed=int(data["seed"]),
                steps=int(data["steps"]),
                threshold=float(data["threshold"]),
                size=(width, height),
                guidance=_opt_float(data.get("guidance")),
                quantize=_opt_int(data.get("quantize")),
                model_path=data.get("model_path"),
                compare_vanilla=bool(data.get("compare_vanilla", True)),
                loras=self.loras,
                gate=str(data.get("gate", DEFAULT_GATE)),
            )
        except (RequestError, KeyError, TypeError, ValueError):
            return None


# run.json's result keys that older builds' worker completed itself (the engine's report then did
# not know a cached vanilla's time), under their report names.
_RESULT_KEYS = {
    "gated_seconds": "gated_seconds",
    "vanilla_seconds": "vanilla_seconds",
    "ssim": "ssim",
    "local_diff": "local_diff",
    "resumed_from": "resumed_from_step",
    "vanilla_cached": "vanilla_cached",
    "vanilla_measured_at": "vanilla_measured_at",
}
_REQUEST_KEYS = {
    "variant_id": "variant",
    "prompt": "prompt",
    "seed": "seed",
    "steps": "steps",
    "threshold": "threshold",
    "gate": "gate",
    "width": "width",
    "height": "height",
    "guidance": "guidance",
    "quantize": "quantize",
    "loras": "loras",
    "model_path": "model_path",
}


def report_json(meta: Mapping[str, Any]) -> dict[str, Any]:
    """run.json's report object, completed from the rest of run.json where it lacks a key.

    Since the speedup label was saved (the result's ``speedup_label``), the report is the run's
    own record and wins. Before it, the window's worker re-timed a cached vanilla itself and
    wrote what it found into the result only: there the result's figures win (and a vanilla
    with no recorded time has none)."""
    report = meta.get("report")
    report = dict(report) if isinstance(report, Mapping) else {}
    result = meta.get("result")
    result = result if isinstance(result, Mapping) else {}
    request = meta.get("request")
    request = request if isinstance(request, Mapping) else {}
    steps = meta.get("steps")
    gated_rows = steps.get("gated") if isinstance(steps, Mapping) else None
    filled: dict[str, Any] = {
        new: request[old] for old, new in _REQUEST_KEYS.items() if old in request
    }
    if isinstance(gated_rows, list):
        filled["steps_detail"] = gated_rows
    from_result = {new: result[old] for old, new in _RESULT_KEYS.items() if old in result}
    if "speedup_label" in result:
        return {**filled, **{k: v for k, v in from_result.items() if v is not None}, **report}
    return {
        **filled,
        **report,
        **from_result,
        "vanilla_measured_at": from_result.get("vanilla_measured_at"),
    }


class HistoryStore:
    """Saves, lists and exports runs. ``warnings`` holds what the last ``entries()`` skipped."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else paths.history_dir()
        self.warnings: list[str] = []

    def save(
        self,
        record: RunRecord,
        *,
        extra_files: Mapping[str, bytes] | None = None,
        extra_meta: Mapping[str, object] | None = None,
    ) -> HistoryEntry:
        """``extra_files`` and ``extra_meta`` (a comparison's images and table) land in the same
        folder and run.json, in the same one rename."""
        self.root.mkdir(parents=True, exist_ok=True)
        entry_id = _entry_id(record)
        staging = self.root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            atomic_write_bytes(staging / GATED_FILE, encode_png(record.gated_image, record))
            if record.vanilla_image is not None:
                atomic_write_bytes(staging / VANILLA_FILE, encode_png(record.vanilla_image, record))
            for name, data in (extra_files or {}).items():
                atomic_write_bytes(staging / name, data)
            meta = {**_metadata(entry_id, record), **(extra_meta or {})}
            atomic_write_text(staging / META_FILE, dumps_json(meta, indent=2, default=_jsonable))
            final = self.root / entry_id
            while final.exists():  # two runs in the same microsecond: keep both
                final = self.root / f"{entry_id}-{uuid.uuid4().hex[:4]}"
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return HistoryEntry(final.name, final, meta)

    def entries(self) -> list[HistoryEntry]:
        """Newest first; unreadable folders are skipped with a warning."""
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
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
            _validate(meta)
            if not (folder / GATED_FILE).is_file():
                raise ValueError(f"{GATED_FILE} is missing")
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            warning = f"history entry {folder.name} skipped: {exc}"
            log.warning("%s", warning)
            self.warnings.append(warning)
            return None
        return HistoryEntry(folder.name, folder, meta)


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


# Another image format's extension, typed where a PNG is saved: replaced by ``.png``.
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".jpe", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".heic"}


def png_path(path: Path) -> Path:
    """The name a PNG is saved under: ``name`` → ``name.png``, ``x.jpg`` → ``x.png`` (another
    image format's extension is replaced, never kept: ``x.jpg.png`` read as a JPEG), and any
    other dot in a name stays (``v1.2`` → ``v1.2.png``). The file is never mislabelled."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        return path
    if suffix in _IMAGE_SUFFIXES:
        return path.with_suffix(".png")
    return path.with_name(path.name + ".png")


def caption_font(size: int = 15) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans (matplotlib's, which the app and the bundle ship): it has every glyph the
    captions use (× · “ ” …), which Pillow's built-in Aileron lacks (× draws as a box)."""
    try:
        import matplotlib  # only the export needs its font file

        font_file = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        return ImageFont.truetype(str(font_file), size)
    except (ImportError, OSError):
        return ImageFont.load_default(size=size)


# What a caption falls back to where a font lacks a glyph (never a missing-glyph box).
_ASCII_FALLBACK = {"×": "x", "“": '"', "”": '"', "·": "-", "…": "...", "↺": "", "÷": "/"}


def missing_glyphs(font: ImageFont.FreeTypeFont | ImageFont.ImageFont, text: str) -> set[str]:
    """The characters of ``text`` that ``font`` draws as its missing-glyph box (.notdef)."""
    notdef = _glyph_mask(font, "\U0010fffd")  # a private-use code point no font maps
    return {ch for ch in set(text) if not ch.isspace() and _glyph_mask(font, ch) == notdef}


def _glyph_mask(font: ImageFont.FreeTypeFont | ImageFont.ImageFont, ch: str) -> bytes:
    tile = Image.new("L", (64, 64))
    ImageDraw.Draw(tile).text((8, 8), ch, fill=255, font=font)
    return tile.tobytes()


def drawable(font: ImageFont.FreeTypeFont | ImageFont.ImageFont, text: str) -> str:
    for ch in missing_glyphs(font, text):
        text = text.replace(ch, _ASCII_FALLBACK.get(ch, "?"))
    return text


def export_metadata(
    *,
    prompt: str,
    seed: int,
    variant: str,
    steps: int,
    threshold: float | None,
    skips: int | None,
    gate: str = DEFAULT_GATE,
    ssim: float | None,
    gated_seconds: float | None,
    vanilla_seconds: float | None,
    speedup: float | None,
    speedup_label: str = "",
    loras: Sequence[LoraSpec] = (),
    quantize: int | None = None,
    model_path: str | None = None,
    guidance: float | None = None,
    size: tuple[int, int] | None = None,
    local_diff: float | None = None,
) -> dict[str, str]:
    """The text chunks of a run's PNG, the one builder every PNG of a run uses (the window's
    export and Save, the history's export, ``generate``'s gated.png and vanilla.png): one key per
    figure, the speedup with its full label, the prompt as Description, the app and its version
    as Software, and all of it as JSON under ``teacache``."""
    fields: dict[str, object] = {
        "prompt": prompt,
        "seed": seed,
        "variant": variant,
        "steps": steps,
        "size": f"{size[0]}x{size[1]}" if size is not None else None,
        "guidance": guidance,
        "gate": gate,
        "threshold": threshold,
        "skips": skips,
        "ssim": ssim,
        "local_diff": local_diff,
        "gated_seconds": gated_seconds,
        "vanilla_seconds": vanilla_seconds,
        "speedup": speedup,
        "speedup_label": speedup_label or None,
        "quantize": quantize,  # None: full precision (left out, like every other None)
        "model_path": model_path,
        "app_version": __version__,
    }
    data = {k: str(v) for k, v in fields.items() if v is not None}
    if loras:
        data["loras"] = ", ".join(lora.label() for lora in loras)
        fields["loras"] = [{"path": lora.path, "scale": lora.scale} for lora in loras]
    data["Description"] = prompt
    data["Software"] = f"TeaCache Studio {__version__}"
    data["teacache"] = dumps_json({k: v for k, v in fields.items() if v is not None})
    return data


def report_metadata(
    report: RunReport, *, shown_speedup: tuple[float | None, str] | None = None
) -> dict[str, str]:
    """``export_metadata`` of a finished run, every figure from its report; the speedup and its
    label are ``shown_speedup`` where the caller shows another pair (a history entry's, as it
    was saved)."""
    r, vanilla = report.request, report.vanilla
    speedup, speedup_label = shown_speedup or (report.speedup, report.speedup_label)
    return export_metadata(
        prompt=r.prompt,
        seed=r.seed,
        variant=r.variant_id,
        steps=r.steps,
        threshold=r.threshold,
        skips=report.gated.skipped,
        gate=r.gate,
        ssim=report.ssim,
        gated_seconds=report.gated.loop_seconds,
        vanilla_seconds=vanilla.loop_seconds if vanilla is not None else None,
        speedup=speedup,
        speedup_label=speedup_label if speedup is not None else "",
        loras=r.loras,
        quantize=r.quantize,
        model_path=r.model_path,
        guidance=r.guidance,
        size=(r.width, r.height),
        local_diff=report.local_diff_value,
    )


def write_png(path: Path, image: np.ndarray, metadata: dict[str, str] | None = None) -> Path:
    """One image as a PNG (``png_path``) with ``metadata`` in its text chunks, written
    atomically. Returns the path written."""
    path = png_path(path)
    atomic_write_bytes(path, _png_bytes(image, metadata))
    return path


def _png_bytes(image: np.ndarray, metadata: Mapping[str, str] | None = None) -> bytes:
    info = PngImagePlugin.PngInfo()
    for key, value in (metadata or {}).items():
        info.add_itxt(key, value)
    buffer = BytesIO()
    Image.fromarray(_rgb8(image)).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def export_side_by_side(
    path: Path,
    gated: np.ndarray,
    vanilla: np.ndarray | None,
    *,
    gated_caption: str,
    vanilla_caption: str,
    footer: str,
    metadata: dict[str, str] | None = None,
) -> Path:
    """One PNG: gated, vanilla and their difference (as the window draws it) side by side, with
    captions and the footer wrapped to the tiles' width; small images are enlarged with
    nearest-neighbour sampling so that each pixel stays visible. Returns the path written
    (``png_path``); ``metadata`` goes into the PNG's text chunks.

    A run without vanilla is one tile, and its canvas is as wide as the footer's one line."""
    path = png_path(path)
    images, captions = [gated], [gated_caption]
    if vanilla is not None:
        images.append(vanilla)
        captions.append(vanilla_caption)
        if vanilla.shape == gated.shape:
            difference, top = difference_rgb(gated, vanilla)
            images.append(difference)
            captions.append(f"Difference · max {top:.0f}/255")
    height, width = gated.shape[:2]
    scale = max(1, -(-384 // max(1, min(height, width))))  # ceil: at least 384 px on the short side
    tile_w, tile_h = width * scale, height * scale
    pad, caption_h, line_h = 16, 28, 22
    font = caption_font(15)
    footer = drawable(font, footer)
    tiles_w = pad + len(images) * (tile_w + pad)
    if len(images) == 1:  # one small tile must not cut the line off
        canvas_w = max(tiles_w, math.ceil(font.getlength(footer)) + 2 * pad)
        lines = [footer]
    else:  # the tiles set the width; the footer wraps under them (it left ~700 px empty)
        canvas_w = tiles_w
        lines = wrap_footer(font, footer, canvas_w - 2 * pad)
    canvas_h = pad + caption_h + tile_h + pad + len(lines) * line_h + pad // 2
    canvas = Image.new("RGB", (canvas_w, canvas_h), (250, 250, 250))
    draw = ImageDraw.Draw(canvas)
    for i, (image, caption) in enumerate(zip(images, captions, strict=True)):
        x = pad + i * (tile_w + pad)
        tile = Image.fromarray(_rgb8(image)).resize((tile_w, tile_h), Image.Resampling.NEAREST)
        canvas.paste(tile, (x, pad + caption_h))
        draw.text((x, pad + 4), drawable(font, caption), fill=(30, 30, 30), font=font)
    top_y = pad + caption_h + tile_h + pad
    for n, line in enumerate(lines):
        draw.text((pad, top_y + n * line_h), line, fill=(90, 90, 90), font=font)
    atomic_write_bytes(path, _png_bytes(np.asarray(canvas), metadata))
    return path


def difference_rgb(gated: np.ndarray, vanilla: np.ndarray) -> tuple[np.ndarray, float]:
    """The difference image (``app.metrics.difference_image``) as the window's difference view
    draws it: viridis from 0 to its largest value (at least 8, so a near-zero difference stays
    dark); with that largest value."""
    from matplotlib import colormaps

    diff = difference_image(_rgb8(gated), _rgb8(vanilla))
    top = float(diff.max()) if diff.size else 0.0
    scaled = np.clip(diff / max(8.0, top), 0.0, 1.0)
    rgba = colormaps["viridis"](scaled, bytes=True)
    return np.ascontiguousarray(rgba[..., :3]), top


def wrap_footer(
    font: ImageFont.FreeTypeFont | ImageFont.ImageFont, text: str, width: float
) -> list[str]:
    """The footer in lines no wider than ``width``: broken between its "  ·  " parts where it
    can, between words inside a part that is wider by itself."""
    separator = "  ·  "
    lines: list[str] = []
    line = ""
    for part in text.split(separator):
        joined = f"{line}{separator}{part}" if line else part
        if font.getlength(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        line = ""
        for word in part.split(" "):
            candidate = f"{line} {word}" if line else word
            if font.getlength(candidate) <= width or not line:
                line = candidate
            else:
                lines.append(line)
                line = word
    if line:
        lines.append(line)
    return lines


def export_entry(entry: HistoryEntry, path: Path) -> Path:
    gated, vanilla = entry.load_images()
    captions = entry_captions(entry)
    return export_side_by_side(path, gated, vanilla, **captions, metadata=entry_metadata(entry))


def entry_metadata(entry: HistoryEntry) -> dict[str, str]:
    """A saved run's PNG metadata: its report's figures, its speedup as it was saved."""
    return report_metadata(entry.report, shown_speedup=(entry.speedup, entry.speedup_label))


def entry_captions(entry: HistoryEntry) -> dict[str, str]:
    threshold = entry.threshold
    skipped = f"{entry.skips}/{entry.steps} skipped" if entry.skips is not None else ""
    gated = gated_caption(entry.gate, threshold, skipped)
    if entry.gated_seconds is not None:
        gated += f"  {entry.gated_seconds:.2f} s"
    vanilla = "Vanilla"
    if entry.vanilla_seconds is not None:
        vanilla += f"  {entry.vanilla_seconds:.2f} s"
    parts = [f"{entry.variant_id}", f"seed {entry.seed}", f"{entry.steps} steps"]
    parts += lora_captions(entry.loras)
    if entry.ssim is not None:
        parts.append(f"SSIM {entry.ssim:.4f}")
    if entry.speedup is not None:
        parts.append(speedup_caption(entry.speedup, entry.speedup_label))
    prompt = entry.prompt if len(entry.prompt) <= 90 else entry.prompt[:89] + "…"
    return {
        "gated_caption": gated,
        "vanilla_caption": vanilla,
        "footer": f"“{prompt}”  ·  " + "  ·  ".join(parts),
    }


def gated_caption(gate: str, threshold: float | None, skipped: str) -> str:
    """The gated image's caption: the gate that ran, its threshold and the skips."""
    kind = gate_kind(gate)
    if threshold is None:
        return kind.label
    return f"{kind.label}  t={threshold:.4g}  {skipped}"


def export_name(gate: str, variant_id: str, seed: int) -> str:
    """The default file name of an export: the gate first, so two gates' files differ."""
    return f"{gate}-{variant_id}-s{seed}.png"


def lora_captions(loras: Sequence[LoraSpec]) -> list[str]:
    """The footer's LoRA part: one "LoRA name × scale" per file."""
    return [f"LoRA {lora.label()}" for lora in loras]


def speedup_caption(speedup: float, label: str) -> str:
    """The export footer's speedup, with the label the card shows."""
    return f"speedup {speedup:.2f}×" + (f" ({label})" if label else "")


def encode_png(image: np.ndarray, record: RunRecord | RunReport | None = None) -> bytes:
    """A history PNG: with its run's metadata (``report_metadata``) where the record was made
    from a report, else the prompt and the app."""
    if isinstance(record, RunReport):
        metadata = report_metadata(record)
    elif record is not None:
        metadata = record.png_metadata or {
            "Description": record.request.prompt,
            "Software": f"TeaCache Studio {__version__}",
        }
    else:
        metadata = {}
    return _png_bytes(image, metadata)


def step_to_dict(step: StepEvent) -> dict[str, object]:
    return {**step.as_dict(), "num_steps": step.num_steps}


def collect_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in ("teacache-studio", "mlx", "mflux", "PySide6-Essentials", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _metadata(entry_id: str, record: RunRecord) -> dict[str, object]:
    return {
        "format": HISTORY_FORMAT,
        "id": entry_id,
        "created": record.created.isoformat(timespec="seconds"),
        "request": record.request.as_dict(),
        "result": {
            "skips": record.skips,
            "steps": len(record.gated_steps),
            "pattern": record.pattern,
            "vanilla_pattern": record.vanilla_pattern,
            "ssim": record.ssim,
            "local_diff": record.report.get("local_diff"),
            "gated_seconds": record.gated_seconds,
            "vanilla_seconds": record.vanilla_seconds,
            "speedup": record.speedup,
            "speedup_estimated": record.speedup_estimated,
            "speedup_label": record.speedup_label,
            "vanilla_cached": record.vanilla_cached,
            "vanilla_measured_at": (
                record.vanilla_measured_at.isoformat(timespec="seconds")
                if record.vanilla_measured_at is not None
                else None
            ),
            "resumed_from": record.resumed_from,
        },
        "steps": {
            "gated": [step_to_dict(s) for s in record.gated_steps],
            "vanilla": [step_to_dict(s) for s in record.vanilla_steps],
        },
        "warnings": list(record.warnings),
        "report": record.report,
        "versions": collect_versions(),
    }


def _validate(meta: object) -> None:
    if not isinstance(meta, dict):
        raise ValueError(f"{META_FILE} does not hold a JSON object")
    if not isinstance(meta.get("format"), int) or meta["format"] > HISTORY_FORMAT:
        raise ValueError(f"unknown history format {meta.get('format')!r}")
    request = meta.get("request")
    if not isinstance(request, dict):
        raise ValueError("the request is missing")
    for key, kind in _REQUIRED_REQUEST_KEYS.items():
        if not isinstance(request.get(key), kind):
            raise ValueError(f"request field {key!r} is missing or malformed")
    if not isinstance(meta.get("result", {}), dict):
        raise ValueError("the result is malformed")
    steps = meta.get("steps", {})
    if not isinstance(steps, dict) or not all(isinstance(v, list) for v in steps.values()):
        raise ValueError("the step trace is malformed")
    try:
        for rows in steps.values():
            for row in rows:
                step_from_json(row, len(rows))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the step trace is malformed ({exc})") from None


def _entry_id(record: RunRecord) -> str:
    stamp = record.created.strftime("%Y%m%d-%H%M%S-%f")
    return f"{stamp}-{record.request.variant_id}-s{record.request.seed}"


def _read_png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))


def _rgb8(image: np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    return np.ascontiguousarray(array[..., :3])


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _opt_int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _jsonable(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return f"<array {value.shape} {value.dtype}>"
    if isinstance(value, Sequence | set):
        return list(value)
    return str(value)
