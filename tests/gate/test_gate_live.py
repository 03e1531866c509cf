"""The live gate (``TeaCacheGate``) and the vanilla recorder on small float32 MLX arrays:
agreement with the simulator, residual bookkeeping, CFG branches, float32 reductions, telemetry
and the injected clock."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.gate import (
    Decision,
    LiveGate,
    StepEvent,
    TeaCacheGate,
    TeaCacheParams,
    Verdict,
    rel_l1,
    simulate,
)
from app.gate.live import MagnitudeRecorder, SignalRecorder, VanillaRecorder, rel_l1_pair
from app.gate.signals import Tap

IDENTITY = (0.0, 0.0, 0.0, 1.0, 0.0)
SHAPE = (2, 8)
NAN, INF = math.nan, math.inf


def body(x: mx.array) -> mx.array:
    """Stand-in for the transformer body: cheap, and its residual (x + 1) depends on the input."""
    return 2 * x + 1


def uncond_body(x: mx.array) -> mx.array:
    return 3 * x - 2


def signals_for(changes: Sequence[float]) -> list[mx.array]:
    """Gate signals whose consecutive rel-L1 is ``changes[i - 1]`` at step i (up to float32
    rounding). NaN/inf entries make that step's signal non-finite."""
    base = mx.random.uniform(0.5, 1.5, SHAPE, key=mx.random.key(0))
    scale = 1.0
    out = [base]
    for change in changes:
        if not math.isfinite(change):
            out.append(mx.full(SHAPE, change))
            continue
        # Alternate direction so the scale stays bounded whatever the draw.
        scale = scale * (1 - change) if scale > 1 and change < 1 else scale * (1 + change)
        out.append(base * scale)
    return out


def latents(i: int) -> mx.array:
    return mx.full(SHAPE, float(i) * 0.25)


def drive(
    gate: LiveGate,
    signals: Sequence[mx.array],
    *,
    cfg: bool = False,
    outputs: list[mx.array] | None = None,
) -> list[StepEvent]:
    """What an adapter does per step: decide, compute or reuse (per CFG branch), end the step; a
    recorder is handed the signal as a tap it records."""
    gate.begin(len(signals))
    for i, signal in enumerate(signals):
        branches: list[tuple[str, Callable[[mx.array], mx.array], mx.array]] = [
            ("cond", body, latents(i))
        ]
        if cfg:
            branches.append(("uncond", uncond_body, latents(i) + 100))
        if Tap.modulated_input in gate.taps.records:
            gate.record_tap(Tap.modulated_input, signal)
        for branch, fn, x in branches:
            verdict = gate.decide(signal if gate.needs_signal else None)
            if verdict.decision.computes:
                out = fn(x)
                gate.store_residual(out, x, branch)
            else:
                out = gate.reuse(x, branch)
            if outputs is not None:
                outputs.append(out)
        gate.end_step()
    return gate.events


def tea(event: StepEvent, key: str) -> float | None:
    """One of TeaCache's figures of a step."""
    value = event.figures("teacache").get(key)
    assert value is None or isinstance(value, float)
    return value


def recorder(params: TeaCacheParams, *, calibrating: bool = False) -> VanillaRecorder:
    """The vanilla pass's gate with TeaCache's and MagCache's records (priced by ``params``)."""
    return VanillaRecorder(
        [
            SignalRecorder("teacache", params, calibrating=calibrating),
            MagnitudeRecorder("magcache"),
        ]
    )


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def assert_events_match(events: Sequence[StepEvent], verdicts: Sequence[Verdict]) -> None:
    assert [e.index for e in events] == [v.index for v in verdicts]
    assert "".join(e.decision.letter for e in events) == "".join(
        v.decision.letter for v in verdicts
    )
    for e, v in zip(events, verdicts, strict=True):
        assert same(tea(e, "rel_l1"), v.rel_l1), (e, v)
        assert same(tea(e, "predicted"), v.predicted), (e, v)
        assert same(e.accumulated, v.accumulated), (e, v)


