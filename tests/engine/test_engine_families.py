"""The engine end to end on every real family, through tiny random-weight shells of mflux's own
pipelines (the real loaders need weights this machine cannot download).

This pins what only the engine does for a real model: the keyword arguments it passes to each
family's ``generate_image``, the vanilla (observe) pass, the gated pass, the report. Oracles:
threshold 0 is bit-exact against the same-process vanilla pass where both share one numerical path
(mflux's eager path, as on M1/M2), within a measured tolerance where mflux compiles the predict
(FLUX.2 Klein, Z-Image: threshold 0 is mflux's own compiled predict, the observing vanilla pass
the split-compiled one), and a scripted polynomial engages the gate (skips > 0) on every family.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, NamedTuple

import mlx.core as mx
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app import variants
from app.adapters import common
from app.adapters.shells import DEFAULT_PROMPT, case_shell
from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import make_request
from app.families import Family, ShellCase, ShellTest, shell_cases
from app.gate import Decision
from app.variants.builtin import BUILTIN_VARIANTS
from tests.fakes.params import teacache_params

PROMPT = DEFAULT_PROMPT
# Every family's engine cases (``ShellCase``, ``ShellTest.engine``): each runs as the variant whose
# mflux name is the case's, with the variant's guidance. FLUX.1 keeps its real 3072 width (545 M
# parameters), so it runs fewer steps on fewer tokens (64² pixels: 16 image tokens beside the 16
# text tokens); the oracles here (bit-exactness, a scripted pattern) hold at any size. Issue #29's
# families: FLUX.3's flow map (distilled) and its CFG base, Qwen-Image 2.1 on its text-cache path,
# Krea 2's stochastic sampler (its noise is seeded: both passes draw alike).
CASES = shell_cases(ShellTest.engine)


def case_variant(family: Family, case: ShellCase) -> variants.Variant:
    """The built-in variant of ``family`` that runs mflux's ``case.model_name``."""
    (variant,) = [
        v
        for v in BUILTIN_VARIANTS.values()
        if v.family is family and v.mflux_name == case.model_name
    ]
    return variant


class Shell(NamedTuple):
    variant_id: str
    pipeline: Any
    steps: int
    size: tuple[int, int]
    case: ShellCase


@pytest.fixture(scope="module", params=CASES, ids=[case.name for _, case in CASES])
def shell(request: pytest.FixtureRequest) -> Iterator[Shell]:
    """One shell per case for the module: pytest groups the tests by case and drops a shell
    when the next case starts. Building FLUX.1's (545 M parameters at the real 3072 width)
    takes about 15 s, and every test leaves the pipeline as it found it: the engine takes its
    seams out again (asserted in the resume test) and each test makes its own engine."""
    family, case = request.param
    variant = case_variant(family, case)
    # the variant's guidance is what the engine passes: the case states the same
    assert variant.default_guidance == case.guidance, case.name
    with common.use_precision(mx.float32):
        pipeline = case_shell(family, case)
    yield Shell(variant.id, pipeline, case.steps, (case.size, case.size), case)


def _prompt(shell: Shell) -> str:
    """The case's prompt (FIBO's JSON caption), else the shells' default."""
    return shell.case.prompt or PROMPT


def _run(shell: Shell, threshold: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    variant_id, pipeline, steps, size, _ = shell
    base = variants.get_variant(variant_id)
    # A constant prediction of 0.01 per step: at 0.05 the gate must skip (scripted engagement).
    scripted = replace(
        base,
        id=f"test-{variant_id}",
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.01),
        calibrated_range=None,
        default_threshold=0.05,
        distilled=False,
    )
    monkeypatch.setitem(variants.VARIANTS, scripted.id, scripted)
    with common.use_precision(mx.float32):
        engine = Engine(loader=lambda *args: pipeline)
        request = make_request(
            scripted.id, _prompt(shell), seed=1, steps=steps, threshold=threshold, size=size
        )
        seen: list[Any] = []
        engine.run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
    return seen[-1].report.to_json()


def test_threshold_zero_matches_vanilla_bit_for_bit(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))  # eager
    report = _run(shell, 0.0, monkeypatch)
    steps = shell.steps
    assert report["skipped"] == 0
    assert report["max_abs_diff"] == 0.0
    assert report["gated_latents_sha256"] == report["vanilla_latents_sha256"]
    assert len(report["vanilla_trace"]) == steps  # the vanilla pass measured the gate signal
    assert all(x is not None for x in report["vanilla_trace"][1:])


