"""Pieces every family adapter uses: the per-installation state and the error types."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mflux.models.common.config.model_config import ModelConfig

from app.adapters.base import GateLifecycle, Installation
from app.families import Family
from app.gate import LiveGate
from app.gate.signals import Tap

COND = "cond"
UNCOND = "uncond"


class AdapterError(RuntimeError):
    """A gate cannot be installed on this pipeline; the message says why in one sentence."""


class UnsupportedPipelineError(AdapterError):
    pass


class AlreadyInstalledError(AdapterError):
    pass


@dataclass(eq=False)
class GateState:
    """What a gated forward needs at call time. A plain object, never an ``nn.Module`` attribute
    value that MLX would file as a child (arrays there would become parameters)."""

    gate: LiveGate
    lifecycle: GateLifecycle
    # The pipeline's own ``_predict`` factory (mflux's staticmethod, or an instance override such
    # as the demo's eager one), for the predict-factory families: called at threshold 0 and
    # outside a generation, and asked whether it compiles (app/adapters/compiled.py).
    own_factory: Callable[[Any], Any] | None = field(default=None, repr=False)
    # How often each compiled function of the split-compiled path was traced (tests assert once
    # per generation, never per step).
    traces: Counter[str] = field(default_factory=Counter, repr=False)
    _call_key: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def gating(self) -> bool:
        """True inside a generation (between before_loop and after_loop)."""
        return self.lifecycle.active

    def branch_of_call(self) -> str:
        """For pipelines that call the transformer twice per step (Qwen-Image): the first call
        of a step is the conditional branch, a repeat within the same step the unconditional."""
        key = (self.lifecycle.generation, self.gate.step_index)
        if key == self._call_key:
            return UNCOND
        self._call_key = key
        return COND

    def record(self, noise: mx.array) -> None:
        """The step's output, to a gate that records it (``Tap.output``: calibration data)."""
        if self.gate.records_output:
            self.gate.record_tap(Tap.output, noise)


def _loop_sigmas(family: Family) -> Callable[[Any], mx.array] | None:
    """The sigmas the family's loop steps on where they are not ``config.scheduler``'s."""
    return None if family.preview is None else family.preview.loop_sigmas


def install_class_swap(
    pipeline: Any,
    gate: LiveGate,
    *,
    family: Family,
    expected: type,
    gated_base: type,
) -> Installation:
    """Install a gate by swapping the transformer's class for a per-installation subclass of
    ``gated_base`` (FLUX.1, Qwen-Image): parameters and attributes stay untouched, and the
    subclass carries the state, so a second pipeline's installation never sees this gate."""
    transformer = getattr(pipeline, "transformer", None)
    if isinstance(transformer, gated_base):
        raise AlreadyInstalledError(
            f"a TeaCache gate is already installed on this {family.short_name} model"
        )
    if type(transformer) is not expected:
        raise UnsupportedPipelineError(
            f"the {family.short_name} adapter expects mflux's {expected.__name__}, "
            f"found {type(transformer).__name__}"
        )
    installation = Installation(pipeline, gate, family=family.id)
    try:
        lifecycle = GateLifecycle(gate, _loop_sigmas(family))
        state = GateState(gate, lifecycle)
        gated_class = type(
            gated_base.__name__,
            (gated_base,),
            {"_teacache": state, "__module__": gated_base.__module__},
        )
        installation.swap_class(transformer, gated_class)
        installation.register_callback(pipeline.callbacks, lifecycle)
    except BaseException:
        installation.remove()
        raise
    return installation


class ClassFactoryRouter:
    """A predict factory that mflux calls by its class's name (Anima's loop:
    ``Anima._predict(self.transformer, …)``), where no instance attribute is ever looked up.
    Installed as the class's ``_predict`` while a gate is installed on one of its pipelines, it
    hands a call to that pipeline's instance ``_predict`` (the gate's factory, or a seam layered
    on it: ``app.adapters.replay``) when given that pipeline's transformer, and any other call to
    mflux's own factory (``own``), so other pipelines of the class run as before."""

    def __init__(self, held: Any) -> None:
        self.held = held  # the class's own attribute (mflux's staticmethod), put back at the end
        self.own: Callable[..., Any] = held.__func__ if isinstance(held, staticmethod) else held
        self.pipelines: dict[int, Any] = {}  # id(transformer) → its pipeline

    def __call__(self, transformer: Any, *args: Any, **kwargs: Any) -> Any:
        pipeline = self.pipelines.get(id(transformer))
        factory = self.own if pipeline is None else vars(pipeline)["_predict"]
        return factory(transformer, *args, **kwargs)


def _class_router(owner: type) -> ClassFactoryRouter | None:
    held = vars(owner).get("_predict")
    if isinstance(held, staticmethod) and isinstance(held.__func__, ClassFactoryRouter):
        return held.__func__
    return None


def _route_through_class(installation: Installation, owner: type, pipeline: Any) -> None:
    """Route ``owner._predict`` calls for this pipeline's transformer to its instance factory;
    undo takes the route away, and the last one puts mflux's own attribute back."""
    router = _class_router(owner)
    if router is None:
        router = ClassFactoryRouter(vars(owner)["_predict"])
        owner._predict = staticmethod(router)
    key = id(pipeline.transformer)

    def undo() -> None:
        router.pipelines.pop(key, None)
        if not router.pipelines and _class_router(owner) is router:
            owner._predict = router.held

    installation.add_rollback(undo)
    router.pipelines[key] = pipeline


def install_predict_factory(
    pipeline: Any,
    gate: LiveGate,
    *,
    family: Family,
    make_factory: Callable[[GateState], Any],
    by_class: type | None = None,
) -> Installation:
    """Install a gate as an instance-level ``_predict`` factory (FLUX.2, Z-Image): mflux builds
    its predict from ``self._predict`` each generation, so the instance attribute wins and its
    removal restores mflux's own (compiled) predict. ``by_class``: the class whose name mflux's
    loop calls the factory by (``ClassFactoryRouter``), None where it asks ``self``."""
    current = vars(pipeline).get("_predict")
    if current is not None and hasattr(current, "teacache_state"):
        raise AlreadyInstalledError(
            f"a TeaCache gate is already installed on this {family.short_name} model"
        )
    own_factory = pipeline._predict  # the instance override if any, else the class's staticmethod
    if isinstance(own_factory, ClassFactoryRouter):  # another pipeline of the class is gated
        own_factory = own_factory.own
    installation = Installation(pipeline, gate, family=family.id)
    try:
        lifecycle = GateLifecycle(gate, _loop_sigmas(family))
        state = GateState(gate, lifecycle, own_factory=own_factory)
        installation.set_instance_attr(pipeline, "_predict", make_factory(state))
        if by_class is not None:
            _route_through_class(installation, by_class, pipeline)
        installation.register_callback(pipeline.callbacks, lifecycle)
    except BaseException:
        installation.remove()
        raise
    return installation


@contextmanager
def use_precision(dtype: mx.Dtype) -> Iterator[None]:
    """Set mflux's global ``ModelConfig.precision`` for the duration of the block."""
    previous = ModelConfig.precision
    ModelConfig.precision = dtype
    try:
        yield
    finally:
        ModelConfig.precision = previous


@contextmanager
def attached(pipeline: Any, callback: Any) -> Iterator[Any]:
    """Register ``callback`` on the pipeline for the block; removed by identity afterwards."""
    pipeline.callbacks.register(callback)
    try:
        yield callback
    finally:
        for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
            entries = getattr(pipeline.callbacks, name)
            entries[:] = [entry for entry in entries if entry is not callback]
