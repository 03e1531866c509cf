"""The plain summary line: every band reachable, its edges where the constants say, the speedup
never worded here, and the bands' basis (the committed by-eye sheet) consistent with them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.gate.kinds import TEACACHE_KIND, TeaCacheCalibration
from app.gate.provenance import Provenance
from app.ui.plain_words import (
    LOCAL_VISIBLE,
    SSIM_A_LITTLE,
    SSIM_NOTICEABLY,
    SSIM_VERY_LITTLE,
    Change,
    DetailFacts,
    detail_lines,
    picture_change,
    run_summary,
    short_summary,
    similarity_words,
)

BANDS_FILE = Path(__file__).parents[2] / "lab" / "ui" / "results" / "summary-bands.json"


@pytest.mark.parametrize(
    ("ssim", "local", "band"),
    [
        (1.0, 0.0, Change.none),
        (1.0, None, Change.none),
        (SSIM_VERY_LITTLE, 0.04, Change.very_little),
        (0.999, LOCAL_VISIBLE, Change.very_little),  # at the edge: not above it
        (0.999, np.nextafter(LOCAL_VISIBLE, 1), Change.a_little),  # one visible spot
        (np.nextafter(SSIM_VERY_LITTLE, 0), 0.04, Change.a_little),
        (SSIM_A_LITTLE, 0.8, Change.a_little),
        (np.nextafter(SSIM_A_LITTLE, 0), 0.04, Change.noticeably),
        (SSIM_NOTICEABLY, None, Change.noticeably),
        (np.nextafter(SSIM_NOTICEABLY, 0), None, Change.a_lot),
        (0.2, 1.0, Change.a_lot),
    ],
)
def test_every_band_is_reachable_at_its_edges(
    ssim: float, local: float | None, band: Change
) -> None:
    assert picture_change(float(ssim), None if local is None else float(local)) is band


def test_the_bands_are_ordered_and_inside_ssims_range() -> None:
    assert 0.0 < SSIM_NOTICEABLY < SSIM_A_LITTLE < SSIM_VERY_LITTLE < 1.0
    assert 0.0 < LOCAL_VISIBLE < 1.0  # the report's local difference is on a 0–1 scale


def test_summary_reads_like_the_issue_says() -> None:
    assert (
        run_summary(10, 28, 0.995, 0.05)
        == "TeaCache reused 10 of 28 steps; the picture changed very little"
    )
    assert run_summary(0, 28, 1.0, 0.0) == (
        "TeaCache reused none of the 28 steps; the picture is identical"
    )
    assert run_summary(24, 28, 0.5, 0.1).endswith("the picture changed a lot")
    assert run_summary(24, 28, 0.5, 0.8).endswith(  # the card says "one spot differs (0.80)"
        "the picture changed a lot, and one spot changed visibly"
    )
    assert run_summary(10, 28, 0.99, 0.83) == (  # the lost circle: SSIM alone says fine
        "TeaCache reused 10 of 28 steps; the picture changed very little overall, "
        "but one spot changed visibly"
    )
    assert "no picture without TeaCache" in run_summary(3, 8, None)
    assert run_summary(None, 28, 0.9) == ""


def test_the_short_form_keeps_the_counts_and_the_band() -> None:
    assert short_summary(run_summary(10, 28, 0.995, 0.05)) == (
        "10 of 28 steps reused; changed very little"
    )
    assert short_summary(run_summary(0, 28, 1.0, 0.0)) == "none of the 28 steps reused; identical"
    assert short_summary(run_summary(10, 28, 0.99, LOCAL_VISIBLE + 0.01)) == (
        "10 of 28 steps reused; changed very little, but one spot changed visibly"
    )


@pytest.mark.parametrize("ssim", [0.999, SSIM_VERY_LITTLE, 0.9379, 0.9, SSIM_NOTICEABLY, 0.5])
@pytest.mark.parametrize("local", [None, 0.05, LOCAL_VISIBLE, 0.3, 0.83])
def test_the_summary_names_a_local_change_whenever_the_card_does(
    ssim: float, local: float | None
) -> None:
    """#27 item 28: the walk's seed 701103987 at 0.1 lost a red circle (SSIM 0.9379, local 0.83);
    the card said "one spot differs (0.83)", the summary only "changed noticeably"."""
    card = similarity_words(ssim, local)
    summary = run_summary(10, 28, ssim, local)
    assert ("one spot" in card) == ("one spot changed visibly" in summary), (card, summary)
    assert ("one spot" in card) == ("one spot changed visibly" in short_summary(summary))


def test_a_visible_spot_beside_a_lower_band_reads_as_both() -> None:
    assert run_summary(10, 28, 0.9379, 0.83) == (
        "TeaCache reused 10 of 28 steps; the picture changed noticeably, and one spot changed "
        "visibly"
    )
    assert short_summary(run_summary(10, 28, 0.9379, 0.83)) == (
        "10 of 28 steps reused; changed noticeably, and one spot changed visibly"
    )


def test_summary_never_words_the_speedup() -> None:
    # The speedup card keeps its honesty label (measured / estimate …); plain words stay off it.
    for ssim in (1.0, 0.99, 0.96, 0.9, 0.5):
        text = run_summary(5, 28, ssim, 0.1).lower()
        assert not any(w in text for w in ("faster", "speed", "×", "estimate", "measured"))


def test_the_summary_and_the_target_search_share_one_local_bound() -> None:
    """One measure (the report's worst-window mean, app.metrics) and one bound: a spot the target
    search refuses is the spot the summary line names, and a spot it accepts reads as the band."""
    from app.engine.request import DEFAULT_MAX_LOCAL_DIFF, QualityTarget

    assert LOCAL_VISIBLE == DEFAULT_MAX_LOCAL_DIFF
    target = QualityTarget(min_ssim=0.98)
    for local in (0.0, 0.1, DEFAULT_MAX_LOCAL_DIFF, np.nextafter(DEFAULT_MAX_LOCAL_DIFF, 1), 0.83):
        spot = "one spot changed visibly" in run_summary(10, 28, 0.99, float(local))
        assert spot is not target.met_by(0.99, float(local))


def test_detail_lines_hold_the_technical_figures() -> None:
    lines = detail_lines(
        DetailFacts(
            ssim=0.98765,
            local_diff=0.0988,
            max_abs_diff=0.0123,
            threshold=0.1,
            calibration_lines=tuple(
                TEACACHE_KIND.calibration_lines(
                    TeaCacheCalibration(
                        coefficients=(1.0, -2.0, 0.5, 0.25, 0.01),
                        calibrated_range=(0.03, 0.2),
                        default_threshold=0.1,
                        provenance=Provenance("fit on 12 prompts"),
                    )
                )
            ),
            calibration="fit on 12 prompts. Fit quality: R² 0.42.",
            resumed_from=4,
            steps=28,
            latents_sha256="ab" * 32,
            vanilla_latents_sha256="cd" * 32,
        )
    )
    text = "\n".join(lines)
    assert "SSIM against vanilla: 0.9877" in text
    assert "Local difference: 0.099" in text
    assert "0.0123" in text
    assert "R² 0.42" in text
    assert "1·x^4 + -2·x^3 + 0.5·x^2 + 0.25·x^1 + 0.01" in text
    assert "0.03 – 0.2" in text
    assert "resumed from step 5" in text
    assert "ab" * 32 in text and "cd" * 32 in text
    assert detail_lines(DetailFacts()) == []
    everything_replayed = detail_lines(DetailFacts(resumed_from=28, steps=28))
    assert everything_replayed == ["Resume: every step replayed from vanilla (nothing skipped)"]


def test_the_committed_sheet_agrees_with_the_bands() -> None:
    """The bands' basis: each run on the by-eye sheet lands in the band its summary says, and the
    sheet covers every band but "none" and the local-spot override (noted beside the constant)."""
    runs = json.loads(BANDS_FILE.read_text())["runs"]
    assert len(runs) == 15
    seen = set()
    for run in runs:
        band = picture_change(run["ssim"], run["local_diff"])
        assert run["band"] == band.name
        assert run["summary"] == run_summary(run["skipped"], 28, run["ssim"], run["local_diff"])
        assert run["skipped"] > 0  # engagement: every run on the sheet skipped steps
        seen.add(band)
    assert seen == {Change.very_little, Change.a_little, Change.noticeably, Change.a_lot}
    high = [r for r in runs if r["ssim"] >= SSIM_VERY_LITTLE]
    assert high and max(r["local_diff"] for r in high) <= LOCAL_VISIBLE
