"""Probes for adapter and engine tests: a gate that records what the adapter hands it, the vanilla
pass's recorder, a snapshot of everything an installation may touch, a callback that keeps each
step's latents, and a helper that runs a shell's real ``generate_image`` and returns its final
latents."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

from app.adapters.shells import DEFAULT_PROMPT
from app.gate import LiveGate, StepEvent, TeaCacheGate, Verdict
from app.gate.kinds import vanilla_recorder
from app.gate.live import FirstBlockGate
from app.gate.signals import Tap, Taps


class _Uncalibrated:
    """A variant with no calibration: TeaCache's record is priced by the identity."""

    @property
    def calibrations(self) -> dict[str, object]:
        return {}


def recorder(*, calibrating: bool = False) -> LiveGate:
    """The vanilla pass's gate (every kind records its trace; ``calibrating``: TeaCache the
    output's change too), with TeaCache's signal priced by the identity."""
    return vanilla_recorder(_Uncalibrated(), calibrating=calibrating)


def figure(event: StepEvent, kind: str, key: str) -> Any:
    """One of ``kind``'s figures of a step (None where it recorded none)."""
    return event.figures(kind).get(key)


def generate_latents(pipeline: Any, **kwargs: Any) -> mx.array:
    """Run the real ``generate_image`` and return the final latents the (stub) VAE received."""
    kwargs.setdefault("seed", 0)
    kwargs.setdefault("prompt", DEFAULT_PROMPT)
    pipeline.generate_image(**kwargs)
    return pipeline.vae.last


class RecordingGate(TeaCacheGate):
    """A ``TeaCacheGate`` that also records what the adapter hands it, per step:
    ``stored[(step, branch)] = (body_out, body_in, residual)`` and
    ``reused[(step, branch)] = (body_in, residual, result)``; with ``capture_output`` it asks for
    the step's output too (``Tap.output``), and ``outputs[step]`` counts ``record_output``
    calls."""

    def __init__(self, *args: Any, capture_output: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capture_output = capture_output
        self.stored: dict[tuple[int, str], tuple[mx.array, mx.array, mx.array]] = {}
        self.reused: dict[tuple[int, str], tuple[mx.array, mx.array, mx.array]] = {}
        self.outputs: dict[int, int] = {}
        self.signals: list[int] = []  # step index of every non-None signal passed to decide

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if signal is not None:
            self.signals.append(self.step_index)
        return super().decide(signal, measured)

    def store_residual(self, body_out: mx.array, body_in: mx.array, branch: str = "cond") -> None:
        super().store_residual(body_out, body_in, branch)
        residual = self._residuals.get(branch)
        if residual is not None:
            self.stored[(self.step_index, branch)] = (body_out, body_in, residual)

    def reuse(self, body_in: mx.array, branch: str = "cond") -> mx.array:
        result = super().reuse(body_in, branch)
        self.reused[(self.step_index, branch)] = (body_in, self._residuals[branch], result)
        return result

    @property
    def taps(self) -> Taps:
        taps = super().taps
        return replace(taps, records=taps.records | {Tap.output}) if self.capture_output else taps

    def record_tap(self, tap: Tap, value: mx.array) -> None:
        if tap is Tap.output:
            self.record_output(value)

    def record_output(self, output: mx.array) -> None:
        self.outputs[self.step_index] = self.outputs.get(self.step_index, 0) + 1


class RecordingProbe(FirstBlockGate):
    """A ``FirstBlockGate`` that records what the adapter hands it, per step: ``signals[step]``
    (the first block's residual on the image stream), ``stored[(step, branch)] = (body_out,
    body_in, residual)`` and ``reused[(step, branch)] = (body_in, residual, result)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.signals: dict[int, mx.array] = {}
        self.stored: dict[tuple[int, str], tuple[mx.array, mx.array, mx.array]] = {}
        self.reused: dict[tuple[int, str], tuple[mx.array, mx.array, mx.array]] = {}

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if signal is not None and self.step_index not in self.signals:
            self.signals[self.step_index] = signal
        return super().decide(signal, measured)

    def store_residual(self, body_out: mx.array, body_in: mx.array, branch: str = "cond") -> None:
        super().store_residual(body_out, body_in, branch)
        residual = self._residuals.get(branch)
        if residual is not None:
            self.stored[(self.step_index, branch)] = (body_out, body_in, residual)

    def reuse(self, body_in: mx.array, branch: str = "cond") -> mx.array:
        result = super().reuse(body_in, branch)
        self.reused[(self.step_index, branch)] = (body_in, self._residuals[branch], result)
        return result


def _ids(mapping: dict[str, Any]) -> dict[str, int]:
    return {key: id(value) for key, value in mapping.items()}


def pipeline_snapshot(pipeline: Any) -> dict[str, Any]:
    """Everything an installation may touch, by identity: classes, instance attributes, module
    children, the parameter tree and the callback lists. Equal snapshots mean "untouched"."""
    transformer = pipeline.transformer
    callbacks = pipeline.callbacks
    return {
        "pipeline_class": type(pipeline),
        "pipeline_attrs": _ids(vars(pipeline)),
        "pipeline_children": _ids(dict(pipeline)),
        "transformer_class": type(transformer),
        "transformer_attrs": _ids(vars(transformer)),
        "transformer_children": _ids(dict(transformer)),
        "parameters": {name: id(value) for name, value in tree_flatten(pipeline.parameters())},
        "callbacks": {
            name: [id(entry) for entry in getattr(callbacks, name, ())]
            for name in ("before_loop", "in_loop", "after_loop", "interrupt")
        },
    }


class LatentRecorder:
    """An mflux callback that keeps the latents entering each step (before_loop's, then each
    in_loop's) and the run's config."""

    def __init__(self) -> None:
        self.inputs: list[mx.array] = []
        self.config: Any = None

    def call_before_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        self.inputs = [latents]
        self.config = config

    def call_in_loop(
        self, t: int, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        mx.eval(latents)
        self.inputs.append(latents)
