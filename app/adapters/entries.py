"""Where the one gated step enters an mflux pipeline: the two seams mflux's loops offer.

- ``install_predict``: the pipeline predicts through ``self._predict(transformer, ...)``, a factory
  called once per generation (FLUX.2, Z-Image, FLUX.3, Krea 2, the demo); an instance attribute
  with mflux's signature wins over the class's, and its removal restores mflux's own (compiled)
  predict (where the loop names the class, ``Anima._predict(...)``, the class's calls are routed
  to that instance attribute). One predict call is a whole step: both CFG branches and their
  combination.
- ``install_call``: the loop calls the transformer once per branch (FLUX.1, Qwen-Image, Qwen-Image
  2.1): the transformer's class is swapped for a per-installation subclass; the first call of a
  step is the conditional branch, a repeat within the step the unconditional one.

Either way the family's anatomy says how mflux's arguments become the step's (``StepCall``), and
which calls stay ungated (edits and other paths the anatomy does not describe: ``None``). At
threshold 0 and outside a generation the pipeline's own predict or forward runs, untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import mlx.core as mx

from app.adapters.base import Installation
from app.adapters.common import COND, GateState, install_class_swap, install_predict_factory
from app.adapters.compiled import is_compiled
from app.adapters.step import Anatomy, GatedStep
from app.families import Family
from app.gate import LiveGate


@dataclass(frozen=True, slots=True)
class StepCall:
    """One step (a predict call) or one branch (a transformer call) in the gated step's terms:
    the latents, the timestep as ``Anatomy.embed`` takes it, each branch's ``rest``, and for a
    predict call with classifier-free guidance the unconditional branch and the scale."""

    latents: mx.array
    timestep: Any
    cond: Any
    uncond: Any = None
    guidance: Any = None


class PredictAnatomy(Anatomy):
    """An anatomy entered through mflux's predict factory: built once per generation from the
    factory's arguments (the transformer, and for some families the captions and guidance)."""

    # mflux's loop calls the factory by its class's name (``Anima._predict(...)``), not through
    # ``self``: the gate routes the class's calls (``app.adapters.common.ClassFactoryRouter``).
    factory_on_class: ClassVar[bool] = False

    def __init__(self, transformer: Any, *factory_args: Any) -> None:
        super().__init__(transformer)
        self.factory_args = factory_args

    def step_call(self, *args: Any, **kwargs: Any) -> StepCall | None:
        """mflux's predict arguments as a step; None: a path the anatomy does not gate."""
        raise NotImplementedError

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        """Classifier-free guidance, exactly as the family's mflux predict combines."""
        raise NotImplementedError


class CallAnatomy(Anatomy):
    """An anatomy entered through the transformer's call, one branch per call."""

    # Whether mflux runs the transformer's forward compiled (then the gated step is too).
    compiled: bool = False

    def branch_call(self, *args: Any, **kwargs: Any) -> StepCall | None:
        """mflux's transformer-call arguments as one branch; None: a path not gated."""
        raise NotImplementedError


def install_predict(
    pipeline: Any, gate: LiveGate, *, family: Family, anatomy: type[PredictAnatomy]
) -> Installation:
    """Install ``gate`` on a predict-factory family: each generation's factory builds the
    family's anatomy and one ``GatedStep``, compiled where the pipeline's own predict is."""

    def make_factory(state: GateState) -> Callable[..., Callable[..., mx.array]]:
        def factory(transformer: Any, *factory_args: Any) -> Callable[..., mx.array]:
            assert state.own_factory is not None
            own = state.own_factory(transformer, *factory_args)
            parts = anatomy(transformer, *factory_args)
            step = GatedStep(parts, state, compiled=is_compiled(own), combine=parts.combine)
            gate = state.gate

            def predict(*args: Any, **kwargs: Any) -> mx.array:
                if not (state.gating and gate.needs_signal):
                    # Outside a generation, and at threshold 0: the pipeline's own predict.
                    if state.gating:
                        gate.decide(None)
                    noise = own(*args, **kwargs)
                    if state.gating:
                        state.record(noise)
                    return noise
                call = parts.step_call(*args, **kwargs)
                if call is None:
                    return own(*args, **kwargs)
                noise = step.step(
                    call.latents, call.timestep, call.cond, call.uncond, call.guidance
                )
                state.record(noise)
                return noise

            return predict

        factory.teacache_state = state  # type: ignore[attr-defined]  # marks an installed gate
        return factory

    owner = family.require_mflux().pipeline() if anatomy.factory_on_class else None
    return install_predict_factory(
        pipeline, gate, family=family, make_factory=make_factory, by_class=owner
    )


class _GatedCall:
    """The gated ``__call__`` of the per-installation transformer subclass (``install_call``)."""

    _teacache: GateState
    _anatomy: type[CallAnatomy]
    _mflux_call: Callable[..., mx.array]
    _step: GatedStep | None = None
    _generation = -1

    def __call__(self, *args: Any, **kwargs: Any) -> mx.array:
        cls = type(self)
        state = cls._teacache
        if not state.gating:
            return cls._mflux_call(self, *args, **kwargs)
        step = cls._step
        if step is None or cls._generation != state.lifecycle.generation:
            # One step per generation (its compiled parts see this generation's parameters).
            step = GatedStep(cls._anatomy(self), state, compiled=cls._anatomy.compiled)
            cls._step, cls._generation = step, state.lifecycle.generation
        call = step.anatomy.branch_call(*args, **kwargs)  # type: ignore[attr-defined]
        if call is None:
            return cls._mflux_call(self, *args, **kwargs)
        gate = state.gate
        branch = state.branch_of_call()
        if not gate.needs_signal:
            gate.decide(None)  # threshold 0: mflux's own call, untouched
            noise = cls._mflux_call(self, *args, **kwargs)
        elif branch == COND:
            noise = step.cond(call.latents, call.timestep, call.cond)
        else:
            noise = step.uncond(call.latents, call.timestep, call.cond)
        if branch == COND:
            state.record(noise)  # calibration pairs follow the conditional branch
        return noise


def install_call(
    pipeline: Any,
    gate: LiveGate,
    *,
    family: Family,
    anatomy: type[CallAnatomy],
    transformer_class: type,
) -> Installation:
    """Install ``gate`` on a transformer-call family: the transformer's class is swapped for a
    subclass whose ``__call__`` runs the gated step (mflux's own ``transformer_class.__call__``
    outside a generation, at threshold 0 and on paths the anatomy does not gate)."""
    return install_class_swap(
        pipeline,
        gate,
        family=family,
        expected=transformer_class,
        gated_base=_gated_base(anatomy, transformer_class),
    )


@cache
def _gated_base(anatomy: type[CallAnatomy], transformer_class: type) -> type:
    """The base of every installation's subclass for this anatomy (one class, so a second
    installation on a gated transformer is recognised)."""
    return type(
        f"Gated{transformer_class.__name__}",
        (_GatedCall, transformer_class),
        {
            "_anatomy": anatomy,
            "_mflux_call": transformer_class.__call__,
            "__module__": anatomy.__module__,
        },
    )
