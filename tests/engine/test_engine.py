"""The engine on a tiny FLUX.2 shell (mflux's real loop, random weights, float32 on CPU).

Oracles: paired same-process runs. Vanilla (observe mode) and gated share one eager numerical path,
so at threshold 0 they must agree bit for bit, and a gated pass resumed from the vanilla trajectory
must equal a full gated pass bit for bit. Quality is not judged here (random weights).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import mlx.core as mx
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app import variants
from app.adapters.common import use_precision
from app.adapters.flux2 import shell as flux2_shell
from app.engine import events as ev
from app.engine.engine import Engine, UserFacingError
from app.engine.request import make_request
from app.gate import Decision, simulate
from tests.fakes.params import teacache_params
from tests.fakes.probes import pipeline_snapshot

PROMPT = "a red circle on a blue background"
STEPS = 12


@pytest.fixture
def shell() -> Iterator[Any]:
    with use_precision(mx.float32):
        yield flux2_shell("flux2-klein-base-4b", prompts=(PROMPT,))


def _engine(pipeline: Any, loads: list[str] | None = None) -> Engine:
    def loader(variant: Any, request: Any, emit: Any, cancel: Any) -> Any:
        if loads is not None:
            loads.append(variant.id)
        return pipeline

    return Engine(loader=loader)


def _run(engine: Engine, request: Any, cancel: threading.Event | None = None) -> list[Any]:
    seen: list[Any] = []
    engine.run(1, request, seen.append, cancel or threading.Event())
    return seen


def _request(variant_id: str, threshold: float, **kw: Any) -> Any:
    return make_request(
        variant_id,
        PROMPT,
        seed=3,
        steps=STEPS,
        threshold=threshold,
        size=(128, 128),
        guidance=1.0,
        **kw,
    )


def test_threshold_zero_is_bit_exact_and_skips_nothing(forced_variant: str, shell: Any) -> None:
    seen = _run(_engine(shell), _request(forced_variant, 0.0))
    report = next(e for e in seen if isinstance(e, ev.RunFinished)).report.to_json()
    assert report["skipped"] == 0
    assert report["pattern"] == "C" * STEPS
    assert report["max_abs_diff"] == 0.0


def test_events_arrive_in_order_with_one_step_event_per_step(
    forced_variant: str, shell: Any
) -> None:
    seen = _run(_engine(shell), _request(forced_variant, 0.05))
    kinds = [type(e).__name__ for e in seen]
    assert kinds[:2] == ["LoadProgress", "ModelReady"]
    assert kinds[-1] == "RunFinished"
    for which in (ev.Pass.vanilla, ev.Pass.gated):
        steps = [e.step.index for e in seen if isinstance(e, ev.StepDone) and e.which is which]
        assert steps == list(range(STEPS))
    report = seen[-1].report.to_json()
    # Scripted polynomial: constant 0.01 per step against 0.05 → four skips, then a compute.
    assert report["pattern"] == "FSSSSCSSSSCF"
    assert report["skipped"] == 8
    assert report["longest_skip_streak"] == 4
    assert report["vanilla_pattern"] == "C" * STEPS
    assert report["max_abs_diff"] > 0.0  # skipping really changed the trajectory


def test_skipped_steps_do_not_call_the_body(
    forced_variant: str, shell: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mflux's eager path (as on M1/M2): under mx.compile a Python-level count sees traces, not
    # calls (the compiled path's body/tail split is tested in tests/adapters).
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))
    calls: list[int] = []
    original = type(shell.transformer.single_transformer_blocks[0]).__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    engine = _engine(shell)
    _run(engine, _request(forced_variant, 0.05, compare_vanilla=False))  # the untimed warm-up
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(shell.transformer.single_transformer_blocks[0]), "__call__", counting)
        seen = _run(engine, _request(forced_variant, 0.05, compare_vanilla=False))
    report = seen[-1].report.to_json()
    blocks = len(shell.transformer.single_transformer_blocks)
    assert len(calls) == blocks * report["computed"]


def test_threshold_only_rerun_reuses_vanilla(forced_variant: str, shell: Any) -> None:
    loads: list[str] = []
    engine = _engine(shell, loads)
    _run(engine, _request(forced_variant, 0.0))
    seen = _run(engine, _request(forced_variant, 0.05))
    started = [e for e in seen if isinstance(e, ev.PassStarted)]
    assert started[0].which is ev.Pass.vanilla and started[0].cached
    assert not any(isinstance(e, ev.StepDone) and e.which is ev.Pass.vanilla for e in seen)
    assert loads == [forced_variant]  # the model was loaded once


def test_resumed_gated_pass_is_bit_exact_with_a_full_gated_pass(
    forced_variant: str, shell: Any
) -> None:
    engine = _engine(shell)
    full = _run(engine, _request(forced_variant, 0.05, resume=False))
    resumed = _run(engine, _request(forced_variant, 0.05, resume=True))
    full_report = full[-1].report.to_json()
    resumed_report = resumed[-1].report.to_json()
    assert resumed_report["resumed_from_step"] == 0  # first skip at step 1 → re-seed at step 0
    assert resumed_report["pattern"] == full_report["pattern"]
    assert resumed_report["max_abs_diff"] == full_report["max_abs_diff"]
    assert resumed_report["gated_latents_sha256"] == full_report["gated_latents_sha256"]
    # Re-seeded at step 0: nothing was replayed; the speedup is still an estimate, because the
    # cached vanilla's time was re-timed to this run's load (and the label says so).
    assert resumed_report["replayed_steps"] == 0
    assert resumed_report["speedup_kind"] == "re-timed"
    assert resumed_report["speedup_estimated"] is True
    label = str(resumed_report["speedup_label"])
    assert label.startswith("re-timed estimate, vanilla cached at ")
    assert "steps at this run's mean computed-step time" in label
    assert "replayed" not in label


def test_resume_replays_steps_before_the_first_skip(
    monkeypatch: pytest.MonkeyPatch, shell: Any
) -> None:
    """A late first skip: the resumed pass replays vanilla's predictions up to the step before
    it, runs the transformer only from there, and still matches the full pass bit for bit."""
    base = variants.get_variant("flux2-klein-base-4b")
    # predicted = 0.2 − x: on this shell the signal change grows along the schedule, so the
    # prediction falls and the first skip comes late.
    variant = replace(
        base,
        id="test-flux2-late",
        coefficients=(0.0, 0.0, 0.0, -1.0, 0.2),
        calibrated_range=None,
        default_size=(128, 128),
    )
    monkeypatch.setitem(variants.VARIANTS, variant.id, variant)
    engine = _engine(shell)
    trace = _run(engine, _request(variant.id, 0.0))[-1].report.to_json()["vanilla_trace"]
    threshold = 0.2 - trace[STEPS // 2] + 1e-6
    verdicts = simulate(teacache_params(variant, threshold), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip >= 3, f"shell trace changed shape: {trace}"

    full = _run(engine, _request(variant.id, threshold, resume=False))
    resumed = _run(engine, _request(variant.id, threshold, resume=True))
    assert full[-1].report.to_json()["skipped"] > 0  # engagement: the comparison is not a no-op
    full_report, resumed_report = full[-1].report, resumed[-1].report
    assert resumed_report.gated.resumed_from == first_skip - 1
    assert resumed_report.gated.pattern == full_report.gated.pattern
    assert resumed_report.gated.latents_sha256 == full_report.gated.latents_sha256
    # Steps before the re-seed were replayed, and vanilla came from the cache: the label says both.
    replayed = first_skip - 1
    measured_at = resumed_report.vanilla.measured_at if resumed_report.vanilla else None
    assert measured_at is not None and resumed_report.vanilla_cached
    figure = resumed_report.speedup_figure
    assert figure is not None and figure.retimed  # the cached vanilla is re-timed to this run
    assert resumed_report.speedup_label.startswith(
        f"re-timed estimate ({replayed} of {STEPS} steps replayed), "
        f"vanilla cached at {measured_at:%H:%M}, steps at this run's mean computed-step time (±"
    )
    assert resumed_report.speedup_label.endswith(
        f": {figure.vanilla_seconds:.3g} s ÷ {figure.gated_seconds:.3g} s"
    )
    assert full_report.speedup_label.startswith(
        f"re-timed estimate, vanilla cached at {measured_at:%H:%M}, "
    )


def test_a_forecast_pass_resumes_two_computed_steps_before_the_first_skip(
    monkeypatch: pytest.MonkeyPatch, shell: Any
) -> None:
    """The forecast reads the last two computed residuals, so a resumed forecast pass replays
    vanilla only up to two steps before the first skip (both of them run again and seed the
    history) and equals a full forecast pass bit for bit; it forecast some skipped steps, so it
    is not reuse's run; the report records the fill and reads it back, and the re-seeding steps
    carry their own times."""
    from app.engine.report import RunReport
    from app.gate.fill import ERROR, REACH

    base = variants.get_variant("flux2-klein-base-4b")
    variant = replace(
        base,
        id="test-flux2-late",
        coefficients=(0.0, 0.0, 0.0, -1.0, 0.2),
        calibrated_range=None,
        default_size=(128, 128),
    )
    monkeypatch.setitem(variants.VARIANTS, variant.id, variant)
    engine = _engine(shell)
    trace = _run(engine, _request(variant.id, 0.0))[-1].report.to_json()["vanilla_trace"]
    threshold = 0.2 - trace[STEPS // 2] + 1e-6
    verdicts = simulate(teacache_params(variant, threshold), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip >= 3, f"shell trace changed shape: {trace}"

    def report(fill: str, resume: bool) -> Any:
        return _run(engine, _request(variant.id, threshold, resume=resume, fill=fill))[-1].report

    full, resumed = report("forecast", False), report("forecast", True)
    reused = report("reuse", False)
    assert full.gated.skipped > 0  # engagement
    assert resumed.gated.resumed_from == first_skip - 2
    assert resumed.gated.pattern == full.gated.pattern
    assert resumed.gated.latents_sha256 == full.gated.latents_sha256
    assert any(step.fill.get(REACH, 0) > 0 for step in full.gated.steps)
    assert any(ERROR in step.fill for step in full.gated.steps)
    assert full.gated.latents_sha256 != reused.gated.latents_sha256
    # The steps from the re-seed on ran for real: their times are this pass's, not vanilla's.
    vanilla = resumed.vanilla
    assert vanilla is not None
    for index in (first_skip - 2, first_skip - 1):
        assert resumed.gated.steps[index].seconds != vanilla.steps[index].seconds
    document = resumed.to_json()
    assert document["fill"] == "forecast"
    again = RunReport.from_json(document, gated_image=resumed.gated.image)
    assert again.request.fill == "forecast"
    assert [s.fill for s in again.gated.steps] == [s.fill for s in resumed.gated.steps]


def test_cancel_mid_run_reports_cancelled_and_restores_the_pipeline(
    forced_variant: str, shell: Any
) -> None:
    before = pipeline_snapshot(shell)
    cancel = threading.Event()
    seen: list[Any] = []

    def emit(event: Any) -> None:
        seen.append(event)
        if isinstance(event, ev.StepDone) and event.step.index == 2:
            cancel.set()

    _engine(shell).run(7, _request(forced_variant, 0.05), emit, cancel)
    assert isinstance(seen[-1], ev.RunCancelled)
    steps = [e for e in seen if isinstance(e, ev.StepDone)]
    assert len(steps) == 3  # takes effect within one step
    assert pipeline_snapshot(shell) == before


def test_failures_are_reported_as_one_line_and_the_engine_stays_usable(
    forced_variant: str, shell: Any
) -> None:
    attempts: list[int] = []

    def loader(*args: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise UserFacingError("model files are missing: run the download first")
        return shell

    engine = Engine(loader=loader)
    seen = _run(engine, _request(forced_variant, 0.05))
    failed = seen[-1]
    assert isinstance(failed, ev.RunFailed)
    assert failed.message == "model files are missing: run the download first"
    assert "Traceback" in failed.details
    again = _run(engine, _request(forced_variant, 0.05))
    assert isinstance(again[-1], ev.RunFinished)


def test_distilled_schedule_emits_an_inline_warning_with_evidence() -> None:
    from app.engine.engine import schedule_warnings

    variant = variants.get_variant("flux2-klein-4b")
    request = make_request("flux2-klein-4b", PROMPT, steps=4, threshold=0.2, size=(128, 128))
    (warning,) = schedule_warnings(variant, request)
    assert warning.kind == "distilled"
    assert warning.details["eligible_steps"] == 2
    assert warning.details["min_predicted_change"] == variant.min_predicted_change
    assert "Klein base 4B" in warning.message  # the suggestion names the base variant
    assert Decision.skipped.letter == "S"


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        RuntimeError(
            "[metal::malloc] Attempting to allocate 40000000000 bytes which is greater "
            "than the maximum allowed buffer size of 28991029248 bytes."
        ),
        RuntimeError("[cuda] out of memory"),
    ],
)
def test_out_of_memory_is_one_clear_line(
    forced_variant: str, shell: Any, error: BaseException
) -> None:
    attempts: list[int] = []

    def loader(*args: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise error
        return shell

    engine = Engine(loader=loader)
    failed = _run(engine, _request(forced_variant, 0.05))[-1]
    assert isinstance(failed, ev.RunFailed)
    assert failed.message.startswith("out of memory: try a smaller size")
    assert "\n" not in failed.message
    assert isinstance(_run(engine, _request(forced_variant, 0.05))[-1], ev.RunFinished)
