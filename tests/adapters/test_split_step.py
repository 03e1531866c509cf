"""What each step of the split-compiled gated path runs (app/adapters/compiled.py), counted.

With ``mx.disable_compile()`` a compiled function runs its Python on every call, so the split
path's parts (``GateState.traces``, which counts traces: here every call) and the transformer's
modules count the work of every step exactly. The split path is still the one taken: the choice
follows the type of mflux's own predict, ``mx.compile``'d whatever the switch says. Parity of
the compiled path itself: test_compiled_gate_split.py and test_adapter_compiled.py; the syncs per
step: tests/lab/test_step_work.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import flux2, install_gate, z_image
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.z_image import shell as z_image_shell
from app.gate import MagCacheGate, MagCacheParams, TeaCacheGate, TeaCacheParams
from app.gate.firstblock import FirstBlockParams
from app.gate.live import FirstBlockGate
from tests.fakes import probes

pytestmark = pytest.mark.usefixtures("float32", "compiled")  # tests/adapters/conftest.py

STEPS = 8
CFG = {"num_inference_steps": STEPS, "height": 128, "width": 128, "guidance": 4.0}
TEACACHE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
# A flat table: no error accumulates, so every step after the retained ones skips, one at a time.
MAGCACHE = MagCacheParams(
    ratios=(1.0,) * STEPS, threshold=0.5, retention_ratio=0.2, max_consecutive_skips=1
)

# The probe's forced mode: one warm-up step, then skip / compute in turn, the last computed.
PROBE = FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)


@pytest.fixture
def eager_parts() -> Iterator[None]:
    mx.disable_compile()
    try:
        yield
    finally:
        mx.enable_compile()


def _count(monkeypatch: pytest.MonkeyPatch, cls: type, only: Any = None) -> Counter[str]:
    """Calls of ``cls.__call__`` (of the one instance ``only`` where given)."""
    counts: Counter[str] = Counter()
    original = cls.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        if only is None or self is only:
            counts["calls"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", counting)
    return counts


def _gated(pipeline: Any, gate: Any) -> Counter[str]:
    with install_gate(pipeline, gate):
        probes.generate_latents(pipeline, **CFG)
        return Counter(pipeline._predict.teacache_state.traces)


@pytest.mark.usefixtures("eager_parts")
def test_flux2_magcache_skips_with_the_embedding_and_the_tail_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mflux.models.flux2.model.flux2_transformer.modulation import Flux2Modulation

    pipeline = flux2_shell("flux2-klein-base-4b")
    modulation = _count(
        monkeypatch, Flux2Modulation, pipeline.transformer.double_stream_modulation_img
    )
    signals: Counter[str] = Counter()
    original_signal = flux2.Flux2Anatomy.signal

    def counting_signal(*args: Any) -> mx.array:
        signals["calls"] += 1
        return original_signal(*args)

    monkeypatch.setattr(flux2.Flux2Anatomy, "signal", counting_signal)
    gate = MagCacheGate(MAGCACHE)
    parts = _gated(pipeline, gate)
    assert gate.pattern == "FFSCSCSC" and gate.skipped == 3
    computed = STEPS - gate.skipped
    # One prelude a step (the embedding and the time embedding), then the body or the tail.
    assert parts == {"prelude": STEPS, "body": computed, "tail": gate.skipped}
    assert signals["calls"] == 0  # MagCache reads no signal: none is built
    # The image modulation only where the body runs: once per branch, as mflux's transformer
    # call builds it, never on a skipped step.
    assert modulation["calls"] == computed * 2


@pytest.mark.usefixtures("eager_parts")
def test_z_image_magcache_skips_without_layer_zero_or_the_caption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mflux.models.z_image.model.z_image_transformer.context_block import ZImageContextBlock
    from mflux.models.z_image.model.z_image_transformer.transformer_block import (
        ZImageTransformerBlock,
    )

    pipeline = z_image_shell("z-image")
    tr = pipeline.transformer
    blocks = _count(monkeypatch, ZImageTransformerBlock)
    context = _count(monkeypatch, ZImageContextBlock)
    gate = MagCacheGate(MAGCACHE)
    parts = _gated(pipeline, gate)
    assert gate.pattern == "FFSCSCSC" and gate.skipped == 3
    computed = STEPS - gate.skipped
    # The captions (16 tokens each) pad alike: one noise refiner a step serves both branches.
    assert parts == {"caption": 2, "prelude": STEPS, "body": computed, "tail": gate.skipped}
    refiners, layers = len(tr.noise_refiner), len(tr.layers)
    # Skipped steps: the noise refiner and the tail; no layer 0, no caption.
    assert blocks["calls"] == STEPS * refiners + computed * 2 * layers
    assert context["calls"] == 2 * len(tr.context_refiner)  # once per branch, per generation


@pytest.mark.usefixtures("eager_parts")
def test_flux2_probe_skips_with_block_zero_and_the_tail_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first-block probe's skipped step runs what its decision reads (the prelude with the
    conditional branch's double block 0) and the tail; no TeaCache signal, no other block."""
    pipeline = flux2_shell("flux2-klein-base-4b")
    tr = pipeline.transformer
    first = _count(monkeypatch, type(tr.transformer_blocks[0]), tr.transformer_blocks[0])
    singles = _count(monkeypatch, type(tr.single_transformer_blocks[0]))
    signals: Counter[str] = Counter()
    original_signal = flux2.Flux2Anatomy.signal

    def counting_signal(*args: Any) -> mx.array:
        signals["calls"] += 1
        return original_signal(*args)

    monkeypatch.setattr(flux2.Flux2Anatomy, "signal", counting_signal)
    gate = FirstBlockGate(PROBE)
    parts = _gated(pipeline, gate)
    assert gate.pattern == "FSCSCSCF" and gate.skipped == 3
    computed = STEPS - gate.skipped
    assert parts == {
        "prelude": STEPS,
        "measure": STEPS - 1,  # built with each later step's prelude, at the step before's end
        "body": computed,
        "tail": gate.skipped,
    }
    assert signals["calls"] == 0  # the probe reads its block, not TeaCache's signal
    # Block 0 once a step for the decision, and the unconditional branch's where the body runs.
    assert first["calls"] == STEPS + computed
    assert singles["calls"] == computed * 2 * len(tr.single_transformer_blocks)


