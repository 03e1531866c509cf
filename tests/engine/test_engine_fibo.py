"""The engine end to end on FIBO's and FIBO 2's tiny shells (mflux's own pipelines, random
weights): the keyword arguments the engine passes ``generate_image`` (mflux's CFG at the variant's
guidance), the vanilla and gated passes, resume from the vanilla trajectory (FIBO: one transformer
call a step, both CFG branches in one batch; FIBO 2: the caption's call, then the negative's), and
the first-block probe, their default gate. mflux runs both eagerly, so threshold 0 and the
resumed pass compare bit for bit.

The same checks as tests/engine/test_engine_families.py, which reads every family's shell cases
once the family kit lands; FIBO's prompt must be a JSON caption (``app.adapters.fibo.CAPTION``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import mlx.core as mx
import pytest

from app import variants
from app.adapters import common, fibo, fibo2
from app.adapters.shells import DEFAULT_PROMPT
from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import make_request
from app.gate import Decision, simulate
from tests.fakes.params import teacache_params


@dataclass(frozen=True)
class Case:
    variant_id: str
    build: Callable[[], Any]
    prompt: str
    steps: int
    size: tuple[int, int]
    probe_steps: int  # where the first block changes less than the probe's threshold range


# FIBO at 64² (16 image tokens beside 12 caption tokens at its hard-coded 3072 width), 4 steps;
# its first block changes by 0.93–1.19 a step (measured, seed 1, 64², float32), so over 4 or 6
# steps the smallest change after a 2-step warm-up stays at 0.98–1.06, where the probe never
# skips: its probe runs 8 steps. FIBO 2's tiny shell is cheap: 128², 6 steps.
CASES = {
    "fibo": Case("fibo", lambda: fibo.shell("fibo", seed=1), fibo.CAPTION, 4, (64, 64), 8),
    "fibo2": Case("fibo2", lambda: fibo2.shell("fibo2", seed=1), DEFAULT_PROMPT, 6, (128, 128), 6),
}


@pytest.fixture(scope="module", params=list(CASES))
def shell(request: pytest.FixtureRequest) -> Iterator[tuple[Case, Any]]:
    case = CASES[request.param]
    with common.use_precision(mx.float32):
        yield case, case.build()


def _engine(pipeline: Any) -> Engine:
    """One engine a test: it keeps the vanilla pass a threshold-only re-run resumes from."""
    return Engine(loader=lambda *args: pipeline)


def _run(engine: Engine, case: Case, variant_id: str, **request: Any) -> dict[str, Any]:
    request.setdefault("steps", case.steps)
    with common.use_precision(mx.float32):
        seen: list[Any] = []
        job = make_request(variant_id, case.prompt, seed=1, size=case.size, **request)
        engine.run(1, job, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
    return seen[-1].report.to_json()


def _scripted(case: Case, monkeypatch: pytest.MonkeyPatch, coefficients: tuple[float, ...]) -> str:
    """The case's variant (CFG at its guidance 5) with a scripted TeaCache polynomial."""
    scripted = replace(
        variants.get_variant(case.variant_id),
        id=f"test-{case.variant_id}",
        coefficients=coefficients,  # type: ignore[arg-type]
        calibrated_range=None,
        default_threshold=0.05,
    )
    monkeypatch.setitem(variants.VARIANTS, scripted.id, scripted)
    return scripted.id


