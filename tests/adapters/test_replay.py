"""The record/replay seam (app/adapters/replay.py) on stand-in pipelines: installed only when
there is something to record or replay, and removed exactly."""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from app.adapters.replay import Replay, record_and_replay


class _PredictPipeline:
    """A pipeline that predicts through an instance-level ``_predict`` factory (FLUX.2, Z-Image)."""

    def __init__(self) -> None:
        self._predict = lambda transformer: lambda x: x * 2


class _Transformer:
    def __call__(self, x: mx.array) -> mx.array:
        return x + 1


class _CallPipeline:
    """A pipeline that calls its transformer directly (FLUX.1, Qwen-Image)."""

    def __init__(self) -> None:
        self.transformer = _Transformer()


def test_nothing_to_record_or_replay_installs_no_seam() -> None:
    predicting, calling = _PredictPipeline(), _CallPipeline()
    factory = predicting._predict
    for pipeline in (predicting, calling):
        undo = record_and_replay(pipeline, None, None)
        assert predicting._predict is factory
        assert type(calling.transformer) is _Transformer
        undo()
        assert predicting._predict is factory and type(calling.transformer) is _Transformer


def test_a_sink_records_every_output_and_undo_restores() -> None:
    pipeline = _CallPipeline()
    sink: list[mx.array] = []
    undo = record_and_replay(pipeline, sink, None)
    assert type(pipeline.transformer) is not _Transformer
    outputs = [pipeline.transformer(mx.array(float(i))) for i in range(3)]
    assert [o.item() for o in sink] == [o.item() for o in outputs] == [1.0, 2.0, 3.0]
    undo()
    assert type(pipeline.transformer) is _Transformer


def test_replay_returns_saved_outputs_then_calls_the_model() -> None:
    pipeline: Any = _PredictPipeline()
    saved = [mx.array(10.0), mx.array(20.0)]
    undo = record_and_replay(pipeline, None, Replay(until=1, outputs=saved, calls_per_step=1))
    predict = pipeline._predict(None)
    assert predict(mx.array(1.0)).item() == 10.0  # step 0: vanilla's saved output
    assert predict(mx.array(1.0)).item() == 2.0  # step 1: the model
    undo()
    assert pipeline._predict(None)(mx.array(3.0)).item() == 6.0
