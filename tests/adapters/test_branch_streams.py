"""Classifier-free guidance's two branches on two CPU streams (app.adapters.branch_streams).

Paired same-process oracles: a concurrent run and a serial run with the same OpenBLAS thread count
share one numerical path (a stream does not change a kernel's arithmetic), so they must agree
byte for byte, vanilla and gated alike.
"""

from __future__ import annotations

import sys
from typing import Any

import mlx.core as mx
import pytest

import app.demo.pipeline as demo_pipeline
from app.adapters import install_gate
from app.adapters.branch_streams import branch_stream, concurrent_branches
from app.blas import blas_threads, openblas_threads
from app.demo.pipeline import DemoFlux2Klein
from app.gate import TeaCacheGate
from app.variants import get_variant
from tests.fakes.params import teacache_params

PROMPT = "a large red circle at the left and a small blue star at the top on a white background"


def _openblas_threads() -> int:
    threads = openblas_threads()
    assert threads is not None  # Linux: the suite runs on OpenBLAS (app.blas)
    return threads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="OpenBLAS is the Linux BLAS")
def test_context_sets_one_blas_thread_and_two_streams_then_restores_both() -> None:
    before = _openblas_threads()
    assert isinstance(branch_stream(0), type(branch_stream(1)))
    outside = type(branch_stream(0)).__name__
    with pytest.raises(RuntimeError, match="boom"), concurrent_branches():
        assert _openblas_threads() == 1
        assert type(branch_stream(0)).__name__ != outside
        raise RuntimeError("boom")
    assert _openblas_threads() == before
    assert type(branch_stream(0)).__name__ == outside
    with blas_threads(1):
        assert _openblas_threads() == 1
    assert _openblas_threads() == before


def test_disabled_context_changes_nothing() -> None:
    outside = type(branch_stream(0)).__name__
    with concurrent_branches(enabled=False):
        assert type(branch_stream(0)).__name__ == outside


class FinalLatents:
    def __init__(self) -> None:
        self.latents: mx.array | None = None

    def call_after_loop(self, latents: mx.array, **kwargs: Any) -> None:
        mx.eval(latents)
        self.latents = latents


@pytest.fixture
def demo(demo_pipeline: DemoFlux2Klein) -> DemoFlux2Klein:
    return demo_pipeline  # loaded once per session (tests/conftest.py)


def _final_latents(
    pipe: DemoFlux2Klein, guidance: float, gate: TeaCacheGate | None = None
) -> mx.array:
    capture = FinalLatents()
    assert pipe.callbacks is not None  # set by load_demo_pipeline
    pipe.callbacks.register(capture)
    kwargs: dict[str, Any] = {
        "seed": 7,
        "prompt": PROMPT,
        "num_inference_steps": 12,
        "height": 128,
        "width": 128,
        "guidance": guidance,
    }
    try:
        if gate is None:
            pipe.generate_image(**kwargs)
        else:
            with install_gate(pipe, gate):
                pipe.generate_image(**kwargs)
    finally:
        pipe.callbacks.after_loop.remove(capture)
    assert capture.latents is not None
    return capture.latents


def test_demo_opens_the_context_only_when_there_are_two_branches(
    demo: DemoFlux2Klein, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real = demo_pipeline.concurrent_branches

    def spy(enabled: bool = True) -> Any:
        seen.append(enabled)
        return real(enabled)

    monkeypatch.setattr(demo_pipeline, "concurrent_branches", spy)
    _final_latents(demo, guidance=3.0)
    _final_latents(demo, guidance=1.0)
    monkeypatch.setattr(demo, "concurrent_cfg", False)  # the benchmark's serial A/B arm
    _final_latents(demo, guidance=3.0)
    on_cpu = mx.default_device() == mx.cpu
    assert seen == [on_cpu, False, False]


@pytest.mark.parametrize("threshold", [None, 0.1])
def test_concurrent_branches_match_serial_ones_byte_for_byte(
    demo: DemoFlux2Klein, monkeypatch: pytest.MonkeyPatch, threshold: float | None
) -> None:
    assert demo.concurrent_cfg

    def gate() -> TeaCacheGate | None:
        if threshold is None:
            return None
        return TeaCacheGate(teacache_params(get_variant("demo"), threshold=threshold))

    concurrent_gate = gate()
    concurrent = _final_latents(demo, 3.0, concurrent_gate)
    # Serial: the same one-thread GEMMs, both branches on the default stream.
    monkeypatch.setattr(demo, "concurrent_cfg", False)
    serial_gate = gate()
    with blas_threads(1):
        serial = _final_latents(demo, 3.0, serial_gate)
    if concurrent_gate is not None and serial_gate is not None:
        assert concurrent_gate.skipped > 0  # the gated comparison covers skipped steps too
        assert concurrent_gate.pattern == serial_gate.pattern
    assert mx.array_equal(concurrent, serial)
