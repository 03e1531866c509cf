"""A run as pictures: the captioned side-by-side PNG, its fonts and captions, and the text chunks
every PNG of a run carries.

``export_metadata`` is the one builder of a run's PNG text chunks and ``report_metadata`` fills it
from a ``RunReport`` (the window's Save and Export, the history's PNGs, ``generate``'s gated.png
and vanilla.png). ``export_side_by_side`` draws gated, vanilla and their difference with captions
and a footer; ``export_entry`` does so for a saved run (a history entry: its report, its speedup as
it was saved). Qt-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from io import BytesIO
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

from app import __version__
from app.engine.report import RunReport
from app.engine.request import InputImage, LoraSpec
from app.fileio.atomic import atomic_write_bytes
from app.fileio.jsonio import dumps_json
from app.gate.fill import DEFAULT_FILL, get_fill
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.metrics import difference_image


class SavedRun(Protocol):
    """What the export of a saved run reads (``app.storage.history.HistoryEntry`` is one): its
    report, and the speedup with its label as they were saved."""

    @property
    def report(self) -> RunReport: ...

    @property
    def speedup(self) -> float | None: ...

    @property
    def speedup_label(self) -> str: ...


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
    fill: str = DEFAULT_FILL,
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
    ssimulacra2: float | None = None,
    images: Sequence[InputImage] = (),
    strength: float | None = None,
) -> dict[str, str]:
    """The text chunks of a run's PNG, the one builder every PNG of a run uses (the window's
    export and Save, the history's export, ``generate``'s gated.png and vanilla.png): one key per
    figure, the speedup with its full label, the prompt as Description, the app and its version
    as Software, and all of it as JSON under ``teacache``. A run from a picture carries each
    picture's name and SHA-256 (never its folder) and the strength."""
    fields: dict[str, object] = {
        "prompt": prompt,
        "seed": seed,
        "variant": variant,
        "steps": steps,
        "size": f"{size[0]}x{size[1]}" if size is not None else None,
        "guidance": guidance,
        "gate": gate,
        "fill": fill,
        "threshold": threshold,
        "skips": skips,
        "ssim": ssim,
        "ssimulacra2": ssimulacra2,
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
    if images:
        data["input_images"] = ", ".join(
            f"{image.name} (sha256 {image.sha256})" for image in images
        )
        fields["input_images"] = [
            {
                "name": image.name,
                "sha256": image.sha256,
                "width": image.width,
                "height": image.height,
            }
            for image in images
        ]
        if strength is not None:
            data["strength"] = f"{strength:g}"
            fields["strength"] = strength
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
        fill=r.fill,
        ssim=report.ssim,
        ssimulacra2=report.ssimulacra2,
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
        images=r.images,
        strength=r.strength,
    )


def write_png(path: Path, image: np.ndarray, metadata: dict[str, str] | None = None) -> Path:
    """One image as a PNG (``png_path``) with ``metadata`` in its text chunks, written
    atomically. Returns the path written."""
    path = png_path(path)
    atomic_write_bytes(path, png_bytes(image, metadata))
    return path


def png_bytes(image: np.ndarray, metadata: Mapping[str, str] | None = None) -> bytes:
    """One image as PNG bytes with ``metadata`` in its text chunks (iTXt: any language)."""
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
    atomic_write_bytes(path, png_bytes(np.asarray(canvas), metadata))
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


def export_entry(entry: SavedRun, path: Path) -> Path:
    """A saved run's side-by-side PNG (``export_side_by_side``) with its metadata."""
    report = entry.report
    gated, vanilla = report.gated.image, (report.vanilla.image if report.vanilla else None)
    captions = entry_captions(entry)
    return export_side_by_side(path, gated, vanilla, **captions, metadata=entry_metadata(entry))


def entry_metadata(entry: SavedRun) -> dict[str, str]:
    """A saved run's PNG metadata: its report's figures, its speedup as it was saved."""
    return report_metadata(entry.report, shown_speedup=(entry.speedup, entry.speedup_label))


def entry_captions(entry: SavedRun) -> dict[str, str]:
    """A saved run's captions and footer: its report's figures, its speedup as it was saved."""
    report = entry.report
    request, vanilla = report.request, report.vanilla
    skipped = f"{report.gated.skipped}/{request.steps} skipped"
    gated = gated_caption(request.gate, request.threshold, skipped, request.fill)
    gated += f"  {report.gated.loop_seconds:.2f} s"
    vanilla_caption = "Vanilla"
    if vanilla is not None:
        vanilla_caption += f"  {vanilla.loop_seconds:.2f} s"
    parts = [f"{request.variant_id}", f"seed {request.seed}", f"{request.steps} steps"]
    parts += lora_captions(request.loras)
    if report.ssim is not None:
        parts.append(f"SSIM {report.ssim:.4f}")
    if report.ssimulacra2 is not None:
        parts.append(f"SSIMULACRA2 {report.ssimulacra2:.1f}")
    if entry.speedup is not None:
        parts.append(speedup_caption(entry.speedup, entry.speedup_label))
    prompt = request.prompt if len(request.prompt) <= 90 else request.prompt[:89] + "…"
    return {
        "gated_caption": gated,
        "vanilla_caption": vanilla_caption,
        "footer": f"“{prompt}”  ·  " + "  ·  ".join(parts),
    }


def gated_caption(
    gate: str, threshold: float | None, skipped: str, fill: str = DEFAULT_FILL
) -> str:
    """The gated image's caption: the gate that ran, its threshold, the skips and what the
    skipped steps added."""
    kind = gate_kind(gate)
    if threshold is None:
        return kind.label
    return f"{kind.label}  t={threshold:.4g}  {skipped}, {get_fill(fill).caption}"


def export_name(gate: str, variant_id: str, seed: int) -> str:
    """The default file name of an export: the gate first, so two gates' files differ."""
    return f"{gate}-{variant_id}-s{seed}.png"


def lora_captions(loras: Sequence[LoraSpec]) -> list[str]:
    """The footer's LoRA part: one "LoRA name × scale" per file."""
    return [f"LoRA {lora.label()}" for lora in loras]


def speedup_caption(speedup: float, label: str) -> str:
    """The export footer's speedup, with the label the card shows."""
    return f"speedup {speedup:.2f}×" + (f" ({label})" if label else "")


def _rgb8(image: np.ndarray) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    return np.ascontiguousarray(array[..., :3])