# Where mflux compiles the predict, threshold 0 runs that compiled predict untouched while the
# observing vanilla pass runs the split-compiled path (other fusion boundaries). Measured on these
# shells (seed 1, 6 steps, float32): FLUX.2 0.0, Z-Image 3.3e-6 max |Δ| of the final latents, whose
# values are of order 1; the bounds keep a 6× margin, on the scale of the adapter-level relative-L1
# tolerances (2e-6 / 1e-5, tests/adapters/test_compiled_gate_split.py). Qwen-Image 2.1 and Krea 2
# (compiled where mflux compiles them) measured 0.0 on these shells; bound as FLUX.2's. So did
# ERNIE-Image and its Turbo (seed 1, 6 steps, 64², float32).
COMPILED_MAX_ABS_DIFF = {
    "flux2-klein-base-4b": 1e-5,
    "z-image": 2e-5,
    "qwen-image-2.1": 1e-5,
    "krea-2": 1e-5,
    "ernie-image": 1e-5,
    "ernie-image-turbo": 1e-5,
}


COMPILED = [(f, c) for f, c in CASES if case_variant(f, c).id in COMPILED_MAX_ABS_DIFF]


@pytest.mark.parametrize("shell", COMPILED, ids=[c.name for _, c in COMPILED], indirect=True)
def test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))  # compiled
    report = _run(shell, 0.0, monkeypatch)
    variant_id = shell.variant_id
    assert report["skipped"] == 0
    assert report["max_abs_diff"] <= COMPILED_MAX_ABS_DIFF[variant_id]


