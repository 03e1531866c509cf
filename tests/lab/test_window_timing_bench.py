"""The window-timing benchmark's arithmetic (lab/bench/window_timing.py), on made-up runs."""

from __future__ import annotations

from typing import Any

import pytest

from lab.bench.window_timing import _gated_step_ms_from, summarise


def test_gated_step_time_is_the_median_of_computed_steps_that_really_ran() -> None:
    pattern = "FCSSCF"
    seconds = [0.9, 0.9, 0.01, 0.01, 0.1, 0.1]
    assert _gated_step_ms_from(pattern, seconds, 0) == pytest.approx(500.0)  # median of 4
    # steps 0 and 1 were replayed from vanilla: their times are vanilla's, left out
    assert _gated_step_ms_from(pattern, seconds, 2) == pytest.approx(100.0)
    assert _gated_step_ms_from("SS", [0.01, 0.01], 0) is None


def _bench(vanilla: float, gated: float) -> dict[str, Any]:
    return {
        "command": ["bench"],
        "recipe": {"steps": 4},
        "hardware": {"cores": 2},
        "conditions": {
            "vanilla": {"loop_seconds": {"median": vanilla}},
            "gated": {"skipped": [2]},
        },
        "speedup": {"gated_vs_vanilla": vanilla / gated, "ideal": 2.0},
        "runs": [
            {"condition": "gated", "pattern": "FSSF", "step_seconds": [0.1, 0.0, 0.0, 0.1]},
            {"condition": "vanilla", "pattern": "CCCC", "step_seconds": None},
        ],
    }


def _run(speedup: float, gated_ms: float, vanilla_ms: float) -> dict[str, Any]:
    return {
        "window_speedup": speedup,
        "window_label": f"{speedup:.2f}×",
        "window_gated_step_ms": gated_ms,
        "window_vanilla_step_ms": vanilla_ms,
    }


def test_summary_compares_every_window_run_with_the_bench() -> None:
    report = summarise([_run(2.0, 110.0, 105.0)], _bench(vanilla=0.4, gated=0.2))
    assert report["bench_speedup"] == 2.0
    assert report["cli_gated_step_ms"] == 100.0
    assert report["cli_vanilla_step_ms"] == 100.0
    assert (report["skipped"], report["steps"]) == (2, 4)
    [run] = report["runs"]
    assert (run["speedup_ratio"], run["gated_step_ratio"], run["vanilla_step_ratio"]) == (
        1.0,
        1.1,
        1.05,
    )
    assert report["meets_targets"]


@pytest.mark.parametrize(
    ("run", "speedup_ok", "steps_ok"),
    [
        (_run(2.4, 100.0, 100.0), False, True),  # the window overstates the speedup by 20%
        (_run(2.0, 120.0, 100.0), True, False),  # the window's gated steps are 20% slower
    ],
)
def test_a_run_outside_a_target_fails_the_summary(
    run: dict[str, Any], speedup_ok: bool, steps_ok: bool
) -> None:
    report = summarise([_run(2.0, 100.0, 100.0), run], _bench(vanilla=0.4, gated=0.2))
    assert report["meets_speedup_target"] is speedup_ok
    assert report["meets_step_time_target"] is steps_ok
    assert not report["meets_targets"]
