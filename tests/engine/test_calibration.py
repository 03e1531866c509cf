"""Calibrating a model as a job of the one runner (``app.engine.calibration``, ``CalibratePlan``):
on the scripted fake (whose calibration passes record a known polynomial) and on the real demo
engine; what it records (model folder, LoRA set, quantization); and every refusal as one sentence
with nothing written: too few prompts, a name taken or malformed, a cancel midway, a model that
does not load, data too thin for the fit."""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app import paths
from app.engine import events as ev
from app.engine.calibration import (
    MIN_PROMPTS,
    Calibrate,
    CalibrationError,
    check_calibration,
    default_prompts,
    free_name,
)
from app.engine.jobs import Generate, Job, ThresholdSweep, run_job
from app.engine.request import LoraSpec, make_request
from app.engine.threshold_rule import GRID, MIN_SSIM, SKIP_SHARE_BAND, RuleRow, choose
from app.families.demo import CALIBRATION_PROMPTS as DEMO_PROMPTS
from app.variants import all_variants, get_variant
from app.variants.user import CalibrationExistsError, calibrations_dir, save_calibration
from tests.fakes.engine import (
    FAKE_OUTPUT_POLYNOMIAL,
    FakeEngine,
    FakeFailure,
    FakeScript,
    fake_mag_ratio,
)

# The fake's pairs lie exactly on its polynomial: float64 least squares recovers it to ~1e-12
# here; 1e-9 leaves room for another BLAS's summation order and still fails any wrong fit.
COEFFICIENTS_ATOL = 1e-9


def _job(
    prompts: tuple[str, ...] = DEMO_PROMPTS[:4],
    *,
    name: str = "mine",
    variant: str = "demo",
    steps: int = 10,
    thresholds: tuple[tuple[str, float], ...] = (),
    **request: Any,
) -> Calibrate:
    base = make_request(variant, prompts[0] if prompts else "a red circle", steps=steps, **request)
    return Calibrate(base, name, prompts, thresholds=thresholds)


# Given default thresholds: the job runs the prompts' passes only (no threshold trials).
GIVEN = (("teacache", 0.1), ("magcache", 0.02))


def _run(engine: Any, job: Job, cancel: threading.Event | None = None) -> list[Any]:
    events: list[Any] = []
    run_job(engine, 5, job, events.append, cancel or threading.Event())
    return events


def _nothing_written() -> bool:
    folder = calibrations_dir()
    return not folder.exists() or not any(folder.iterdir())


def test_a_calibration_on_the_fake_fits_its_polynomial_and_table() -> None:
    engine = FakeEngine()
    job = _job(thresholds=GIVEN)
    events = _run(engine, job)
    assert sum(isinstance(e, ev.CalibrationFinished | ev.RunFailed | ev.RunCancelled)
               for e in events) == 1  # fmt: skip
    finished = events[-1]
    assert isinstance(finished, ev.CalibrationFinished), finished
    progress = [e for e in events if isinstance(e, ev.CalibrationProgress)]
    assert [(e.index, e.done, e.total) for e in progress] == [(i, i + 1, 4) for i in range(4)]
    # Every pass: the prompt's vanilla recording the output's change, then a gated pass at 0
    # resumed from it (no skip: it replays every step).
    assert [r.prompt for r in engine.requests] == list(job.prompts)
    assert all(r.capture_output and r.resume and r.threshold == 0.0 for r in engine.requests)
    vanilla = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla]
    assert [e.cached for e in vanilla] == [False] * 4  # a calibration's vanilla is never cached
    gated = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.gated]
    assert [e.resumed_from for e in gated] == [10] * 4

    result = finished.result
    assert result.variant_id == "demo+mine" and Path(result.path).is_file()
    fits = result.document["fit"]["fits"]
    for mode in ("free", "origin"):
        np.testing.assert_allclose(
            fits[mode]["coefficients"], FAKE_OUTPUT_POLYNOMIAL, atol=COEFFICIENTS_ATOL
        )
    variant = get_variant("demo+mine")
    assert variant.coefficients == tuple(result.document["coefficients"])
    assert variant.gates[0] == "teacache"  # its own TeaCache calibration: TeaCache first
    # MagCache's table: per step the mean of the prompts' measured ratios.
    assert variant.magcache is not None
    traces = [c.mag_ratio for c in result.captures]
    expected = [1.0] + [float(np.mean([t[i] or 0.0 for t in traces])) for i in range(1, 10)]
    assert all(t[i] is not None for t in traces for i in range(1, 10))
    assert variant.magcache.ratios == pytest.approx(expected)
    assert traces[0][1] == pytest.approx(fake_mag_ratio(result.captures[0].x[0]))
    assert "demo+mine" in all_variants()
    assert variant.calibrated_for(()) and variant.calibration_scope is not None


