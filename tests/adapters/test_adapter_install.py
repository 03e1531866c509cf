"""Installing and removing gates: exact restoration, transactional rollback, dispatch, callbacks.
On each family's first install case (``ShellTest.install``); FLUX.1's equivalents live in
tests/adapters/test_adapter_flux1.py beside its costlier shell."""

from __future__ import annotations

import inspect
from typing import Any

import mlx.core as mx
import pytest
from mflux.callbacks.callback_registry import CallbackRegistry
from mlx import nn
from mlx.utils import tree_flatten

from app.adapters import (
    AlreadyInstalledError,
    GateLifecycle,
    Installation,
    UnsupportedPipelineError,
    detect_family,
    install_gate,
)
from app.adapters.shells import case_shell, random_weight_shell
from app.families import FAMILIES as FAMILIES_BY_ID
from app.families import Family, ShellTest, get_family
from app.gate import TeaCacheGate, TeaCacheParams
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
ON = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5)

# Each family's first install case (``ShellTest.install``): a fresh shell per test.
FAMILIES = [
    (family, cases[0])
    for family in FAMILIES_BY_ID.values()
    if family.random_weights is not None
    and (cases := family.random_weights.cases_for(ShellTest.install))
]


pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(params=FAMILIES, ids=[family.id for family, _ in FAMILIES])
def built(request: pytest.FixtureRequest) -> tuple[Family, Any]:
    family, case = request.param
    return family, case_shell(family, case)


@pytest.fixture
def pipeline(built: tuple[Family, Any]) -> Any:
    return built[1]


def test_dispatch_by_pipeline_class(built: tuple[Family, Any]) -> None:
    family, pipeline = built
    assert type(pipeline) is family.require_mflux().pipeline()  # mflux's own class
    assert detect_family(pipeline) is family


def test_unsupported_pipelines_are_refused_with_one_clear_message() -> None:
    with pytest.raises(
        UnsupportedPipelineError, match=r"no adapter for Module; supported: FLUX\.1"
    ):
        install_gate(nn.Module(), TeaCacheGate(OFF))


@pytest.mark.parametrize("params", [OFF, ON], ids=["threshold-0", "enabled"])
def test_install_then_remove_restores_the_pipeline_exactly(
    pipeline: Any, params: TeaCacheParams
) -> None:
    before = probes.pipeline_snapshot(pipeline)
    values = dict(tree_flatten(pipeline.parameters()))
    gate = TeaCacheGate(params)
    with install_gate(pipeline, gate) as installation:
        during = probes.pipeline_snapshot(pipeline)
        # Gate state is never a module child: the parameter tree is untouched while installed.
        assert during["parameters"] == before["parameters"]
        assert during["pipeline_children"] == before["pipeline_children"]
        assert during["transformer_children"] == before["transformer_children"]
        lifecycles = [c for c in pipeline.callbacks.in_loop if isinstance(c, GateLifecycle)]
        assert len(lifecycles) == 1 and lifecycles[0].gate is gate
        for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
            assert lifecycles[0] in getattr(pipeline.callbacks, name)
        with pytest.raises(AlreadyInstalledError):
            install_gate(pipeline, TeaCacheGate(params))
        probes.generate_latents(pipeline, num_inference_steps=3, height=64, width=64)
        assert installation.family == detect_family(pipeline).id
    after = probes.pipeline_snapshot(pipeline)
    if after["parameters"] != before["parameters"]:
        # Some families' mflux generation replaces weight arrays by equal views each time, gate
        # or not (Qwen-Image 2.1's ``inference_projections`` packs q/k/v and the MLP's gate/proj
        # for its compiled forward): same values, new arrays — and mflux's own generation, with
        # no gate installed, does the same.
        after_values = dict(tree_flatten(pipeline.parameters()))
        assert after_values.keys() == values.keys()
        assert all(mx.array_equal(after_values[k], v).item() for k, v in values.items())
        plain = probes.pipeline_snapshot(pipeline)["parameters"]
        probes.generate_latents(pipeline, num_inference_steps=3, height=64, width=64)
        assert probes.pipeline_snapshot(pipeline)["parameters"] != plain
        after["parameters"] = before["parameters"]
    assert after == before


def test_a_failure_mid_install_rolls_everything_back(pipeline: Any) -> None:
    class BrokenRegistry:
        def register(self, callback: object) -> None:
            raise RuntimeError("registry broke")

    pipeline.callbacks = BrokenRegistry()
    before = probes.pipeline_snapshot(pipeline)
    with pytest.raises(RuntimeError, match="registry broke"):
        install_gate(pipeline, TeaCacheGate(ON))
    assert probes.pipeline_snapshot(pipeline) == before


def test_an_existing_instance_predict_is_restored_not_deleted() -> None:
    pipeline = random_weight_shell(get_family("flux2"), "flux2-klein-base-4b")

    def own_factory(transformer: Any) -> Any:  # e.g. the demo's eager vanilla predict
        raise AssertionError("not called while a gate is installed")

    pipeline._predict = own_factory
    with install_gate(pipeline, TeaCacheGate(OFF)):
        assert pipeline._predict is not own_factory
    assert vars(pipeline)["_predict"] is own_factory


def test_removal_unregisters_by_identity_only() -> None:
    registry = CallbackRegistry()
    gate = TeaCacheGate(OFF)
    other = GateLifecycle(gate)  # same class, same gate: must survive
    registry.register(other)
    installation = Installation(object(), gate)
    mine = GateLifecycle(gate)
    installation.register_callback(registry, mine)
    installation.remove()
    for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
        assert getattr(registry, name) == [other]


def test_set_instance_attr_restores_or_deletes() -> None:
    class Plain:
        shared = "class value"

    obj = Plain()
    obj.existing = "old"  # type: ignore[attr-defined]
    installation = Installation(obj, TeaCacheGate(OFF))
    installation.set_instance_attr(obj, "existing", "new")
    installation.set_instance_attr(obj, "shared", "instance value")
    assert obj.existing == "new" and obj.shared == "instance value"  # type: ignore[attr-defined]
    installation.remove()
    assert vars(obj) == {"existing": "old"} and obj.shared == "class value"
    installation.remove()  # idempotent


def test_every_lifecycle_method_accepts_unknown_keywords() -> None:
    for name in ("call_before_loop", "call_in_loop", "call_after_loop", "call_interrupt"):
        parameters = inspect.signature(getattr(GateLifecycle, name)).parameters.values()
        assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters), name
    # mflux passes canny_image/depth_image/control_images to before_loop since 0.19.
    lifecycle = GateLifecycle(TeaCacheGate(OFF))

    class Config:
        num_inference_steps = 4
        init_time_step = 1

    lifecycle.call_before_loop(
        seed=0, prompt="p", latents=mx.zeros(1), config=Config(), control_images=None, new=1
    )
    assert lifecycle.gate.num_steps == 3 and lifecycle.active  # img2img: active steps only
    lifecycle.call_interrupt(
        t=0, seed=0, prompt="p", latents=mx.zeros(1), config=Config(), time_steps=None, x=1
    )
    assert not lifecycle.active