def vanilla_trace(params: TeaCacheParams, signals: Sequence[mx.array]) -> list[float | None]:
    """The trace a vanilla pass records: what the app feeds the simulator."""
    events = drive(recorder(params), signals)
    assert all(e.decision.computes for e in events)
    return [tea(e, "rel_l1") for e in events]


# -- the simulator and the live gate agree ---------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    changes=st.lists(st.one_of(st.floats(0.0, 0.6), st.sampled_from([0.0, NAN, INF])), max_size=24),
    threshold=st.floats(0.0, 1.0),
    skip_first=st.integers(0, 3),
    skip_last=st.integers(0, 3),
    cap=st.integers(1, 4),
    calibrated_range=st.sampled_from([None, (0.05, 0.3)]),
    cfg=st.booleans(),
)
def test_live_gate_agrees_with_the_simulator(
    changes: list[float],
    threshold: float,
    skip_first: int,
    skip_last: int,
    cap: int,
    calibrated_range: tuple[float, float] | None,
    cfg: bool,
) -> None:
    params = TeaCacheParams(IDENTITY, threshold, skip_first, skip_last, cap, calibrated_range)
    signals = signals_for(changes)
    trace = vanilla_trace(params, signals)
    # The synthetic signals measure the changes asked for (float32 rounding aside).
    for measured, wanted in zip(trace[1:], changes, strict=True):
        assert measured is not None
        if math.isfinite(wanted) and all(math.isfinite(c) for c in changes):
            assert measured == pytest.approx(wanted, rel=1e-5, abs=1e-6)
        elif not math.isfinite(wanted):
            assert math.isnan(measured)
    events = drive(TeaCacheGate(params), signals, cfg=cfg)
    assert_events_match(events, simulate(params, trace))


def test_a_transient_non_finite_signal_is_replayed_exactly() -> None:
    """After a numerical miss the live gate keeps measuring against the previous signal, as the
    vanilla trace does, so the simulator reproduces the misses step for step."""
    params = TeaCacheParams(IDENTITY, 0.5)
    signals = signals_for([0.01, 0.01, INF, 0.01, 0.01, 0.01, 0.01])
    trace = vanilla_trace(params, signals)
    assert [t is not None and math.isnan(t) for t in trace] == [False] * 3 + [True] * 2 + [
        False
    ] * 3
    events = drive(TeaCacheGate(params), signals)
    assert "".join(e.decision.letter for e in events) == "FSSNNCSF"
    assert_events_match(events, simulate(params, trace))


def test_skipped_steps_rebuild_the_output_from_the_last_computed_residual() -> None:
    params = TeaCacheParams(IDENTITY, 0.5)
    outputs: list[mx.array] = []
    events = drive(TeaCacheGate(params), signals_for([0.12] * 6), outputs=outputs)
    assert "".join(e.decision.letter for e in events) == "FSSSSCF"
    for i, e in enumerate(events):
        last_computed = max(j for j in range(i + 1) if events[j].decision.computes)
        expected = latents(i) + (body(latents(last_computed)) - latents(last_computed))
        assert mx.array_equal(outputs[i], expected)
        if e.decision.computes:
            assert mx.array_equal(outputs[i], body(latents(i)))


# -- residuals -------------------------------------------------------------------------------------


def make_gate(threshold: float = 0.5, **kw: object) -> TeaCacheGate:
    return TeaCacheGate(TeaCacheParams(IDENTITY, threshold), **kw)  # type: ignore[arg-type]


def test_cfg_shares_one_decision_and_keeps_one_residual_per_branch() -> None:
    gate = make_gate()
    sig = signals_for([0.1, 0.1])
    gate.begin(3)
    first = gate.decide(sig[0])
    assert gate.decide(sig[0] * 50) is first  # the second branch's call gets the same verdict
    x, y = latents(0), latents(0) + 100
    gate.store_residual(body(x), x, "cond")
    gate.store_residual(uncond_body(y), y, "uncond")
    assert gate.cached_branches == ("cond", "uncond")
    gate.end_step()

    verdict = gate.decide(sig[1])
    assert verdict.decision is Decision.skipped
    assert gate.decide(sig[1]) is verdict
    x1 = latents(1)
    assert mx.array_equal(gate.reuse(x1, "cond"), x1 + (body(x) - x))
    assert mx.array_equal(gate.reuse(x1, "uncond"), x1 + (uncond_body(y) - y))
    gate.end_step()
    assert len(gate.events) == 2


