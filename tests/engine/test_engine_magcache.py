"""The engine with the MagCache gate, on the tiny FLUX.2 shell (mflux's real loop, random weights,
float32 on CPU): the same paired same-process oracles as the TeaCache engine tests.

The shell's variant gets a made-up MagCache table (ratios near 1, so the gate engages at small
thresholds); quality is not judged here (random weights) but in tests/demo/test_demo_magcache.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import mlx.core as mx
import pytest

from app import variants
from app.adapters.common import use_precision
from app.adapters.flux2 import shell as flux2_shell
from app.engine import events as ev
from app.engine.engine import schedule_warnings
from app.engine.request import RequestError, make_request
from app.gate import Decision, simulate_magcache
from app.variants import MagCacheCalibration, Provenance
from tests.engine.test_engine import PROMPT, STEPS, _engine, _request, _run
from tests.fakes.params import magcache_params

TABLE = (1.0, 1.1, 1.05, 1.02, 1.01, 1.0, 0.99, 1.01, 0.98, 0.97, 0.95, 0.9)


@pytest.fixture
def shell() -> Iterator[Any]:
    with use_precision(mx.float32):
        yield flux2_shell("flux2-klein-base-4b", prompts=(PROMPT,))


@pytest.fixture
def mag_variant(monkeypatch: pytest.MonkeyPatch) -> str:
    base = variants.get_variant("flux2-klein-base-4b")
    variant = replace(
        base,
        id="test-flux2-magcache",
        default_size=(128, 128),
        magcache=MagCacheCalibration(
            ratios=TABLE,
            default_threshold=0.05,
            retention_ratio=0.2,
            max_consecutive_skips=2,
            provenance=Provenance(source="test table"),
        ),
    )
    monkeypatch.setitem(variants.VARIANTS, variant.id, variant)
    return variant.id


def _report(seen: list[Any]) -> Any:
    return next(e for e in seen if isinstance(e, ev.RunFinished)).report


def test_threshold_zero_is_bit_exact_and_skips_nothing(mag_variant: str, shell: Any) -> None:
    report = _report(_run(_engine(shell), _request(mag_variant, 0.0, gate="magcache")))
    assert report.gated.pattern == "C" * STEPS
    assert report.max_abs_diff == 0.0
    assert report.gated.latents_sha256 == report.vanilla.latents_sha256


def test_gated_pass_follows_the_table_and_tags_its_events(mag_variant: str, shell: Any) -> None:
    seen = _run(_engine(shell), _request(mag_variant, 0.05, gate="magcache"))
    report = _report(seen)
    expected = simulate_magcache(magcache_params(variants.get_variant(mag_variant)), STEPS)
    assert report.gated.pattern == "".join(v.decision.letter for v in expected)
    assert report.gated.skipped > 0  # engagement
    assert report.max_abs_diff > 0.0  # skipping really changed the trajectory
    gated_steps = [e.step for e in seen if isinstance(e, ev.StepDone) and e.which is ev.Pass.gated]
    assert all(s.gate == "magcache" and s.threshold == 0.05 for s in gated_steps)
    assert [s.accumulated for s in gated_steps] == [v.accumulated for v in expected]
    # The vanilla pass is gate-independent: the vanilla recorder, where every kind records its
    # own trace.
    vanilla_steps = [
        e.step for e in seen if isinstance(e, ev.StepDone) and e.which is ev.Pass.vanilla
    ]
    assert all(
        s.gate == "vanilla" and {"teacache", "magcache"} <= set(s.signals) for s in vanilla_steps
    )
    ratios = [s.figures("magcache")["ratio"] for s in vanilla_steps]
    assert ratios[0] is None
    assert all(isinstance(r, float) and r > 0 for r in ratios[1:])
    assert report.to_json()["gate"] == "magcache"


def test_resumed_pass_is_bit_exact_with_a_full_pass(mag_variant: str, shell: Any) -> None:
    engine = _engine(shell)
    full = _report(_run(engine, _request(mag_variant, 0.05, gate="magcache", resume=False)))
    resumed = _report(_run(engine, _request(mag_variant, 0.05, gate="magcache", resume=True)))
    first_skip = full.gated.pattern.index(Decision.skipped.letter)
    assert first_skip >= 3  # retention keeps the first steps: something really is replayed
    assert resumed.gated.resumed_from == first_skip - 1
    assert resumed.gated.pattern == full.gated.pattern
    assert resumed.gated.latents_sha256 == full.gated.latents_sha256


def test_vanilla_cache_survives_a_gate_switch(mag_variant: str, shell: Any) -> None:
    loads: list[str] = []
    engine = _engine(shell, loads)
    _run(engine, _request(mag_variant, 0.1))  # TeaCache first
    seen = _run(engine, _request(mag_variant, 0.05, gate="magcache"))
    started = [e for e in seen if isinstance(e, ev.PassStarted)]
    assert started[0].which is ev.Pass.vanilla and started[0].cached
    assert _report(seen).gated.skipped > 0


def test_a_variant_without_a_table_refuses_magcache_in_one_sentence() -> None:
    with pytest.raises(RequestError, match="no MagCache calibration yet") as info:
        make_request("flux2-klein-base-4b", PROMPT, gate="magcache")
    assert "calibrate --variant flux2-klein-base-4b --gate magcache" in str(info.value)
    with pytest.raises(RequestError, match="step-distilled"):
        make_request("flux2-klein-4b", PROMPT, gate="magcache")
    with pytest.raises(RequestError, match="unknown gate 'fastcache'"):
        make_request("demo", "a red circle on a blue background", gate="fastcache")


def test_distilled_schedule_warns_and_stays_off_by_default() -> None:
    variant = variants.get_variant("demo-turbo")
    assert "magcache" in variant.gates
    request = make_request(variant.id, "a red circle on a blue background", gate="magcache")
    assert request.threshold == 0.0  # no default MagCache threshold on the distilled model
    (warning,) = schedule_warnings(variant, request)
    assert warning.kind == "distilled"
    assert "Demo shapes (demo)" in warning.message  # the suggestion names the base variant
    params = magcache_params(variant)
    assert all(v.decision is not Decision.skipped for v in simulate_magcache(params, 4))
