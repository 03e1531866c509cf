"""Every number, label and banner belongs to the result on screen (issue #27, items 1 and 2).

A result reaches the window three ways: a run that just finished, a run reopened from the history
and an entry picked in a threshold comparison. Each shows its own report: SSIM, skips, the local
difference, the latent difference and digests in Details, the summary line, and only the banners
computed for it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot
from ui_support import SIGNAL_TIMEOUT_MS, WindowFactory, run_to_end

from app.engine.report import RunReport
from app.ui.job_slot import JobStatus
from app.ui.plain_words import run_summary
from app.ui.window import MainWindow
from tests.fakes.engine import FakeEngine

REAL_TIMEOUT_MS = 300_000  # CPU MLX on a 2-core machine shared by many
STEPS = 12  # the real demo: short enough for CPU, long enough to lose an object at 0.99
FAKE_FINISH_MS = 60_000


def _compare(qtbot: QtBot, window: MainWindow, thresholds: str, timeout: int) -> None:
    dialog = window.show_comparison()
    dialog.thresholds.setText(thresholds)
    assert window.comparer.start(thresholds) is not None
    qtbot.waitUntil(lambda: window.comparer.status is JobStatus.finished, timeout=timeout)
    qtbot.waitUntil(lambda: window.comparer.saved_entry is not None, timeout=timeout)


def _pick(window: MainWindow, threshold: float) -> RunReport:
    index = next(
        i
        for i, row in enumerate(window.comparer.rows)
        if row is not None and row.threshold == pytest.approx(threshold)
    )
    row = window.comparer.rows[index]
    assert row is not None and row.report is not None
    assert window.comparer.pick(index)
    return row.report


@pytest.mark.slow
def test_a_comparison_pick_shows_its_own_local_difference_details_and_summary(
    qtbot: QtBot, make_real_window: Callable[[int], MainWindow]
) -> None:
    window = make_real_window(STEPS)
    window.form.seed = 999999999  # the walk's seed: 0.99 loses both circles
    window.form.threshold = 0.05
    with qtbot.waitSignal(window.run_ended, timeout=REAL_TIMEOUT_MS) as blocker:
        assert window.session.generate() is not None
    assert blocker.args[0] is JobStatus.finished, window.run.error  # type: ignore[index]
    single = window.run.report
    assert single is not None and single.local_diff is not None

    _compare(qtbot, window, "0.05, 0.1, 0.3, 0.99", REAL_TIMEOUT_MS)
    picked = _pick(window, 0.99)
    assert picked.local_diff is not None and picked.max_abs_diff is not None
    assert picked.gated.skipped > 0  # engagement: the pick skipped steps …
    # … and differs from the single run in every figure asserted below (else the test proves
    # nothing about which run is shown).
    assert picked.local_diff.value != single.local_diff.value
    assert picked.max_abs_diff != single.max_abs_diff
    assert picked.gated.latents_sha256 != single.gated.latents_sha256

    run = window.run
    assert run.report is picked
    assert (run.ssim, run.local_diff, run.skips) == (
        picked.ssim,
        picked.local_diff.value,
        picked.gated.skipped,
    )
    summary = run_summary(picked.gated.skipped, STEPS, picked.ssim, picked.local_diff.value)
    qtbot.waitUntil(
        lambda: window.run_details.summary.full_text() == summary, timeout=SIGNAL_TIMEOUT_MS
    )
    figures = window.run_details.figures.text()
    assert f"Local difference: {picked.local_diff.value:.3f}" in figures
    assert f"Latent max |gated − vanilla|: {picked.max_abs_diff:.4g}" in figures
    assert f"(TeaCache): {picked.gated.latents_sha256}" in figures
    assert single.gated.skipped > 0 and single.gated.latents_sha256 is not None  # not vanilla's
    assert single.gated.latents_sha256 not in figures
    tooltip = window.compare.ssim_card.toolTip()
    assert f"Worst local difference {picked.local_diff.value:.3f}" in tooltip


def test_a_pick_shows_no_banner_computed_for_another_variants_run(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window(FakeEngine())
    window.session.select_variant("demo-turbo")
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert window.banners.banner("schedule") is not None  # the turbo's own banner, rightly
    assert window.session.select_variant("demo")  # as "Use Demo shapes" does
    window.form.steps = 10
    _compare(qtbot, window, "0.05, 0.1, 0.2, 0.3", FAKE_FINISH_MS)
    picked = _pick(window, 0.2)
    assert picked.gated.skipped > 0  # the picked result skips: no banner may say it cannot
    assert window.gate_advice.schedule_notice() is None
    assert window.banners.banner("schedule") is None
    assert window.run.report is picked


def test_a_reopened_run_shows_no_banner_computed_for_another_variants_run(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    window = make_window(FakeEngine())
    window.form.steps = 10
    assert run_to_end(qtbot, window) is JobStatus.finished
    [demo_entry] = window.history.entries()
    assert demo_entry.report.gated.skipped > 0
    window.session.select_variant("demo-turbo")
    assert run_to_end(qtbot, window) is JobStatus.finished
    assert window.banners.banner("schedule") is not None
    assert window.session.select_variant("demo")
    assert window.session.open_entry(demo_entry)
    assert window.gate_advice.schedule_notice() is None
    assert window.banners.banner("schedule") is None
    assert window.run.report is not None and window.run.skips == demo_entry.report.gated.skipped


def test_the_difference_view_and_the_local_difference_are_one_measure(
    qtbot: QtBot, make_window: WindowFactory
) -> None:
    """The heat map the window draws and the local difference printed beside it are one
    definition of the difference (the largest RGB channel per pixel): the worst window of the
    drawn image is the reported number."""
    window = make_window(FakeEngine())
    window.form.threshold = 0.3  # the fake's gated image gets per-channel noise per skip
    assert run_to_end(qtbot, window) is JobStatus.finished
    report, drawn = window.run.report, window.run.difference
    assert report is not None and report.local_diff is not None and drawn is not None
    assert report.gated.skipped > 0 and report.local_diff.value > 0
    local = report.local_diff
    window_mean = drawn[local.y : local.y + local.size, local.x : local.x + local.size].mean()
    assert window_mean / 255 == pytest.approx(local.value, rel=1e-6)
