"""The run in plain words: one summary line an artist reads ("TeaCache reused 10 of 28 steps; the
picture changed very little", naming the gate that ran), and the technical figures the "Details"
disclosure holds.

Qt-free. The picture's wording comes from two figures the run's report already has: SSIM (the whole
picture) and the local difference (``RunReport.local_diff``, ``app.metrics``: the worst window's
mean difference, 0–1), because a high SSIM can hide one small region that changed. The same figure
and bound drive the Similarity card's "one spot differs" and the target search. The speedup keeps
its own label (measured / estimate …); this module never words it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from app.engine.request import DEFAULT_MAX_LOCAL_DIFF
from app.gate.events import StepEvent
from app.gate.fill import DEFAULT_FILL, ERROR, REACH, REUSE_ERROR, get_fill
from app.gate.kinds import DEFAULT_GATE, gate_kind
from app.metrics import ssimulacra2_words
from app.variants import Variant

# SSIM bands, from lab/ui/results/summary-bands.png and .json (`python -m lab.ui.summary_bands`:
# the demo at 28 steps, 3 prompts × thresholds 0.1, 0.2, 0.3, 0.5, 1.0, vanilla | TeaCache |
# difference, looked at by eye on 2026-12-01). The four runs at SSIM ≥ 0.98 differed only by a
# thin edge seen when flicking between the two; the one at 0.967 had one circle's edge visibly
# reshaped; the seven at 0.85–0.95 had an edge or a shape visibly changed (cut, blocked or
# moved); the three below 0.85 (0.799, 0.843, 0.8498) had a shape redrawn or a new patch of colour.
SSIM_VERY_LITTLE = 0.98
SSIM_A_LITTLE = 0.95
SSIM_NOTICEABLY = 0.85
# The local difference (0–1) above which one spot changed visibly even when SSIM says the picture
# as a whole did not (SSIM averages over the whole image, so one small spot moves it little): the
# target search's default bound, one constant with one basis (lab/target/results/
# local-diff-survey.json, written next to it in app.engine.request).
LOCAL_VISIBLE = DEFAULT_MAX_LOCAL_DIFF


class Change(IntEnum):
    """How much the TeaCache picture differs from the one without skipping, least first."""

    none = 0
    very_little = 1
    a_little = 2
    noticeably = 3
    a_lot = 4


CHANGE_WORDS = {
    Change.none: "the picture is identical",
    Change.very_little: "the picture changed very little",
    Change.a_little: "the picture changed a little",
    Change.noticeably: "the picture changed noticeably",
    Change.a_lot: "the picture changed a lot",
}


def picture_change(ssim: float, local_diff: float | None = None) -> Change:
    """The band of one run; a visible local spot raises "very little" to "a little"."""
    if ssim >= 1.0 and (local_diff is None or local_diff == 0.0):
        return Change.none
    if ssim >= SSIM_VERY_LITTLE:
        band = Change.very_little
    elif ssim >= SSIM_A_LITTLE:
        band = Change.a_little
    elif ssim >= SSIM_NOTICEABLY:
        band = Change.noticeably
    else:
        band = Change.a_lot
    if band is Change.very_little and local_diff is not None and local_diff > LOCAL_VISIBLE:
        return Change.a_little
    return band


def run_summary(
    skips: int | None,
    steps: int,
    ssim: float | None,
    local_diff: float | None = None,
    gate: str = DEFAULT_GATE,
) -> str:
    """One sentence for the window after a run, naming the gate that ran; "" while there is
    nothing to say."""
    if skips is None or steps <= 0:
        return ""
    label = gate_kind(gate).label
    reused = (
        f"{label} reused {skips} of {steps} steps"
        if skips
        else f"{label} reused none of the {steps} steps"
    )
    if ssim is None:
        return reused + f" (no picture without {label} to compare with)"
    change = picture_change(ssim, local_diff)
    words = CHANGE_WORDS[change]
    # A visible spot is named whenever the Similarity card names it (``similarity_words``): SSIM
    # averages one lost object away at any band.
    if local_diff is not None and local_diff > LOCAL_VISIBLE:
        if ssim >= SSIM_VERY_LITTLE:
            words = "the picture changed very little overall, but one spot changed visibly"
        else:
            words += ", and one spot changed visibly"
    return f"{reused}; {words}"


def short_summary(summary: str) -> str:
    """The same sentence for a narrow window: "10 of 28 steps reused; changed very little"."""
    _, reused, rest = summary.partition(" reused ")  # after the gate's name
    text = rest if reused else summary
    text = text.replace(" steps;", " steps reused;", 1)
    text = text.replace("; the picture is ", "; ").replace("; the picture ", "; ")
    return text.replace(" overall, but", ", but")


# How the window makes a calibration (the command line's sentence names its command instead).
CALIBRATE_IN_WINDOW = "make one with Model ▸ Calibrate This Model…"


def gate_unavailable(variant: Variant, gate: str) -> str | None:
    """``Variant.gate_unavailable_reason`` in the window's words."""
    return variant.gate_unavailable_reason(gate, CALIBRATE_IN_WINDOW)