@pytest.mark.usefixtures("eager_parts")
def test_z_image_probe_skips_with_layer_zero_and_the_tail_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mflux.models.z_image.model.z_image_transformer.transformer_block import (
        ZImageTransformerBlock,
    )

    pipeline = z_image_shell("z-image")
    tr = pipeline.transformer
    blocks = _count(monkeypatch, ZImageTransformerBlock)
    gate = FirstBlockGate(PROBE)
    parts = _gated(pipeline, gate)
    assert gate.pattern == "FSCSCSCF" and gate.skipped == 3
    computed = STEPS - gate.skipped
    assert parts == {
        "caption": 2,
        "prelude": STEPS,
        "measure": STEPS - 1,
        "body": computed,
        "tail": gate.skipped,
    }
    refiners, layers = len(tr.noise_refiner), len(tr.layers)
    # Every step: the shared noise refiner and layer 0 (the decision's); computed steps: the
    # conditional branch's layers 1.. and the unconditional branch's every layer.
    assert blocks["calls"] == STEPS * (refiners + 1) + computed * (2 * layers - 1)


@pytest.mark.usefixtures("eager_parts")
@pytest.mark.parametrize("family", ["flux2", "z-image"])
def test_teacache_builds_each_prelude_once_at_the_previous_steps_end(family: str) -> None:
    """Step 0 builds its own prelude; every later one was built at the end of the step before
    (with its measurement), never built twice."""
    pipeline = flux2_shell("flux2-klein-base-4b") if family == "flux2" else z_image_shell("z-image")
    built_at: list[int] = []
    gate = TeaCacheGate(TEACACHE)
    with install_gate(pipeline, gate):
        state = pipeline._predict.teacache_state

        class Watch:
            def call_in_loop(self, t: int, **kwargs: Any) -> None:
                built_at.append(state.traces["prelude"])

        watch = Watch()
        pipeline.callbacks.register(watch)
        try:
            probes.generate_latents(pipeline, **CFG)
        finally:
            pipeline.callbacks.in_loop.remove(watch)
        parts = Counter(state.traces)
    assert gate.pattern == "FSCSCSCF" and gate.skipped == 3
    captions = {"caption": 2} if family == "z-image" else {}
    assert parts == {
        "prelude": STEPS,
        "measure": STEPS - 1,
        "body": STEPS - gate.skipped,
        "tail": gate.skipped,
        **captions,
    }
    # Seen after each step's end: step t's end had built step t+1's prelude (none after the last).
    assert built_at == [*range(2, STEPS + 1), STEPS]


def test_z_image_compiled_caption_once_is_bit_exact_with_building_it_every_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The context refiner takes no timestep: building the captions' part once per generation
    gives the very latents that building it on every step gives (compiled, forced skips)."""
    pipeline = z_image_shell("z-image", seed=2)
    builds: Counter[str] = Counter()
    original_init = z_image._Captions.__init__

    def counting_init(self: Any, build: Any) -> None:
        def counted(latents: mx.array, feats: mx.array) -> Any:
            builds["calls"] += 1
            return build(latents, feats)

        original_init(self, counted)

    monkeypatch.setattr(z_image._Captions, "__init__", counting_init)

    def run() -> tuple[mx.array, str]:
        gate = TeaCacheGate(TEACACHE)
        with install_gate(pipeline, gate):
            latents = probes.generate_latents(pipeline, seed=2, **CFG)
        return latents, gate.pattern

    once, pattern = run()
    assert pattern == "FSCSCSCF"
    assert builds["calls"] == 2  # one per branch, for the whole generation

    def every_time(self: Any, latents: mx.array, feats: mx.array) -> Any:
        return z_image._Caption(feats, *self._build(latents, feats))

    builds.clear()
    monkeypatch.setattr(z_image._Captions, "of", every_time)
    every_step, pattern_again = run()
    assert pattern_again == pattern
    assert builds["calls"] == 2 * STEPS  # both branches' on every step
    assert mx.array_equal(once, every_step).item()


def test_a_lookahead_built_for_another_timestep_stops_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next step's prelude is built from the timestep mflux's loop will pass (pinned by
    tests/adapters/test_mflux_fingerprint.py); should the two ever differ, the guard evaluated
    with the step's latents stops the run instead of letting a wrong signal decide."""

    def previous_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.timesteps[t - 1]

    monkeypatch.setattr(flux2.Flux2Anatomy, "next_timestep", staticmethod(previous_timestep))
    pipeline = flux2_shell("flux2-klein-base-4b")
    gate = TeaCacheGate(TEACACHE)
    with install_gate(pipeline, gate), pytest.raises(RuntimeError, match="lookahead"):
        probes.generate_latents(pipeline, **CFG)
    assert len(gate.events) == 1  # step 0 built its own prelude; step 1 found the wrong one