def test_threshold_zero_is_vanilla_and_a_scripted_gate_engages(
    shell: tuple[Case, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, pipeline = shell
    variant_id = _scripted(case, monkeypatch, (0.0, 0.0, 0.0, 0.0, 0.01))
    engine = _engine(pipeline)
    zero = _run(engine, case, variant_id, threshold=0.0)
    assert zero["skipped"] == 0 and zero["max_abs_diff"] == 0.0
    assert zero["gated_latents_sha256"] == zero["vanilla_latents_sha256"]
    trace = zero["vanilla_trace"]
    assert len(trace) == case.steps and all(x is not None for x in trace[1:])
    # 0.01 a step stays under 0.05 for the steps between the computed ends: all of them skip
    engaged = _run(engine, case, variant_id, threshold=0.05)
    assert engaged["pattern"] == "F" + "S" * (case.steps - 2) + "F"
    assert engaged["max_abs_diff"] > 0.0


def test_resume_from_vanilla_is_bit_exact(
    shell: tuple[Case, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threshold-only re-run replays vanilla's saved transformer outputs up to the first
    skip, and equals a full gated pass bit for bit."""
    case, pipeline = shell
    variant_id = _scripted(case, monkeypatch, (0.0, 0.0, 0.0, 0.0, 0.01))
    engine = _engine(pipeline)
    trace = _run(engine, case, variant_id, threshold=0.0)["vanilla_trace"]
    # predicted = C − k(x − x₁)²: largest at step 1's measured change, so the first skip comes
    # later, wherever the signal moved away from x₁.
    x1, c = trace[1], 0.1
    k = 0.09 / max((x - x1) ** 2 for x in trace[2:])
    variant_id = _scripted(case, monkeypatch, (0.0, 0.0, -k, 2 * k * x1, c - k * x1 * x1))
    threshold = (c + min(c - k * (x - x1) ** 2 for x in trace[2 : case.steps - 1])) / 2
    verdicts = simulate(teacache_params(variants.get_variant(variant_id), threshold), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip >= 2

    original_class = type(pipeline.transformer)
    full = _run(engine, case, variant_id, threshold=threshold)
    resumed = _run(engine, case, variant_id, threshold=threshold, resume=True)
    assert type(pipeline.transformer) is original_class  # every seam was taken out again
    assert full["skipped"] > 0  # engagement
    assert resumed["resumed_from_step"] == first_skip - 1
    assert resumed["pattern"] == full["pattern"]
    assert resumed["gated_latents_sha256"] == full["gated_latents_sha256"]


def test_the_probe_resumes_from_vanilla_bit_exact(
    shell: tuple[Case, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first-block probe (the default gate: no calibration exists) resumed from the vanilla
    pass equals a full probe pass; the threshold sits just above the smallest change after a
    2-step warm-up, so the first skip comes after replayed steps. Without CFG (guidance 1)."""
    from app.gate.kinds import FIRSTBLOCK_KIND
    from app.gate.kinds import firstblock as probe_kind

    case, pipeline = shell
    variant = variants.get_variant(case.variant_id)
    assert variant.default_gate() == "firstblock"
    monkeypatch.setattr(
        probe_kind.FirstBlockKind, "uncalibrated", replace(probe_kind.DEFAULTS, warmup_steps=2)
    )
    probe = {"steps": case.probe_steps, "guidance": 1.0, "gate": "firstblock"}
    engine = _engine(pipeline)
    changes = _run(engine, case, variant.id, threshold=0.0, **probe)["vanilla_block_changes"]
    trace = [None if c is None else tuple(c) for c in changes]
    params = FIRSTBLOCK_KIND.params(FIRSTBLOCK_KIND.calibration_of(variant), 0.1)
    onset = FIRSTBLOCK_KIND.engagement(params, trace).onset_threshold
    assert onset is not None and onset < 0.999
    threshold = onset * 1.001
    verdicts = FIRSTBLOCK_KIND.simulate(params.with_threshold(threshold), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip >= 2
    full = _run(engine, case, variant.id, threshold=threshold, **probe)
    resumed = _run(engine, case, variant.id, threshold=threshold, resume=True, **probe)
    assert full["gate"] == "firstblock" and full["skipped"] > 0  # engagement
    assert full["pattern"][first_skip] == "S"  # the simulator is exact up to the first skip
    assert resumed["resumed_from_step"] == first_skip - 1
    assert resumed["pattern"] == full["pattern"]
    assert resumed["gated_latents_sha256"] == full["gated_latents_sha256"]