def calibration_tooltip(gate: str) -> str:
    """The sidebar calibration box's hover: plain words; the figures and their source sit under
    Details (``calibration_detail_lines``)."""
    label = gate_kind(gate).label
    return (
        f"{label} judges each step with numbers measured for this model: its calibration. "
        "Where they come from and how well they fit: Details, under the images."
    )


@dataclass(frozen=True, slots=True)
class DetailFacts:
    """What the Details disclosure lists; every field optional (a run may lack any of them)."""

    ssim: float | None = None
    local_diff: float | None = None
    ssimulacra2: float | None = None
    max_abs_diff: float | None = None  # final latents, gated against vanilla
    threshold: float | None = None
    gate: str = DEFAULT_GATE  # the gate that ran: names the threshold and the gated latents
    calibration_lines: tuple[str, ...] = ()  # the gate's own figures (``GateKind``)
    calibration: str = ""  # provenance, e.g. "fit on 10 prompts × 28 steps, R² 0.98 …"
    resumed_from: int | None = None
    steps: int = 0
    latents_sha256: str | None = None
    vanilla_latents_sha256: str | None = None
    fill: str = DEFAULT_FILL  # what the skipped steps added (``app.gate.fill``)
    steps_detail: tuple[StepEvent, ...] = ()  # the gated pass's steps: the fill's records


def detail_lines(facts: DetailFacts) -> list[str]:
    """The technical figures, one per line, in the order an engineer checks them."""
    lines: list[str] = []
    if facts.ssim is not None:
        lines.append(f"SSIM against vanilla: {facts.ssim:.4f} (uint8 RGB, 1 = identical)")
    if facts.ssimulacra2 is not None:
        lines.append(
            f"SSIMULACRA2 against vanilla: {facts.ssimulacra2:.1f} (100 = identical: "
            f"{ssimulacra2_words(facts.ssimulacra2)})"
        )
    if facts.local_diff is not None:
        lines.append(
            f"Local difference: {facts.local_diff:.3f} (worst window's mean difference, 0–1)"
        )
    if facts.max_abs_diff is not None:
        lines.append(f"Latent max |gated − vanilla|: {facts.max_abs_diff:.4g}")
    kind = gate_kind(facts.gate)
    if facts.threshold is not None:
        lines.append(f"Threshold ({kind.label}, {kind.threshold_quantity}): {facts.threshold:g}")
    lines += facts.calibration_lines
    if facts.calibration:
        lines.append(f"Calibration: {facts.calibration}")
    if facts.threshold is not None:
        lines += fill_detail_lines(facts.fill, facts.steps_detail)
    resumed = _resume_line(facts.resumed_from, facts.steps)
    if resumed:
        lines.append(resumed)
    if facts.latents_sha256:
        lines.append(f"Final latents SHA-256 ({kind.label}): {facts.latents_sha256}")
    if facts.vanilla_latents_sha256:
        lines.append(f"Final latents SHA-256 (vanilla): {facts.vanilla_latents_sha256}")
    return lines