def test_scripted_gate_engages_on_every_family(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _run(shell, 0.05, monkeypatch)
    steps = shell.steps
    # 0.01 per step stays under 0.05 for four steps in a row: all of them between the ends skip
    assert report["pattern"] == "F" + "S" * (steps - 2) + "F"
    assert report["skipped"] == steps - 2
    assert report["max_abs_diff"] > 0.0


@pytest.mark.parametrize("fill", ["reuse", "forecast"])
def test_resume_from_vanilla_is_bit_exact_on_every_family(
    shell: Shell, fill: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threshold-only re-run resumes from the cached vanilla trajectory (predict-level replay
    for FLUX.2/Z-Image, call-level for FLUX.1 and Qwen-Image's two calls per step) and must equal
    a full gated pass bit for bit, with the first skip late enough that steps are really replayed.
    With the forecast fill the replay stops one computed step earlier (the forecast reads two)."""
    from app.gate import Decision, simulate
    from app.gate.fill import get_fill

    variant_id, pipeline, steps, size, _ = shell
    base = variants.get_variant(variant_id)
    scripted_id = f"test-resume-{variant_id}"

    def script(coefficients: tuple[float, ...]) -> None:
        monkeypatch.setitem(variants.VARIANTS, scripted_id, replace(
            base, id=scripted_id, coefficients=coefficients, calibrated_range=None,
            distilled=False, default_threshold=0.05))  # fmt: skip

    script((0.0, 0.0, 0.0, 0.0, 0.01))
    with common.use_precision(mx.float32):
        engine = Engine(loader=lambda *args: pipeline)

        def run(threshold: float, resume: bool) -> dict[str, Any]:
            request = make_request(
                scripted_id,
                _prompt(shell),
                seed=1,
                steps=steps,
                threshold=threshold,
                size=size,
                resume=resume,
                fill=fill,
            )
            seen: list[Any] = []
            engine.run(1, request, seen.append, threading.Event())
            assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
            return seen[-1].report.to_json()

        trace = run(0.0, resume=False)["vanilla_trace"]
        # predicted = C − k(x − x₁)²: largest at step 1's measured change, so step 1 computes and
        # the first skip comes later, wherever the signal moved away from x₁.
        x1, c = trace[1], 0.1
        spread = max((x - x1) ** 2 for x in trace[2:])
        k = 0.09 / spread
        script((0.0, 0.0, -k, 2 * k * x1, c - k * x1 * x1))
        later = min(c - k * (x - x1) ** 2 for x in trace[2 : steps - 1])
        threshold = (c + later) / 2
        verdicts = simulate(teacache_params(variants.get_variant(scripted_id), threshold), trace)
        first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
        assert first_skip >= 2

        original_class = type(pipeline.transformer)
        full = run(threshold, resume=False)
        resumed = run(threshold, resume=True)
    assert type(pipeline.transformer) is original_class  # every seam was taken out again
    assert full["skipped"] > 0  # engagement: the comparison is not a no-op
    assert resumed["resumed_from_step"] == first_skip - get_fill(fill).depth
    assert resumed["fill"] == full["fill"] == fill
    assert resumed["pattern"] == full["pattern"]
    assert resumed["gated_latents_sha256"] == full["gated_latents_sha256"]


def test_the_probe_resumes_from_vanilla_bit_exact_on_every_family(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first-block probe resumed from the vanilla pass equals a full probe pass bit for bit:
    the vanilla pass records the first block's change on the same numerical path the probe
    measures it on (eager, and the compiled split where mflux compiles), so the resumed pass takes
    the same first skip. The threshold sits just above the smallest change after a 2-step warm-up
    (the trace's own onset), so the first skip comes after replayed steps."""
    from app.gate.kinds import FIRSTBLOCK_KIND
    from app.gate.kinds import firstblock as probe_kind

    variant_id, pipeline, steps, size, _ = shell
    # where the case's steps are too few for the probe to engage (``probe_resume_steps``)
    steps = shell.case.probe_resume_steps or steps
    probe_id = f"test-probe-{variant_id}"
    variant = replace(variants.get_variant(variant_id), id=probe_id, distilled=False)
    monkeypatch.setitem(variants.VARIANTS, probe_id, variant)
    warm_up_2 = replace(probe_kind.DEFAULTS, warmup_steps=2)  # every variant's probe settings
    monkeypatch.setattr(probe_kind.FirstBlockKind, "uncalibrated", warm_up_2)
    with common.use_precision(mx.float32):
        engine = Engine(loader=lambda *args: pipeline)

        def run(threshold: float, resume: bool) -> dict[str, Any]:
            request = make_request(probe_id, _prompt(shell), seed=1, steps=steps,
                                   threshold=threshold, size=size, resume=resume,
                                   gate="firstblock")  # fmt: skip
            seen: list[Any] = []
            engine.run(1, request, seen.append, threading.Event())
            assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
            return seen[-1].report.to_json()

        changes = run(0.0, resume=False)["vanilla_block_changes"]
        trace = [None if c is None else tuple(c) for c in changes]
        params = FIRSTBLOCK_KIND.params(FIRSTBLOCK_KIND.calibration_of(variant), 0.1)
        onset = FIRSTBLOCK_KIND.engagement(params, trace).onset_threshold
        assert onset is not None and onset < 0.999  # random weights: measured 0.6–1.3 per step
        threshold = onset * 1.001
        verdicts = FIRSTBLOCK_KIND.simulate(params.with_threshold(threshold), trace)
        first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
        assert first_skip >= 2
        full = run(threshold, resume=False)
        resumed = run(threshold, resume=True)
    assert full["gate"] == "firstblock" and full["skipped"] > 0  # engagement
    assert full["pattern"][first_skip] == "S"  # the simulator is exact up to the first skip
    assert resumed["resumed_from_step"] == first_skip - 1
    assert resumed["pattern"] == full["pattern"]
    assert resumed["gated_latents_sha256"] == full["gated_latents_sha256"]


def test_one_real_model_stays_loaded_beside_the_embedded_demos() -> None:
    """Real models are large: loading one drops the other real one, while the embedded demos
    (tiny) stay, whatever their ids."""
    loads: list[str] = []

    def loader(variant: Any, request: Any, emit: Any, cancel: Any) -> object:
        loads.append(variant.id)
        return object()

    engine = Engine(loader=loader)
    cancel = threading.Event()
    for variant_id in ("demo", "flux1-dev", "demo-turbo", "z-image", "demo", "flux1-dev"):
        variant = variants.get_variant(variant_id)
        request = make_request(variant_id, "a red circle", size=variant.default_size)
        engine.pipeline(variant, request, lambda event: None, cancel)
    assert loads == ["demo", "flux1-dev", "demo-turbo", "z-image", "flux1-dev"]
