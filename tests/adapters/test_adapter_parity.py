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
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, install_gate, shells
from app.families import FAMILIES, get_family
from app.gate import TeaCacheGate, TeaCacheParams
from app.gate.fill import FORECAST
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)


@dataclass(frozen=True)
class Case:
    family: str
    model_name: str
    steps: int
    guidance: float | None  # None: the model takes none (guidance-distilled)
    seed: int = 0

    @property
    def kwargs(self) -> dict[str, Any]:
        run: dict[str, Any] = {"num_inference_steps": self.steps, "height": 128, "width": 128}
        return run if self.guidance is None else {**run, "guidance": self.guidance}


# Each family's default model with its CFG, and the schedules that take another path: FLUX.2
# without CFG (guidance 1), Z-Image Turbo (guidance-distilled: one branch, the linear
# scheduler). FLUX.1 runs 3 steps: its shell is 3072 wide even when tiny. This year's: FLUX.3's
# distilled flow map (no guidance, the target time) and its base with CFG; Qwen-Image 2.1 (no
# guidance: mflux's default) and its Turbo on fixed sigma nodes; Krea 2 Turbo without and with
# CFG. mflux compiles Qwen-Image 2.1 on every machine: there vanilla is compiled too.
CASES = {
    "flux1-dev": Case("flux1", "dev", 3, 3.5),
    "flux2-cfg": Case("flux2", "flux2-klein-base-4b", 6, 4.0),
    "flux2-no-cfg": Case("flux2", "flux2-klein-base-4b", 6, 1.0),
    "z-image-cfg": Case("z-image", "z-image", 6, 4.0),
    "z-image-turbo": Case("z-image", "z-image-turbo", 5, None, seed=1),
    "qwen-image": Case("qwen-image", "qwen-image", 6, 4.0),
    "flux3-image-klein": Case("flux3", "flux3-image-klein", 6, None),
    "flux3-base-cfg": Case("flux3", "flux3-image-klein-base", 6, 4.0),
    "qwen-image-2.1": Case("qwen-image-2.1", "qwen-image-2.1", 6, None),
    "qwen-image-2.1-turbo": Case("qwen-image-2.1", "qwen-image-2.1-turbo", 5, None, seed=1),
    "krea-2": Case("krea-2", "krea-2", 6, 1.0),
    "krea-2-cfg": Case("krea-2", "krea-2", 6, 3.0),
}


pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


def test_every_family_with_a_shell_has_a_case() -> None:
    with_shells = {f.id for f in FAMILIES.values() if f.random_weights is not None}
    assert {case.family for case in CASES.values()} == with_shells


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Case], Any]]:
    """The case's tiny shell, built through the registry once per module."""
    built: dict[tuple[str, str, int], Any] = {}

    def get(case: Case) -> Any:
        key = (case.family, case.model_name, case.seed)
        if key not in built:
            with common.use_precision(mx.float32):
                built[key] = shells.random_weight_shell(
                    get_family(case.family), case.model_name, seed=case.seed
                )
        return built[key]

    yield get
    built.clear()


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(
    shell: Callable[[Case], Any], case: Case
) -> None:
    pipeline = shell(case)
    kwargs = case.kwargs
    vanilla_before = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        gated = probes.generate_latents(pipeline, **kwargs)
    forecasting = probes.RecordingGate(OFF)  # the fill changes nothing where nothing skips
    forecasting.fill = FORECAST
    with install_gate(pipeline, forecasting):
        forecast_off = probes.generate_latents(pipeline, **kwargs)
    trace = TeaCacheGate(OFF, observe=True, capture_output=True)
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
    assert all(e.rel_l1 is not None and e.output_rel_l1 is not None for e in trace.events[1:])
