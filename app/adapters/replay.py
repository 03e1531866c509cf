"""Record and replay a gated pipeline's model outputs at each family's seam.

The engine's *resume* replays vanilla's saved noise predictions for the steps before the gate's
first skip. Where to hook that is adapter knowledge: FLUX.2, FLUX.3, Z-Image, Krea 2 and the demo
predict through an instance-level ``_predict`` factory, FLUX.1 and Qwen-Image (2.1) call the
transformer (whose class the gate's adapter already swapped) directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx


@dataclass(frozen=True, slots=True)
class Replay:
    """Steps ``< until`` get vanilla's saved outputs instead of calling the transformer.

    ``outputs`` holds every recorded call in order: one per step where the family combines CFG
    inside ``predict`` (FLUX.2, Z-Image, the demo), one per transformer call where it calls the
    transformer directly (FLUX.1: one per step; Qwen-Image: positive then negative)."""

    until: int
    outputs: list[mx.array]
    calls_per_step: int

    @property
    def until_call(self) -> int:
        return self.until * self.calls_per_step


def _replaying(
    call: Callable[..., mx.array], sink: list[mx.array] | None, replay: Replay | None
) -> Callable[..., mx.array]:
    """``call`` that records its outputs into ``sink`` and returns saved outputs while replaying."""
    counter = itertools.count()

    def wrapped(*args: Any, **kwargs: Any) -> mx.array:
        index = next(counter)
        if replay is not None and index < replay.until_call:
            return replay.outputs[index]
        out = call(*args, **kwargs)
        if sink is not None:
            sink.append(out)
        return out

    return wrapped


def record_and_replay(
    pipeline: Any, sink: list[mx.array] | None, replay: Replay | None
) -> Callable[[], None]:
    """Install the record/replay seam on a gated pipeline; returns the undo.

    FLUX.2, Z-Image and the demo run through the adapter's instance-level ``_predict`` factory:
    wrap what it returns. FLUX.1 and Qwen-Image call the transformer (whose class the adapter
    swapped): layer one more subclass whose ``__call__`` records or replays. Either way every
    recorded output is exactly what mflux's loop received, so replaying rebuilds vanilla's
    latents bit for bit. With nothing to record or replay (a gated pass that is not resumed) no
    seam is installed: the transformer call stays the adapter's, one Python layer fewer a step."""
    if sink is None and replay is None:
        return lambda: None
    factory = pipeline.__dict__.get("_predict")
    if factory is not None:

        def wrapped_factory(*args: Any, **kwargs: Any) -> Callable[..., mx.array]:
            # mflux's factories take the transformer (FLUX.2, Z-Image, FLUX.3), or the
            # transformer with the captions and guidance (Krea 2)
            return _replaying(factory(*args, **kwargs), sink, replay)

        pipeline._predict = wrapped_factory

        def undo_seam() -> None:
            pipeline._predict = factory

        return undo_seam

    transformer = pipeline.transformer
    gated_class = type(transformer)
    replaying_call = _replaying(
        lambda *args, **kwargs: gated_class.__call__(transformer, *args, **kwargs), sink, replay
    )
    recording_class = type(
        gated_class.__name__,
        (gated_class,),
        {
            "__call__": lambda self, *args, **kwargs: replaying_call(*args, **kwargs),
            "__module__": gated_class.__module__,
        },
    )
    transformer.__class__ = recording_class

    def undo_class() -> None:
        transformer.__class__ = gated_class

    return undo_class
