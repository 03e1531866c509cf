"""The typed run report: how two passes become one result, its JSON, and the speedup label that
says exactly what was measured (issue #22)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from app.engine.report import (
    PassResult,
    RunReport,
    TargetProbe,
    TargetSearch,
    measure_run,
)
from app.engine.request import QualityTarget, make_request
from app.fileio.jsonio import dumps_json
from app.gate import Decision, Engagement, StepEvent
from app.storage.history import META_FILE, HistoryEntry, HistoryStore
from tests.fakes.steps import tea_step

STEPS = 8
AT_14_02 = datetime(2026, 3, 1, 14, 2, 31, tzinfo=timezone(timedelta(hours=1)))


def _steps(pattern: str, seconds: float) -> tuple[StepEvent, ...]:
    decisions = {"F": Decision.forced, "C": Decision.computed, "S": Decision.skipped}
    return tuple(
        tea_step(i, len(pattern), decisions[c], 0.05, 0.04, 0.08, 0.1, seconds)
        for i, c in enumerate(pattern)
    )


def _report(
    *, resumed_from: int | None = None, cached: bool = False, measured_at: datetime = AT_14_02
) -> RunReport:
    request = make_request("demo", "two red circles", steps=STEPS, threshold=0.1)
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    gated = PassResult(image, _steps("FCSSCSCF", 0.1), 0.5, resumed_from=resumed_from)
    vanilla = PassResult(
        image, _steps("CCCCCCCC", 0.1), 0.8, measured_at=measured_at, cached=cached
    )
    return measure_run(request, gated, vanilla)


def test_both_passes_run_now_is_measured() -> None:
    report = _report()
    assert report.speedup == pytest.approx(0.8 / 0.5)
    assert report.speedup_label == "measured"
    assert not report.speedup_estimated


def test_a_pass_resumed_at_step_0_replayed_nothing_and_is_measured() -> None:
    report = _report(resumed_from=0)
    assert report.gated.replayed_steps == 0
    assert report.speedup_label == "measured"
    assert not report.speedup_estimated


@pytest.mark.parametrize("replayed", [1, 3, STEPS])
def test_replayed_steps_make_an_estimate_that_says_how_many(replayed: int) -> None:
    report = _report(resumed_from=replayed)
    assert report.speedup_label == f"estimate ({replayed} of {STEPS} steps replayed)"
    assert report.speedup_estimated


RETIMED = "steps at this run's mean computed-step time (±<1%): 0.8 s ÷ 0.8 s"


def test_a_cached_vanilla_says_so_when_it_was_measured_and_the_times_it_was_re_timed_to() -> None:
    # Every step of these passes took 0.1 s: re-timed, vanilla's 8 steps and the gated pass's 8
    # (its skips cost a computed step here) are both 0.8 s, and the label says so.
    cached = _report(cached=True)
    assert cached.speedup_label == f"re-timed estimate, vanilla cached at 14:02, {RETIMED}"
    assert cached.speedup == pytest.approx(1.0) and cached.speedup_estimated
    both = _report(cached=True, resumed_from=2)
    assert both.speedup_label == (
        f"re-timed estimate (2 of 8 steps replayed), vanilla cached at 14:02, {RETIMED}"
    )


def test_no_vanilla_no_speedup_no_label() -> None:
    report = _report()
    alone = RunReport(report.request, report.gated)
    assert alone.speedup is None and alone.speedup_label == "" and alone.ssim is None


def test_ssim_is_measured_once_here() -> None:
    report = _report()
    assert report.ssim == pytest.approx(1.0)  # the same image on both sides
    tiny = np.zeros((4, 4, 3), np.uint8)
    small = measure_run(
        report.request,
        PassResult(tiny, report.gated.steps, 0.5),
        PassResult(tiny, report.gated.steps, 0.8),
    )
    assert small.ssim is None  # below scikit-image's window: undefined, not a number


def test_json_keeps_the_report_keys_and_carries_the_label() -> None:
    data = _report(resumed_from=3, cached=True).to_json()
    assert {
        "variant", "prompt", "seed", "steps", "threshold", "skipped", "computed", "pattern",
        "longest_skip_streak", "steps_detail", "gated_seconds", "resumed_from_step", "ssim",
        "vanilla_seconds", "vanilla_pattern", "vanilla_trace", "speedup", "max_abs_diff",
    } <= set(data)  # fmt: skip
    assert (data["skipped"], data["pattern"], data["longest_skip_streak"]) == (3, "FCSSCSCF", 2)
    label = f"re-timed estimate (3 of 8 steps replayed), vanilla cached at 14:02, {RETIMED}"
    assert data["speedup_label"] == label
    assert (data["speedup_kind"], data["speedup_ideal"]) == ("re-timed", 8 / 5)
    assert (data["speedup_vanilla_seconds"], data["speedup_gated_seconds"]) == pytest.approx(
        (0.8, 0.8)
    )
    assert data["vanilla_measured_at"] == "2026-03-01T14:02:31+01:00"
    json.dumps(data)  # plain JSON, no numpy or datetime left


def test_history_saves_the_reports_label_and_numbers(tmp_path: Path) -> None:
    report = _report(resumed_from=3, cached=True)
    entry = HistoryStore(tmp_path).save(report)
    [read] = HistoryStore(tmp_path).entries()
    assert read.speedup_label == report.speedup_label == entry.report_json["speedup_label"]
    assert _saved_report(read)["speedup_label"] == report.speedup_label  # run.json's report
    assert read.speedup == pytest.approx(report.speedup)
    assert read.report.ssim == pytest.approx(report.ssim)
    assert read.speedup_estimated


def _saved_report(entry: HistoryEntry) -> dict[str, object]:
    return json.loads((entry.folder / META_FILE).read_text())["report"]


def _full_report() -> RunReport:
    """Every field a report can carry: a cached vanilla re-timed, replayed steps, a local
    difference, the engagement and a target search."""
    request = make_request("demo", "two red circles", steps=STEPS, threshold=0.1)
    rng = np.random.default_rng(5)
    gated_image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    vanilla_image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    gated = PassResult(
        gated_image,
        _steps("FCSSCSCF", 0.1),
        0.5,
        wall_seconds=0.6,
        latents_sha256="ab" * 32,
        peak_memory_bytes=1234,
        resumed_from=2,
    )
    vanilla = PassResult(
        vanilla_image,
        _steps("CCCCCCCC", 0.1),
        0.8,
        wall_seconds=0.9,
        latents_sha256="cd" * 32,
        measured_at=AT_14_02,
        cached=True,
    )
    measured = measure_run(
        request,
        gated,
        vanilla,
        max_abs_diff=4.5,
        engagement=Engagement(6, 0.0295, 3),
        gate_fields={
            "teacache": {"coefficients": (1.0, -2.0, 0.5), "calibrated_range": (0.01, 0.4)}
        },
        versions={"mlx": "0.1"},
        warmup_seconds=0.25,
    )
    probe = TargetProbe(0.1, 3, "FCSSCSCF", measured.ssim, 0.2, True, predicted_skipped=3)
    search = TargetSearch(QualityTarget(0.5, 0.25), (probe,), 0.1, True, "kept 0.1")
    return replace(measured, target_search=search)


def test_from_json_reads_back_what_to_json_wrote() -> None:
    report = _full_report()
    assert report.local_diff is not None and report.engagement is not None  # all filled
    assert report.rescaled and report.gated.replayed_steps == 2
    data = json.loads(json.dumps(report.to_json()))  # through a file's text
    assert report.vanilla is not None
    back = RunReport.from_json(
        data,
        gated_image=report.gated.image,
        vanilla_image=report.vanilla.image,
        vanilla_steps=report.vanilla.steps,
    )
    assert back.to_json() == report.to_json()
    assert back.request == report.request
    assert back.gated.steps == report.gated.steps and back.vanilla is not None
    assert back.vanilla.steps == report.vanilla.steps
    assert back.local_diff == report.local_diff and back.engagement == report.engagement
    assert back.target_search == report.target_search
    # Derived again, never copied: the label names the re-timing, the figure is re-timed.
    assert back.speedup == pytest.approx(report.speedup)
    assert "re-timed" in back.speedup_label and back.speedup_label == report.speedup_label
    # Without the vanilla steps given apart, the JSON's own (vanilla_steps_detail) are read.
    whole = RunReport.from_json(
        data, gated_image=report.gated.image, vanilla_image=report.vanilla.image
    )
    assert whole.to_json() == report.to_json() and whole.speedup_label == report.speedup_label
    assert whole.vanilla is not None and whole.vanilla.steps == report.vanilla.steps
    # A report.json from before they were written whole: its per-step vanilla columns suffice.
    columns = {k: v for k, v in data.items() if k != "vanilla_steps_detail"}
    alone = RunReport.from_json(
        columns, gated_image=report.gated.image, vanilla_image=report.vanilla.image
    )
    rebuilt = {k: v for k, v in alone.to_json().items() if k != "vanilla_steps_detail"}
    assert json.loads(json.dumps(rebuilt)) == columns
    assert alone.speedup_label == report.speedup_label


def test_from_json_says_what_is_missing() -> None:
    data = _full_report().to_json()
    image = np.zeros((32, 32, 3), np.uint8)
    for key, words in (("gated_seconds", "gated time"), ("steps_detail", "per-step record")):
        broken = {k: v for k, v in data.items() if k != key}
        with pytest.raises(ValueError, match=words):
            RunReport.from_json(broken, gated_image=image)
    with pytest.raises(ValueError, match="request"):
        RunReport.from_json({**data, "seed": "x"}, gated_image=image)


def test_a_history_entry_reads_its_report_back_whole(tmp_path: Path) -> None:
    report = _full_report()
    HistoryStore(tmp_path).save(report)
    [entry] = HistoryStore(tmp_path).entries()
    assert entry.report.to_json() == report.to_json()
    assert entry.speedup_label == report.speedup_label  # the full label, re-timing included
    read = entry.report
    assert (read.gated.skipped, read.ssim, read.local_diff_value) == (
        report.gated.skipped,
        report.ssim,
        report.local_diff_value,
    )


def test_the_fill_and_its_step_records_read_back_and_old_reports_reused() -> None:
    report = _report()
    request = replace(report.request, fill="forecast")
    steps = list(report.gated.steps)
    steps[3] = replace(steps[3], fill={"reach": 1.0})
    steps[4] = replace(steps[4], fill={"error": 0.02, "reuse_error": float("nan")})
    gated = replace(report.gated, steps=tuple(steps))
    report = replace(report, request=request, gated=gated)
    data = json.loads(dumps_json(report.to_json()))  # the app's strict JSON: NaN as null
    assert data["fill"] == "forecast"
    back = RunReport.from_json(data, gated_image=report.gated.image)
    assert back.request.fill == "forecast"
    assert back.gated.steps[3].fill == {"reach": 1.0}
    assert back.gated.steps[4].fill == {"error": 0.02}  # the non-finite figure left out
    older = {k: v for k, v in data.items() if k != "fill"}
    older["steps_detail"] = [
        {k: v for k, v in row.items() if k != "fill"} for row in data["steps_detail"]
    ]
    old = RunReport.from_json(older, gated_image=report.gated.image)
    assert old.request.fill == "reuse" and all(s.fill == {} for s in old.gated.steps)
