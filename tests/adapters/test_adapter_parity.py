"""Every family's adapter is a no-op at threshold 0 and while observing: on tiny random-weight
shells of the registry's families (``Family.random_weights``) running mflux's real
``generate_image``, bit for bit against vanilla.

Vanilla here is mflux's eager predict (``is_m1_or_m2`` patched True), so vanilla and the gated
re-walk share one numerical path and are compared bit for bit. The compiled vanilla path is
compared within a measured tolerance in test_adapter_compiled.py; each family's forced skips in
its own file (test_adapter_<family>.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, install_gate
from app.adapters.shells import case_shell
from app.families import Family, ShellCase, ShellTest, shell_cases
from app.gate import TeaCacheParams
from app.gate.fill import FORECAST
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)

# Every family's parity cases (``ShellCase``, ``ShellTest.parity``): each family's default model
# with its CFG, and the schedules that take another path (FLUX.2 without CFG, Z-Image Turbo's
# guidance-distilled linear schedule, FLUX.3's distilled flow map, Qwen-Image 2.1 Turbo's fixed
# sigma nodes, Krea 2 without and with CFG). mflux compiles Qwen-Image 2.1 on every machine: there
# vanilla is compiled too. A family's test_family_registry contract holds that it has some.
CASES = shell_cases(ShellTest.parity)


pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Family, ShellCase], Any]]:
    """The case's tiny shell, built through the registry once per module."""
    built: dict[tuple[str, str, int, str | None], Any] = {}

    def get(family: Family, case: ShellCase) -> Any:
        key = (family.id, case.model_name, case.seed, case.negative_prompt)
        if key not in built:
            with common.use_precision(mx.float32):
                built[key] = case_shell(family, case)
        return built[key]

    yield get
    built.clear()


@pytest.mark.parametrize(("family", "case"), CASES, ids=[case.name for _, case in CASES])
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(
    shell: Callable[[Family, ShellCase], Any],
    family: Family,
    case: ShellCase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = shell(family, case)
    for name, value in case.transformer_attrs:
        monkeypatch.setattr(pipeline.transformer, name, value)
    kwargs = case.generate_kwargs()
    vanilla_before = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        gated = probes.generate_latents(pipeline, **kwargs)
    forecasting = probes.RecordingGate(OFF)  # the fill changes nothing where nothing skips
    forecasting.fill = FORECAST
    with install_gate(pipeline, forecasting):
        forecast_off = probes.generate_latents(pipeline, **kwargs)
    trace = probes.recorder(calibrating=True)
    with install_gate(pipeline, trace):
        observed = probes.generate_latents(pipeline, **kwargs)
    vanilla_after = probes.generate_latents(pipeline, **kwargs)

    assert mx.array_equal(vanilla_before, vanilla_after).item()
    assert mx.array_equal(gated, vanilla_before).item()
    assert mx.array_equal(forecast_off, vanilla_before).item()
    assert forecasting.pattern == "C" * case.steps and forecasting.stored == {}
    assert mx.array_equal(observed, vanilla_before).item()
    # Threshold 0 is the fast path: no signal, no residual stored or reused, every step computed.
    assert off.pattern == "C" * case.steps and off.skipped == 0
    assert off.signals == [] and off.stored == {} and off.reused == {}
    assert trace.skipped == 0 and len(trace.events) == case.steps
    # The vanilla trace measured the signal and the output change on every step after the first.
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "teacache", "output_rel_l1") is not None
        for e in trace.events[1:]
    )