def fill_step_lines(step: StepEvent) -> list[str]:
    """A gated step's fill, for the timeline's tooltip: what a skipped step added, and on the
    step that closed a streak, how far off the fill was (``app.gate.fill``)."""
    record = step.fill
    lines: list[str] = []
    if REACH in record:
        reach = int(record[REACH])
        lines.append(
            "added the last computed change as it was"
            if reach == 0
            else f"added a forecast of the change, {reach} step{'s' * (reach != 1)} past the last "
            "computed one"
        )
    if ERROR in record:
        lines.append(
            f"fill check: the skipped steps before were off by up to {record[ERROR]:.3f} of "
            f"this step's change (reusing: {record.get(REUSE_ERROR, float('nan')):.3f})"
        )
    return lines


def fill_detail_lines(fill: str, steps: Sequence[StepEvent]) -> list[str]:
    """Details: what the skipped steps added, and the fill's checks after each streak (each
    estimated at the step that computed next: 0 = exact, relative to that step's change)."""
    chosen = get_fill(fill)
    lines = [f"On a skipped step: {chosen.choice} ({chosen.describe()})"]
    skipped = [s for s in steps if REACH in s.fill]
    forecast = sum(s.fill[REACH] > 0 for s in skipped)
    if forecast:
        lines.append(f"Forecast on {forecast} of {len(skipped)} skipped steps")
    checks = [s for s in steps if ERROR in s.fill]
    if checks:
        worst = max(checks, key=lambda s: s.fill[ERROR])
        reuse = [s.fill[REUSE_ERROR] for s in checks if REUSE_ERROR in s.fill]
        count = f"{len(checks)} streak{'s' * (len(checks) != 1)}"
        lines.append(
            f"Fill check after {count} (0 = exact, relative to the next computed step's "
            f"change): worst {worst.fill[ERROR]:.3f} before step {worst.index + 1} (reusing: "
            f"{worst.fill.get(REUSE_ERROR, float('nan')):.3f}); mean "
            f"{statistics.fmean(s.fill[ERROR] for s in checks):.3f}"
            + (f" (reusing: {statistics.fmean(reuse):.3f})" if reuse else "")
        )
    return lines


def calibration_detail_lines(variant: Variant, gate: str) -> list[str]:
    """Details before any run: the picked gate's calibration for the picked model (its figures
    and provenance), or why there is none."""
    kind = gate_kind(gate)
    calibration = kind.calibration_of(variant)
    if calibration is None:
        reason = gate_unavailable(variant, gate)
        return [reason] if reason else []
    facts = DetailFacts(
        gate=gate,
        calibration_lines=tuple(kind.calibration_lines(calibration)),
        calibration=kind.provenance_text(calibration),
    )
    return [f"{kind.label} on {variant.display_name}:", *detail_lines(facts)]


def _resume_line(resumed_from: int | None, steps: int) -> str:
    if not resumed_from:  # re-seeded at step 0: nothing was replayed
        return ""
    if steps and resumed_from >= steps:
        return "Resume: every step replayed from vanilla (nothing skipped)"
    return (
        f"Resume: steps 1–{resumed_from} replayed from vanilla; "
        f"resumed from step {resumed_from + 1}"
    )


def similarity_words(ssim: float, local_diff: float | None = None) -> str:
    """The Similarity card's word for a run, which the History row repeats: SSIM's band
    ("identical", "changed very little" …), unless one spot differs more than the default local
    bound ("one spot differs (0.83)"): an image can be identical on average with one object
    gone."""
    if local_diff is not None and local_diff > LOCAL_VISIBLE:
        return f"one spot differs ({local_diff:.2f})"
    # The summary line's band for SSIM alone, so the two never disagree.
    return CHANGE_WORDS[picture_change(ssim)].removeprefix("the picture ").removeprefix("is ")
