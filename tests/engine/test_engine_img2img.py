"""The engine from a picture, on the embedded demo (its codec encodes the shipped sketch): the
vanilla and the gated pass start from the same noised picture, a resumed pass equals a full one
bit for bit, and a target search runs its resumed passes over the steps strength leaves."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.jobs import Generate, run_job
from app.engine.request import QualityTarget, make_request
from app.engine.target import QualitySearch
from app.paths import DEMO_SKETCH

PROMPT = "a red circle on a blue background"
STEPS, STRENGTH = 12, 0.8  # the first 2 steps never run: 10 for the gate


def _request(**kw: Any) -> Any:
    return make_request(
        "demo", PROMPT, seed=4, steps=STEPS, images=[DEMO_SKETCH], strength=STRENGTH, **kw
    )


def test_a_resumed_pass_from_a_picture_equals_the_full_pass() -> None:
    engine = Engine(warmup_steps=0)
    seen: list[Any] = []
    cancel = threading.Event()
    full = engine.generate(1, _request(threshold=0.1), seen.append, cancel)
    resumed = engine.generate(2, _request(threshold=0.1, resume=True), seen.append, cancel)
    active = _request().active_steps
    assert active == 10
    assert full.gated.skipped > 0  # the gate engaged among the steps that ran
    assert len(full.gated.steps) == len(full.vanilla.steps) == active  # type: ignore[union-attr]
    # resumed (not run whole): the resume check counts the steps that run, not the schedule
    assert resumed.vanilla_cached and resumed.gated.resumed_from is not None
    assert resumed.gated.latents_sha256 == full.gated.latents_sha256
    assert resumed.gated.pattern == full.gated.pattern
    started = [e for e in seen if isinstance(e, ev.PassStarted)]
    assert {e.num_steps for e in started} == {active}


def test_a_target_search_from_a_picture_resumes_over_the_steps_that_run() -> None:
    seen: list[Any] = []
    job = QualitySearch(_request(threshold=0.1), QualityTarget(min_ssim=0.9))
    report = run_job(Engine(warmup_steps=0), 1, job, seen.append, threading.Event())
    assert report is not None and report.target_search is not None
    probes = report.target_search.probes
    assert len(probes) >= 2
    assert all(len(p.pattern) == 10 for p in probes)
    assert report.request.images[0].sha256 and report.request.strength == STRENGTH
    finished = [e for e in seen if isinstance(e, ev.PassFinished) and e.which is ev.Pass.gated]
    assert len(finished) == len(probes)


def test_generate_job_from_a_picture_reports_its_request() -> None:
    seen: list[Any] = []
    report = run_job(Engine(warmup_steps=0), 1, Generate(_request(threshold=0.0)), seen.append,
                     threading.Event())  # fmt: skip
    assert report is not None
    assert report.max_abs_diff == 0.0  # both passes from the same picture, one numerical path
    assert report.request.steps_left_out == 2


def test_magcache_from_a_picture_decides_on_the_schedules_table_where_the_run_starts() -> None:
    """MagCache reads its table by the schedule's step: the live gate's verdicts on a run from a
    picture are the simulator's on the cut table (``GateKind.for_steps_run``), exactly."""
    from app.gate.kinds import gate_kind

    request = _request(threshold=0.12, gate="magcache")
    report = Engine(warmup_steps=0).generate(1, request, lambda _e: None, threading.Event())
    kind = gate_kind("magcache")
    params = request.gate_params()
    assert (
        params.ratios
        == kind.params(kind.calibration_of(request.variant), 0.12).ratios_for(STEPS)[2:]
    )  # type: ignore[union-attr, attr-defined]
    expected = "".join(v.decision.letter for v in kind.simulate(params, [None] * 10))
    assert report.gated.pattern == expected and report.gated.skipped > 0


def test_a_forecast_from_a_picture_spaces_by_the_steps_that_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forecast fill on a run from a picture: the gate is handed the positions of the steps
    that run (the schedule's last ten of twelve, as a run from noise places them), a skipped step
    forecasts, the fill reaches the picture, and a resumed forecast pass equals a full one."""
    from app.gate.fill import REACH
    from app.gate.live import LiveGate

    handed: list[tuple[float, ...]] = []
    begin = LiveGate.begin

    def recording(self: LiveGate, num_steps: int, positions: Any = None) -> None:
        handed.append(tuple(positions or ()))
        begin(self, num_steps, positions)

    monkeypatch.setattr(LiveGate, "begin", recording)
    engine = Engine(warmup_steps=0)
    cancel = threading.Event()
    from_noise = make_request("demo", PROMPT, seed=4, steps=STEPS, threshold=0.0)
    engine.generate(1, from_noise, lambda _e: None, cancel)
    schedule = handed[-1]
    reused = engine.generate(2, _request(threshold=0.1), lambda _e: None, cancel)
    forecast = engine.generate(3, _request(threshold=0.1, fill="forecast"), lambda _e: None, cancel)
    positions = handed[-1]
    resumed = engine.generate(
        4, _request(threshold=0.1, fill="forecast", resume=True), lambda _e: None, cancel
    )

    assert len(schedule) == STEPS and positions == schedule[STEPS - 10 :]
    assert len(forecast.gated.pattern) == 10 and forecast.gated.skipped > 0
    assert any(step.fill.get(REACH, 0.0) > 0 for step in forecast.gated.steps)  # engaged
    assert forecast.gated.latents_sha256 != reused.gated.latents_sha256
    assert resumed.gated.resumed_from is not None
    assert resumed.gated.latents_sha256 == forecast.gated.latents_sha256