def test_a_calibration_on_the_real_demo_engine() -> None:
    from app.engine.engine import Engine

    engine = Engine()
    job = _job(DEMO_PROMPTS[:3], steps=6, name="real", thresholds=GIVEN)
    events = _run(engine, job)
    # A calibration's vanilla (timed with a host sync a step) is not a Generate's cached one.
    again: list[Any] = []
    engine.run(6, job.request, again.append, threading.Event())
    engine.close()
    starts = [e for e in again if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla]
    assert [e.cached for e in starts] == [False]
    finished = events[-1]
    assert isinstance(finished, ev.CalibrationFinished), finished
    data = json.loads(Path(finished.result.path).read_text(encoding="utf-8"))
    assert len(data["pairs"]["x"]) == 3 * 5  # steps − 1 consecutive pairs per prompt
    assert all(x > 0 for x in data["pairs"]["x"]) and all(y > 0 for y in data["pairs"]["y"])
    assert data["fit"]["heldout_prompts"] == [2]
    assert len(data["magcache"]["ratios"]) == 6 and data["scope"]["loras"] == []
    # The gated pass resumed from the vanilla replays every step: it matches it bit for bit.
    done = [e for e in events if isinstance(e, ev.PassFinished)]
    for vanilla, gated in zip(done[::2], done[1::2], strict=True):
        assert vanilla.which is ev.Pass.vanilla and gated.which is ev.Pass.gated
        assert np.array_equal(vanilla.image, gated.image)
    variant = get_variant("demo+real")
    assert variant.coefficients == tuple(data["coefficients"])
    assert variant.family is get_variant("demo").family


# -- each gate's default threshold, by the shipped defaults' rule on the prompts ------------------


def test_the_fake_calibration_chooses_each_threshold_by_the_rule_on_its_prompts() -> None:
    """After the prompts' passes, threshold trials: each a gated pass of one prompt on the new
    calibration (not saved yet), resumed from that prompt's vanilla (kept under the calibration's
    own key); the file's thresholds are the rule's answer on the trials' rows, with the reason."""
    engine = FakeEngine()
    job = _job(DEMO_PROMPTS[:3], steps=12)
    events = _run(engine, job)
    finished = events[-1]
    assert isinstance(finished, ev.CalibrationFinished), finished
    captures, trials = engine.requests[:3], engine.requests[3:]
    assert all(r.threshold == 0.0 and r.unsaved_calibration is None for r in captures)
    assert trials and all(r.resume and r.threshold > 0 for r in trials)
    calibrations = {r.gate: r.unsaved_calibration for r in trials}
    assert set(calibrations) == {"teacache", "magcache"}
    variant = get_variant("demo+mine")
    assert calibrations["teacache"].coefficients == variant.coefficients  # the new fit's
    assert calibrations["magcache"].ratios == variant.magcache.ratios  # type: ignore[union-attr]
    vanilla = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.vanilla]
    assert [e.cached for e in vanilla] == [False] * 3 + [True] * len(trials)
    done = [e for e in events if isinstance(e, ev.CalibrationTrials) and e.trial is not None]
    assert [e.done for e in done] == list(range(1, len(trials) + 1))

    result = finished.result
    document = json.loads(Path(result.path).read_text(encoding="utf-8"))
    for choice in result.choices:
        rows = choice.rows
        chosen = choose(rows)
        assert chosen is not None and chosen.mean_skipped > 0  # engagement
        assert chosen.min_ssim >= MIN_SSIM
        assert choice.threshold == chosen.threshold == variant.default_threshold_for(choice.gate)
        assert choice.source == "rule" and "chosen on your 3 prompts" in choice.reason
        recorded = document["threshold_choice"][choice.gate]
        assert recorded["threshold"] == choice.threshold and recorded["reason"] == choice.reason
        for row in rows:  # each row: the mean over the prompts of its trials
            mine = [t for t in choice.trials if t.threshold == row.threshold]
            assert len(mine) == 3
            assert row.mean_skipped == pytest.approx(sum(t.skipped for t in mine) / 3)
            assert row.min_ssim == min(t.ssim for t in mine)
    assert "default threshold" in document["provenance"]["notes"]
    assert "default threshold" in document["magcache"]["provenance"]["notes"]


