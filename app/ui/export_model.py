"""File ▸ Export Side-by-Side… and a saved image's metadata: the shown run's file name, its
captions and its numbers. Qt-free.

A run saved to the history exports from its history entry (``app.storage.export``), so the file
carries exactly what the History lists; a run not saved exports what the window shows, with the
speedup as the card shows it. A failure is one sentence in the error banner, titled "Cannot export".
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.storage.export import (
    export_entry,
    export_metadata,
    export_name,
    export_side_by_side,
    gated_caption,
    lora_captions,
    report_metadata,
    speedup_caption,
)

if TYPE_CHECKING:
    from app.storage.history import HistoryStore
    from app.ui.form_model import FormModel
    from app.ui.run_model import RunModel

EXPORT_TITLE = "Cannot export"


class Exporter:
    """See the module docstring."""

    def __init__(self, form: FormModel, run: RunModel, history: HistoryStore) -> None:
        self.form = form
        self.run = run
        self.history = history

    def suggested_export_name(self) -> str:
        """The shown run's file name (the inputs' before any run): the gate that ran first."""
        request = self.run.request
        if request is not None:
            return export_name(request.gate, request.variant_id, request.seed)
        return export_name(self.form.gate, self.form.variant_id, int(self.form.seed))

    def can_export(self) -> bool:
        """A finished result is on screen (File ▸ Export is enabled only then)."""
        if self.run.gated_image is None:
            self.run.fail_locally("there is no finished run to export yet", title=EXPORT_TITLE)
            return False
        return True

    def export(self, path: Path) -> Path | None:
        """The side-by-side PNG of the shown run (from its history entry where it was saved), with
        its numbers in the PNG's metadata; ``.png`` is added where the name lacks it. Returns the
        path written, or None with one clear message where nothing could be written."""
        gated = self.run.gated_image
        if gated is None:
            self.run.fail_locally("there is no finished run to export yet", title=EXPORT_TITLE)
            return None
        saved = self.run.saved_entry
        entry = self.history.get(Path(saved).name) if saved else None
        try:
            if entry is not None:
                return export_entry(entry, path)
            return export_side_by_side(
                path,
                gated,
                self.run.vanilla_image,
                **self.export_captions(),
                metadata=self.export_metadata(),
            )
        except OSError as exc:
            self.run.fail_locally(
                f"could not export to {path}: {exc.strerror or exc}", title=EXPORT_TITLE
            )
            return None

    def export_metadata(self) -> dict[str, str]:
        """The shown run's numbers for the PNG's text chunks: its report's, with the speedup as
        the card shows it (before the report, the request's, else the form's)."""
        r, f = self.run, self.form
        if r.report is not None:
            return report_metadata(r.report, shown_speedup=(r.speedup, r.speedup_label))
        request = r.request
        return export_metadata(
            prompt=request.prompt if request is not None else f.prompt,
            seed=request.seed if request is not None else int(f.seed),
            variant=request.variant_id if request is not None else f.variant_id,
            steps=request.steps if request is not None else int(f.steps),
            threshold=request.threshold if request is not None else float(f.threshold),
            gate=request.gate if request is not None else f.gate,
            fill=request.fill if request is not None else f.fill,
            skips=r.skips,
            ssim=r.ssim,
            gated_seconds=r.gated_seconds,
            vanilla_seconds=r.vanilla_seconds,
            speedup=r.speedup,
            speedup_label=r.speedup_label if r.speedup is not None else "",
            loras=request.loras if request is not None else self.form.loras,
            quantize=request.quantize if request is not None else None,
            model_path=request.model_path if request is not None else None,
        )

    def export_captions(self) -> dict[str, str]:
        r = self.run
        request = r.request
        skips = f"{r.skips}/{len(r.gated_steps)} skipped" if r.skips is not None else ""
        threshold = request.threshold if request is not None else self.form.threshold
        gate = request.gate if request is not None else self.form.gate
        fill = request.fill if request is not None else self.form.fill
        gated = gated_caption(gate, threshold, skips, fill)
        if r.gated_seconds is not None:
            gated += f"  {r.gated_seconds:.2f} s"
        vanilla = "Vanilla" + (f"  {r.vanilla_seconds:.2f} s" if r.vanilla_seconds else "")
        variant, seed, steps = (
            (request.variant_id, request.seed, request.steps)
            if request is not None
            else (self.form.variant_id, int(self.form.seed), int(self.form.steps))
        )
        parts = [variant, f"seed {seed}", f"{steps} steps"]
        parts += lora_captions(request.loras if request is not None else self.form.loras)
        if r.ssim is not None:
            parts.append(f"SSIM {r.ssim:.4f}")
        if r.ssimulacra2 is not None:
            parts.append(f"SSIMULACRA2 {r.ssimulacra2:.1f}")
        if r.speedup is not None:
            parts.append(speedup_caption(r.speedup, r.speedup_label))
        prompt = request.prompt if request is not None else self.form.prompt
        return {
            "gated_caption": gated,
            "vanilla_caption": vanilla,
            "footer": f"“{prompt}”  ·  " + "  ·  ".join(parts),
        }
