"""Sweep figures: SSIM and speedup against threshold, and a labelled contact sheet.

The plot uses matplotlib's Agg backend: a file renderer that needs no display and no Qt, so the
command line works headless and over SSH; matplotlib already came with mflux, and twin axes with
a legend are what it does best. The contact sheet is plain Pillow (no plotting needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CELL = 256  # contact-sheet thumbnail side in pixels (small demo images are scaled up, nearest)
LABEL_HEIGHT = 56


def sweep_plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    thresholds = [r["threshold"] for r in rows]
    fig, ssim_axis = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    ssim_values = [r["ssim"] for r in rows]
    ssim_axis.plot(thresholds, ssim_values, "o-", color="tab:blue", label="SSIM vs vanilla")
    ssim_axis.set_xlabel("gate threshold")
    ssim_axis.set_ylabel("SSIM against vanilla", color="tab:blue")
    ssim_axis.set_ylim(min([0.5, *[v for v in ssim_values if v is not None]]) - 0.02, 1.04)
    ssim_axis.grid(alpha=0.3)
    for row in rows:
        if row["ssim"] is not None:
            ssim_axis.annotate(
                f"{row['skipped']}/{row['active_steps']}",
                (row["threshold"], row["ssim"]),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=7,
                color="tab:blue",
            )
    speed_axis = ssim_axis.twinx()
    speed = [r["speedup"] for r in rows]
    ideal = [r["ideal_speedup"] for r in rows]
    handles, labels = ssim_axis.get_legend_handles_labels()
    if any(v is not None for v in speed):
        line = speed_axis.plot(
            thresholds, speed, "s-", color="tab:orange", label="measured speedup"
        )
        handles += line
    ideal_line = speed_axis.plot(
        thresholds, ideal, "--", color="tab:orange", alpha=0.5, label="ideal (active / computed)"
    )
    handles += ideal_line
    speed_axis.set_ylabel("speedup over vanilla (×)", color="tab:orange")
    speed_axis.set_ylim(bottom=0.9)
    labels = [str(h.get_label()) for h in handles]
    ssim_axis.legend(handles, labels, loc="lower left", fontsize=8)
    recipe = report["recipe"]
    timing = "cold isolated runs" if recipe.get("timing") == "isolated" else "speed not measured"
    ssim_axis.set_title(
        f"{recipe['variant']}, {recipe['steps']} steps, seed {recipe['seed']} — {timing}\n"
        "labels: skipped/active steps",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def contact_sheet(report: dict[str, Any], base: Path, path: Path, columns: int = 4) -> None:
    """Vanilla first, then one cell per threshold, each labelled with skips, SSIM and speed."""
    from PIL import Image, ImageDraw, ImageFont

    cells: list[tuple[Path, list[str]]] = [
        (base / report["vanilla"]["image"], ["vanilla", "0 skipped", "reference"])
    ]
    for row in report["rows"]:
        if row["speedup"] is None:
            speed = "speed not measured"
        elif row["skipped"] == 0:  # nothing skipped: any difference is run-to-run noise
            speed = f"{row['speedup']:.2f}x (no skip: noise)"
        else:
            speed = f"{row['speedup']:.2f}x faster"
        ssim = "SSIM —" if row["ssim"] is None else f"SSIM {row['ssim']:.4f}"
        cells.append(
            (
                base / row["image"],
                [
                    f"threshold {row['threshold']:g}",
                    f"{row['skipped']}/{row['active_steps']} skipped (streak "
                    f"{row['longest_skip_streak']})",
                    f"{ssim}, {speed}",
                ],
            )
        )
    columns = max(1, min(columns, len(cells)))
    rows = (len(cells) + columns - 1) // columns
    sheet = Image.new("RGB", (columns * CELL, rows * (CELL + LABEL_HEIGHT)), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=13)
    for index, (image_path, label) in enumerate(cells):
        x = (index % columns) * CELL
        y = (index // columns) * (CELL + LABEL_HEIGHT)
        if image_path.exists():
            with Image.open(image_path) as image:
                thumb = image.convert("RGB")
                thumb.thumbnail((CELL, CELL))
                if thumb.width < CELL and thumb.height < CELL:  # small demo images: scale up
                    factor = CELL // max(thumb.width, thumb.height)
                    thumb = thumb.resize(
                        (thumb.width * factor, thumb.height * factor), Image.Resampling.NEAREST
                    )
                sheet.paste(thumb, (x + (CELL - thumb.width) // 2, y + (CELL - thumb.height) // 2))
        else:
            draw.text((x + 8, y + CELL // 2), "(no image)", fill="gray", font=font)
        for line_index, text in enumerate(label):
            draw.text((x + 6, y + CELL + 3 + 17 * line_index), text, fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