def test_a_calibration_cancelled_while_choosing_thresholds_writes_nothing() -> None:
    cancel = threading.Event()
    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        if isinstance(event, ev.CalibrationTrials) and event.done == 2:
            cancel.set()

    assert run_job(FakeEngine(), 5, _job(DEMO_PROMPTS[:3], steps=12), emit, cancel) is None
    assert isinstance(events[-1], ev.RunCancelled)
    assert sum(isinstance(e, ev.CalibrationProgress) for e in events) == 3
    assert _nothing_written() and "demo+mine" not in all_variants()


def test_a_calibrations_vanilla_runs_are_kept_apart_from_a_generates() -> None:
    """The real engine keeps a calibration's vanilla runs (``capture_output``) in a cache of
    their own: its threshold trials find each prompt's, a Generate never times against one, and
    a calibration evicts no Generate's."""
    from app.engine.engine import Engine

    engine = Engine(vanilla_cache_size=1, calibration_cache_size=2)
    job = _job(DEMO_PROMPTS[:3], steps=6)

    def cached(request: Any) -> bool:
        seen: list[Any] = []
        engine.run(1, request, seen.append, threading.Event())
        assert isinstance(seen[-1], ev.RunFinished), seen[-1]
        return seen[-1].report.vanilla_cached

    generate = job.request  # the first prompt, no capture
    capture = [job.pass_request(p) for p in job.prompts]
    try:
        assert not cached(generate)
        assert [cached(r) for r in capture[:2]] == [False, False]
        assert cached(generate)  # not evicted by the calibration's two
        assert not cached(replace(capture[1], capture_output=False)) and not cached(generate)
        assert [cached(r) for r in capture[:2]] == [True, True]  # nor they by the Generates
        assert not cached(capture[2]) and not cached(capture[0])  # two at most: oldest goes
    finally:
        engine.close()


@pytest.mark.slow
def test_the_real_demo_calibration_gets_its_own_threshold_by_the_rule() -> None:
    """The real demo, 2 prompts at its 28 steps: each gate's threshold is the rule's. Checked
    again on the saved calibration by a sweep of its own (gated against vanilla, every prompt): at
    the threshold it skips steps with every prompt at SSIM ≥ 0.90, within the band or else the
    largest that keeps the floor; the next threshold of the grid above it skips more than the
    band or breaks the floor (or skips as much: the rule keeps the smaller)."""
    from app.engine.engine import Engine

    prompts = DEMO_PROMPTS[:2]  # every pass here is a full 28-step one: the suite's slowest test
    engine = Engine()
    events = _run(engine, _job(prompts, steps=28, name="own"))
    finished = events[-1]
    assert isinstance(finished, ev.CalibrationFinished), finished
    variant = get_variant("demo+own")
    high = SKIP_SHARE_BAND[1]
    try:
        for choice in finished.result.choices:
            threshold = variant.default_threshold_for(choice.gate)
            assert threshold is not None and threshold == choice.threshold, choice.reason
            above = GRID[GRID.index(threshold) + 1]
            at, over = (_measured(engine, prompts, choice.gate, t) for t in (threshold, above))
            assert at.mean_skipped > 0 and at.min_ssim >= MIN_SSIM, (choice.reason, at)
            assert at == next(r for r in choice.rows if r.threshold == threshold)
            if at.in_band:
                assert over.skip_share > high or not over.safe or over.skip_share == at.skip_share
            else:  # no threshold in the band keeps the floor: the largest that does
                assert not over.safe and choice.reason.count("the largest that keeps") == 1
    finally:
        engine.close()


def _measured(engine: Any, prompts: Sequence[str], gate: str, threshold: float) -> RuleRow:
    """One threshold of the saved demo+own on every prompt: skips and SSIM against vanilla."""
    skipped, ssims = [], []
    for prompt in prompts:
        request = make_request("demo+own", prompt, steps=28, gate=gate, threshold=threshold)
        done = _run(engine, ThresholdSweep(request, (threshold,)))[-1]
        assert isinstance(done, ev.SweepFinished), done
        report = done.reports[0]
        assert report.ssim is not None
        skipped.append(report.gated.skipped)
        ssims.append(report.ssim)
    mean = sum(skipped) / len(skipped)
    return RuleRow(threshold, mean, mean / 28, sum(ssims) / len(ssims), min(ssims))


