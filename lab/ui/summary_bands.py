"""The basis of the window's plain summary bands (app/ui/plain_words.py): the demo at 28 steps on
a few prompts and thresholds, each run's SSIM and local difference (the report's ``local_diff``, the
worst window's mean, 0–1; ``local_max``, the Difference view's maximum 0–255, is kept for reference
only) beside a contact sheet
(vanilla | TeaCache | difference ×4) to look at by eye. Usage::

    uv run python -m lab.ui.summary_bands lab/ui/results
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from app.fileio.jsonio import write_json_atomic

PROMPTS = (
    "two red circles and a blue star on a yellow background",  # the window's first prompt
    "two large dotted yellow triangles at the left and a small blue triangle at the centre on a "
    "black background",  # the sweep's prompt 0 (lab/demo/results/demo.threshold-sweep.json)
    "two large striped white squares at the left and a large black triangle at the top on a "
    "yellow background",  # the sweep's prompt 4, its worst SSIM at every threshold
)
THRESHOLDS = (0.1, 0.2, 0.3, 0.5, 1.0)
SCALE = 2  # 128 px images drawn at 256 px


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)

    from app.blas import preload_openblas

    preload_openblas()
    from app.engine import events as ev
    from app.engine.engine import Engine
    from app.engine.request import make_request
    from app.metrics import difference_image
    from app.ui.plain_words import picture_change, run_summary

    engine = Engine()
    rows: list[dict[str, object]] = []
    tiles: list[tuple[np.ndarray, np.ndarray, np.ndarray, str]] = []
    try:
        for prompt in PROMPTS:
            for threshold in THRESHOLDS:
                request = make_request("demo", prompt, seed=42, threshold=threshold)
                finished: list[object] = []
                engine.run(len(rows) + 1, request, finished.append, threading.Event())
                report = next(e for e in finished if isinstance(e, ev.RunFinished)).report
                assert report.vanilla is not None and report.ssim is not None
                diff = difference_image(report.gated.image, report.vanilla.image)
                assert diff is not None
                local_max = float(diff.max())
                assert report.local_diff is not None
                local = report.local_diff.value
                summary = run_summary(report.gated.skipped, request.steps, report.ssim, local)
                rows.append(
                    {
                        "prompt": prompt,
                        "threshold": threshold,
                        "skipped": report.gated.skipped,
                        "ssim": report.ssim,
                        "local_diff": local,
                        "local_max": local_max,
                        "band": picture_change(report.ssim, local).name,
                        "summary": summary,
                    }
                )
                label = (
                    f"t={threshold:g} skip {report.gated.skipped} "
                    f"SSIM {report.ssim:.3f} local {local:.3f}"
                )
                tiles.append((report.vanilla.image, report.gated.image, diff, label))
                print(label, "·", summary, flush=True)
    finally:
        engine.close()
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        args.out / "summary-bands.json",
        {"steps": 28, "seed": 42, "size": [128, 128], "runs": rows},
    )
    _sheet(tiles).save(args.out / "summary-bands.png")
    return 0


def _sheet(tiles: list[tuple[np.ndarray, np.ndarray, np.ndarray, str]]) -> Image.Image:
    side = 128 * SCALE
    caption = 18
    sheet = Image.new("RGB", (3 * side + 20, len(tiles) * (side + caption)), "white")
    draw = ImageDraw.Draw(sheet)
    for row, (vanilla, gated, diff, label) in enumerate(tiles):
        top = row * (side + caption)
        draw.text((4, top + 3), label, fill="black")
        amplified = np.clip(diff * 4, 0, 255).astype(np.uint8)
        for col, image in enumerate((vanilla, gated, np.stack([amplified] * 3, axis=-1))):
            tile = Image.fromarray(np.asarray(image, dtype=np.uint8)).resize(
                (side, side), Image.Resampling.NEAREST
            )
            sheet.paste(tile, (col * (side + 10), top + caption))
    return sheet


if __name__ == "__main__":
    raise SystemExit(main())