def test_reuse_without_a_residual_for_the_branch_is_an_error() -> None:
    gate = make_gate()
    gate.begin(3)
    gate.decide(signals_for([])[0])
    x = latents(0)
    gate.store_residual(body(x), x)
    with pytest.raises(RuntimeError, match="uncond"):
        gate.reuse(x, "uncond")


def test_residual_is_stored_only_when_the_verdict_says_so() -> None:
    gate = make_gate()
    sig = signals_for([0.1, 0.9, 0.1])
    gate.begin(4)
    stored: list[bool] = []
    for i, s in enumerate(sig):
        verdict = gate.decide(s)
        before = gate.cached_branches
        x = latents(i)
        gate.store_residual(body(x) + i, x)  # "+ i" tells the stored residuals apart
        stored.append(verdict.store_residual)
        if verdict.store_residual:
            assert mx.array_equal(gate._residuals["cond"], body(x) + i - x)
        elif verdict.decision is Decision.skipped:
            assert gate.cached_branches == before
        gate.end_step()
    assert gate.pattern == "FSCF"
    assert stored == [True, False, True, False]


def test_residual_is_materialised_with_the_step_not_left_lazy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stored residual is handed out for evaluation with the step's latents (one sync per
    step); if the driver does not take it, ``end_step`` evaluates it. Never left lazy past the
    step, where it would pin both operands."""
    evaluated: list[mx.array] = []
    real_eval = mx.eval

    def spy(*arrays: mx.array) -> None:
        evaluated.extend(arrays)
        real_eval(*arrays)

    gate = make_gate()
    gate.begin(3)
    first_signal = signals_for([])[0]
    gate.decide(first_signal)
    x = latents(0)
    gate.store_residual(body(x), x)
    # Handed to the driver once, with the first step's signal (the next step's anchor, evaluated
    # with the latents rather than by a sync of its own in ``decide``).
    handed = gate.unevaluated()
    assert [id(a) for a in handed] == [id(first_signal), id(gate._residuals["cond"])]
    assert gate.unevaluated() == []

    gate.begin(3)
    gate.decide(signals_for([])[0])
    gate.store_residual(body(x), x)
    monkeypatch.setattr(mx, "eval", spy)
    gate.end_step()  # the driver forgot: end_step evaluates it
    monkeypatch.undo()
    assert any(a is gate._residuals["cond"] for a in evaluated)


def test_residuals_are_released_after_the_loop_and_on_begin() -> None:
    gate = make_gate()
    drive(gate, signals_for([0.1, 0.1, 0.1]), cfg=True)
    # The trailing protected step computes without storing: nothing is left to reuse.
    assert gate.cached_branches == ()
    gate.begin(4)
    gate.decide(signals_for([])[0])
    gate.store_residual(body(latents(0)), latents(0))
    assert gate.cached_branches == ("cond",)
    gate.release()
    assert gate.cached_branches == ()
    gate.store_residual(body(latents(0)), latents(0))
    gate.begin(4)  # a new generation starts with nothing cached
    assert gate.cached_branches == () and gate.events == [] and gate.step_index == 0


def test_numerical_miss_drops_the_residuals() -> None:
    gate = make_gate()
    gate.begin(5)
    sig = signals_for([0.1, NAN])
    for i, s in enumerate(sig):
        verdict = gate.decide(s)
        x = latents(i)
        if verdict.decision.computes:
            gate.store_residual(body(x), x, "cond")
            gate.store_residual(body(x), x, "uncond")
        gate.end_step()
    assert gate.pattern == "FSN"
    assert gate.cached_branches == ()


def test_threshold_zero_builds_no_signal_and_no_residual(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_measuring(*_: object) -> float:
        raise AssertionError("threshold 0 must not measure the signal")

    monkeypatch.setattr("app.gate.live.rel_l1", no_measuring)
    gate = make_gate(0.0)
    assert not gate.needs_signal
    sig = signals_for([0.0] * 5)
    gate.begin(len(sig))
    for i, s in enumerate(sig):
        verdict = gate.decide(s)  # even a signal handed in by mistake is ignored
        assert verdict == Verdict(i, Decision.computed)
        gate.store_residual(body(latents(i)), latents(i))
        assert gate.cached_branches == ()
        gate.end_step()
    assert gate.pattern == "CCCCCC"
    assert all(tea(e, "rel_l1") is None and tea(e, "predicted") is None for e in gate.events)


def test_the_vanilla_recorder_measures_but_never_skips() -> None:
    gate = recorder(TeaCacheParams(IDENTITY, 0.0))
    assert gate.needs_signal and gate.taps.decides_on is None
    assert gate.taps.records == {Tap.modulated_input, Tap.body_residual}
    events = drive(gate, signals_for([0.0, 0.2, 0.0]))
    assert gate.pattern == "CCCC"
    assert {e.gate for e in events} == {"vanilla"} and all(e.threshold == 0.0 for e in events)
    assert tea(events[0], "rel_l1") is None
    # float32 signals and reduction: measured 4.0e-8 off at 0.2 (about 8 float32 ulps of 1.0).
    float32_abs = 1e-6
    assert [tea(e, "rel_l1") for e in events[1:]] == pytest.approx([0.0, 0.2, 0.0], abs=float32_abs)
    assert [tea(e, "predicted") for e in events[1:]] == pytest.approx(
        [0.0, 0.2, 0.0], abs=float32_abs
    )
    # MagCache's recorder keeps the previous residual to measure the magnitude ratio; the
    # recorder caches none for reuse: body(x) − x = x + 1 with x = 0.25·i everywhere, so the ratio
    # is (0.25i + 1)/(0.25(i−1) + 1).
    assert gate.cached_branches == ()
    ratios = [e.figures("magcache")["ratio"] for e in events]
    assert ratios[0] is None
    expected = [(0.25 * i + 1) / (0.25 * (i - 1) + 1) for i in range(1, 4)]
    # A float32 ratio of float32 means: measured 6.8e-8 relative.
    assert ratios[1:] == pytest.approx(expected, rel=float32_abs)


# -- rel-L1 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32])
def test_rel_l1_reduces_in_float32(dtype: mx.Dtype) -> None:
    # 70 000 elements: a float16 accumulator saturates at 2048 + …, so a half-precision reduction
    # would be far off; a float32 one is exact here.
    previous = mx.ones((70_000,), dtype=dtype)
    current = mx.full((70_000,), 1.5, dtype=dtype)
    assert rel_l1_pair(current, previous).dtype == mx.float32
    # 70 000 × 0.5 = 35 000 and 70 000 × 1 are exact in float32 (below 2²⁴): measured exactly 0.5.
    assert rel_l1(current, previous) == 0.5


def test_rel_l1_matches_a_float64_reference() -> None:
    rng = np.random.default_rng(7)
    prev = rng.normal(size=(4, 300)).astype(np.float16)
    cur = (prev + rng.normal(scale=0.05, size=prev.shape)).astype(np.float16)
    expected = (
        np.abs(cur.astype(np.float64) - prev.astype(np.float64)).mean()
        / np.abs(prev.astype(np.float64)).mean()
    )
    got = rel_l1(mx.array(cur), mx.array(prev))
    # The difference itself is taken in float16 (as in mlx-teacache): allow its rounding only.
    assert got == pytest.approx(expected, rel=2e-3)


def test_rel_l1_edge_values() -> None:
    zeros = mx.zeros((8,))
    assert rel_l1(zeros, zeros) == 0.0
    assert rel_l1(mx.ones((8,)), zeros) == pytest.approx(1e12)  # denominator floored at 1e-12
    assert math.isnan(rel_l1(mx.full((8,), INF), mx.ones((8,))))
    assert math.isnan(rel_l1(mx.ones((8,)), mx.full((8,), NAN)))


# -- telemetry -------------------------------------------------------------------------------------


def fake_clock(times: Sequence[float]) -> Callable[[], float]:
    it: Iterator[float] = iter(times)
    return lambda: next(it)


def test_step_events_are_live_and_timed_with_the_injected_clock() -> None:
    received: list[StepEvent] = []
    gate = make_gate(
        0.5, on_step=received.append, clock=fake_clock([10.0, 10.5, 12.0, 12.25, 13.0])
    )
    sig = signals_for([0.1, 0.45, 0.0])
    gate.begin(len(sig))
    for i, s in enumerate(sig):
        verdict = gate.decide(s)
        if verdict.decision.computes:
            gate.store_residual(body(latents(i)), latents(i))
        event = gate.end_step()
        assert received[-1] is event and len(received) == i + 1  # emitted as the step ends
    assert [e.seconds for e in received] == [0.5, 1.5, 0.25, 0.75]
    assert [e.index for e in received] == [0, 1, 2, 3]
    assert all(e.num_steps == 4 and e.threshold == 0.5 for e in received)
    assert [e.decision for e in received] == [
        Decision.forced,
        Decision.skipped,
        Decision.computed,
        Decision.forced,
    ]
    skipped, computed = received[1], received[2]
    # signals_for builds the change in float32: measured 2.7e-7 relative (1e-5 ≈ 80 ulps).
    assert tea(skipped, "rel_l1") == pytest.approx(0.1, rel=1e-5)
    assert tea(skipped, "predicted") == tea(skipped, "rel_l1")
    assert skipped.accumulated == tea(skipped, "predicted")
    assert computed.accumulated == pytest.approx(0.55, rel=1e-5)  # measured 4.5e-8 relative
    assert gate.events == received
    assert (gate.skipped, gate.computed, gate.pattern) == (1, 3, "FSCF")
    assert received[1].as_dict() == {
        "index": 1,
        "num_steps": 4,
        "decision": "skipped",
        "accumulated": skipped.accumulated,
        "threshold": 0.5,
        "seconds": 1.5,
        "gate": "teacache",
        "signals": {
            "teacache": {"rel_l1": tea(skipped, "rel_l1"), "predicted": tea(skipped, "predicted")}
        },
        "fill": {},  # the test never asked for the residual: no fill ran
    }


def test_output_change_is_measured_against_the_previous_steps_first_output() -> None:
    """Under CFG the transformer runs twice per step; the output change compares like with like."""
    gate = recorder(TeaCacheParams(IDENTITY, 0.5), calibrating=True)
    assert gate.records_output
    sig = signals_for([0.1, 0.1])
    cond = [mx.full(SHAPE, v) for v in (1.0, 1.25, 1.5)]
    uncond = [mx.full(SHAPE, v) for v in (-7.0, 9.0, 4.0)]
    gate.begin(3)
    for i, s in enumerate(sig):
        gate.decide(s)
        gate.record_tap(Tap.output, cond[i])
        gate.record_tap(Tap.output, uncond[i])
        gate.end_step()
    changes = [tea(e, "output_rel_l1") for e in gate.events]
    assert changes == [None, pytest.approx(0.25), pytest.approx(0.2)]


def test_output_capture_is_off_by_default() -> None:
    gate = recorder(TeaCacheParams(IDENTITY, 0.5))
    assert not gate.records_output
    gate.begin(2)
    for i, s in enumerate(signals_for([0.1])):
        gate.decide(s)
        gate.record_tap(Tap.output, mx.full(SHAPE, float(i + 1)))
        gate.end_step()
    assert all(tea(e, "output_rel_l1") is None for e in gate.events)


def test_begin_rejects_a_negative_step_count() -> None:
    with pytest.raises(ValueError, match="steps"):
        make_gate().begin(-1)


def test_a_gate_is_reused_across_generations() -> None:
    gate = make_gate(0.5)
    drive(gate, signals_for([0.1, 0.1]))
    gate.params = replace(gate.params, rel_l1_thresh=0.0)
    assert not gate.needs_signal
    drive(gate, signals_for([0.1, 0.1]))
    assert gate.pattern == "CCC"