@pytest.mark.slow
def test_a_distilled_model_gets_no_threshold_and_says_why() -> None:
    """demo-turbo (step-distilled, 4 steps): no threshold is invented, no trial runs, and the
    file says why; its default skips nothing (on purpose)."""
    from app.engine.engine import Engine

    engine = Engine()
    job = _job(DEMO_PROMPTS[:3], variant="demo-turbo", steps=4, name="turbo")
    events = _run(engine, job)
    finished = events[-1]
    assert isinstance(finished, ev.CalibrationFinished), finished
    assert not any(isinstance(e, ev.CalibrationTrials) for e in events)  # no trial ran
    gated = [e for e in events if isinstance(e, ev.PassStarted) and e.which is ev.Pass.gated]
    assert len(gated) == 3  # the prompts' own passes only
    variant = get_variant("demo-turbo+turbo")
    assert [c.gate for c in finished.result.choices] == list(job.gates)
    for choice in finished.result.choices:
        assert choice.threshold is None and variant.default_threshold_for(choice.gate) is None
        assert choice.reason.startswith("none: Demo shapes turbo is step-distilled")
        assert "nothing is skipped until you set one" in choice.reason
        request = make_request("demo-turbo+turbo", DEMO_PROMPTS[0], gate=choice.gate)
        assert request.threshold == 0.0
        done = _run(engine, Generate(request))[-1]
        assert isinstance(done, ev.RunFinished) and done.report.gated.skipped == 0
    engine.close()


def _lora_file(path: Path) -> Path:
    """The smallest file the request's check accepts as a .safetensors (a header, no tensor)."""
    header = json.dumps({"__metadata__": {}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def test_it_records_and_honours_the_lora_set_and_quantization(tmp_path: Path) -> None:
    lora = _lora_file(tmp_path / "style.safetensors")
    job = _job(
        ("a cat", "a dog", "a tree"),
        variant="flux1-dev",
        steps=8,
        quantize=4,
        size=(256, 256),  # the report's SSIM at 1024² would cost seconds a prompt
        loras=[(str(lora), 0.8)],
        name="styled",
    )
    engine = FakeEngine()
    events = _run(engine, job)
    assert isinstance(events[-1], ev.CalibrationFinished), events[-1]
    assert all(r.loras == job.request.loras and r.quantize == 4 for r in engine.requests)
    variant = get_variant("flux1-dev+styled")
    scope = variant.calibration_scope
    assert scope is not None and scope.quantize == 4
    assert scope.loras == ((str(lora.resolve()), 0.8),)
    # Calibrated for that set only; the base variant's numbers are for no LoRA at all.
    spec = LoraSpec(str(lora.resolve()), 0.8)
    assert variant.calibrated_for([spec]) and not variant.calibrated_for([])
    assert not variant.calibrated_for([LoraSpec(spec.path, 1.0)])
    base = get_variant("flux1-dev")
    assert base.calibrated_for([]) and not base.calibrated_for([spec])
    assert "style.safetensors × 0.8" in variant.provenance.source


def test_a_model_folder_is_calibrated_on_its_own_weights(tmp_path: Path) -> None:
    folder = tmp_path / "finetune"
    folder.mkdir()
    listing = {"folders": [{"name": "ft", "path": str(folder), "base_variant": "flux1-dev"}]}
    (paths.data_dir()).mkdir(parents=True, exist_ok=True)
    (paths.data_dir() / "model_folders.json").write_text(json.dumps(listing), encoding="utf-8")
    assert not get_variant("flux1-dev@ft").calibrated_for()  # the base's numbers, borrowed
    job = _job(("a cat", "a dog"), variant="flux1-dev@ft", steps=8, name="own", size=(256, 256))
    engine = FakeEngine()
    assert isinstance(_run(engine, job)[-1], ev.CalibrationFinished)
    assert all(r.model_path == str(folder) for r in engine.requests)
    variant = get_variant("flux1-dev@ft+own")
    assert variant.model_path == str(folder) and variant.calibrated_for()
    assert "flux1-dev@ft+own" in all_variants()


# -- refusals: one sentence each, nothing written ------------------------------------------------


def test_too_few_prompts_says_how_many_and_why() -> None:
    job = _job(DEMO_PROMPTS[:1])
    with pytest.raises(CalibrationError) as info:
        check_calibration(job)
    message = str(info.value)
    assert f"at least {MIN_PROMPTS} prompts, got 1" in message and "held-out R²" in message
    # The job refuses it as well, before any pass, with the same sentence.
    engine = FakeEngine()
    events = _run(engine, job)
    assert [type(e) for e in events] == [ev.RunFailed] and events[0].message == message
    assert engine.requests == [] and _nothing_written()


def test_too_few_steps_for_the_pairs_is_refused_before_any_pass() -> None:
    with pytest.raises(CalibrationError, match=r"fewer than the 5 \(signal, output\) pairs"):
        check_calibration(_job(DEMO_PROMPTS[:2], steps=3))


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ((DEMO_PROMPTS[0], DEMO_PROMPTS[0]), "a prompt twice"),
        ((DEMO_PROMPTS[0], "a purple elephant"), "elephant"),
    ],
)
def test_bad_prompts_are_one_sentence(prompts: tuple[str, ...], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        check_calibration(_job(prompts))


def test_a_name_that_clashes_or_is_malformed() -> None:
    with pytest.raises(CalibrationError, match="calibration name 'Bad Name'"):
        check_calibration(_job(name="Bad Name"))
    assert isinstance(_run(FakeEngine(), _job())[-1], ev.CalibrationFinished)
    before = (calibrations_dir() / "demo+mine.json").read_bytes()
    with pytest.raises(CalibrationExistsError, match=r"'mine' already exists for demo"):
        check_calibration(_job())
    events = _run(FakeEngine(), _job())  # the job refuses it too: the first file is kept
    assert isinstance(events[-1], ev.RunFailed) and "already exists" in events[-1].message
    assert (calibrations_dir() / "demo+mine.json").read_bytes() == before
    assert free_name("demo").startswith("cal-")  # the dialog's default is always free
    with pytest.raises(CalibrationError, match="user calibration"):
        check_calibration(_job(variant="demo+mine"))


def test_a_calibration_cancelled_midway_writes_nothing() -> None:
    cancel = threading.Event()
    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        progressed = sum(isinstance(e, ev.CalibrationProgress) for e in events)
        if isinstance(event, ev.StepDone) and event.which is ev.Pass.vanilla and progressed == 2:
            cancel.set()  # in the third prompt's vanilla pass

    assert run_job(FakeEngine(), 5, _job(), emit, cancel) is None
    assert isinstance(events[-1], ev.RunCancelled)
    assert sum(isinstance(e, ev.CalibrationProgress) for e in events) == 2
    assert _nothing_written() and "demo+mine" not in all_variants()


def test_a_model_that_fails_to_load_writes_nothing() -> None:
    sentence = "FLUX.1 dev is not downloaded (23.8 GB): download it first"
    engine = FakeEngine(FakeScript(failure=FakeFailure(sentence, which=None)))
    events = _run(engine, _job(("a cat", "a dog"), variant="flux1-dev", steps=8, size=(256, 256)))
    assert isinstance(events[-1], ev.RunFailed) and events[-1].message == sentence
    assert _nothing_written() and "flux1-dev+mine" not in all_variants()


def test_data_too_thin_for_the_fit_fails_in_one_sentence() -> None:
    """Every pair unmeasured (no signal change recorded): the fit's own check, after the passes,
    and still nothing written."""
    engine = FakeEngine(FakeScript(trace=lambda request: [None] * request.steps))
    events = _run(engine, _job(DEMO_PROMPTS[:2]))
    assert isinstance(events[-1], ev.RunFailed)
    assert events[-1].message.startswith("only 0 (signal, output) pairs; a degree-4 fit needs")
    assert _nothing_written()


def test_the_suggested_prompts_fit_the_model() -> None:
    """The demo's suggestions are in its vocabulary (each one passes the check); a real model gets
    the short diverse list."""
    check_calibration(Calibrate(make_request("demo", "a red circle"), "x", DEMO_PROMPTS))
    assert default_prompts(get_variant("demo")) == DEMO_PROMPTS
    assert default_prompts(get_variant("flux1-dev")) != DEMO_PROMPTS
    assert len(set(default_prompts(get_variant("flux1-dev")))) >= 8


def test_an_exclusive_save_never_replaces() -> None:
    document = {
        "base_variant": "demo",
        "name": "taken",
        "coefficients": [1.0, 0.0, 0.0, 0.0, 0.0],
        "provenance": {"source": "test"},
    }
    save_calibration(document, exclusive=True)
    with pytest.raises(CalibrationExistsError):
        save_calibration({**document, "coefficients": [2.0, 0, 0, 0, 0]}, exclusive=True)
    assert (get_variant("demo+taken").coefficients or ())[:1] == (1.0,)
