"""Qwen-Image 2.1 adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux compiles 2.1's image forward on every machine (``mx.compile``, no M1/M2 exception); the
adapter's split-compiled path (prelude, body + tail, tail) traced bit-identical to it on these
float32 shells, so threshold 0 and observing are compared bit for bit (test_adapter_parity.py,
base and Turbo). Here: forced skips on both of mflux's paths (the text-cache path a single caption
takes, and the joint path of a padded caption or the cache switched off), true CFG's two calls on
one decision, and the compiled functions traced once per generation. The one-sync look-ahead
(app/adapters/compiled.py ``LookAhead``): every kind at threshold 0 and the observing pass bit for
bit to untouched mflux on both paths, with and without CFG; TeaCache, MagCache and the probe with
the look-ahead bit for bit with building each prelude in its step (same compiled functions, same
inputs); a look-ahead built for another timestep stops the run. Its syncs per step are counted in
tests/lab/test_step_work.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import mlx.core as mx
import pytest
from mlx import nn

from app.adapters import common, install_gate, qwen_image21, shells
from app.adapters.compiled import LookAhead
from app.adapters.qwen_image21 import shell as qwen21_shell
from app.adapters.replay import record_and_replay
from app.gate import Decision, MagCacheGate, MagCacheParams, TeaCacheGate, TeaCacheParams
from app.gate.firstblock import FirstBlockParams
from app.gate.live import FirstBlockGate, LiveGate
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
STEPS = 6
RUN = {"num_inference_steps": STEPS, "height": 128, "width": 128}
NEGATIVE = "blurry"
CFG = {**RUN, "guidance": 4.0, "negative_prompt": NEGATIVE}


# MagCache's flat table: no error accumulates, so every step after the retained ones skips, one
# at a time; the probe's forced mode: one warm-up step, then skip / compute in turn.
MAGCACHE = MagCacheParams(
    ratios=(1.0,) * STEPS, threshold=0.5, retention_ratio=0.2, max_consecutive_skips=1
)
PROBE = FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)
GATES = {
    "teacache": lambda: TeaCacheGate(ALTERNATE),
    "magcache": lambda: MagCacheGate(MAGCACHE),
    "probe": lambda: FirstBlockGate(PROBE),
}
# mflux's two paths (the text cache a single caption takes; the joint sequence of a padded
# caption or the cache switched off) and true CFG's two calls a step.
PATHS = {
    "text-cache": (RUN, True),
    "text-cache-cfg": (CFG, True),
    "joint": (RUN, False),
    "joint-cfg": (CFG, False),
}

pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return qwen21_shell("qwen-image-2.1", negative_prompt=NEGATIVE)


def _run_recorded(pipeline: Any, gate: Any, **kwargs: Any) -> tuple[Any, list[mx.array]]:
    """A gated generation with the latents entering each step and every transformer output."""
    sink: list[mx.array] = []
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        install_gate(pipeline, gate),
    ):
        undo = record_and_replay(pipeline, sink, None)
        try:
            probes.generate_latents(pipeline, **kwargs)
        finally:
            undo()
    return recorder, sink


def _tail(pipeline: Any, hidden: mx.array, timestep: mx.array, text_len: int) -> mx.array:
    """mflux's tail on ``hidden``, written out here: ``_image_forward``'s (the time row's scale
    over the image tokens), or with ``text_len`` ``_forward``'s (each token's row over the joint
    sequence, the image tokens returned)."""
    tr = pipeline.transformer
    temb = tr.time_text_embed(mx.concatenate([timestep, mx.zeros((1,), dtype=timestep.dtype)]))
    scale = tr.norm_out.linear(nn.silu(temb))
    if not text_len:
        scale = mx.broadcast_to(scale[0][None, None, :], hidden.shape)
        return tr.proj_out(tr.norm_out(hidden, scale))
    scale = qwen_image21.Qwen21Transformer._select_modulation_rows(
        scale, text_len, hidden.shape[1] - text_len
    )
    return tr.proj_out(tr.norm_out(hidden, scale))[:, text_len:]


@pytest.mark.parametrize("use_text_cache", [True, False], ids=["text-cache", "joint"])
def test_forced_skips_reuse_the_residual_on_both_of_mfluxs_paths(
    pipeline: Any, use_text_cache: bool
) -> None:
    pipeline.transformer.use_text_cache = use_text_cache
    try:
        gate = probes.RecordingGate(ALTERNATE)
        recorder, sink = _run_recorded(pipeline, gate, **RUN)
        vanilla = probes.generate_latents(pipeline, **RUN)
        trace = probes.recorder()
        with install_gate(pipeline, trace):
            observed = probes.generate_latents(pipeline, **RUN)
    finally:
        pipeline.transformer.use_text_cache = True
    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert mx.array_equal(observed, vanilla).item()  # every step computed: vanilla, bit for bit
    assert gate.signals == list(range(STEPS))
    tr = pipeline.transformer
    sigmas = recorder.config.scheduler.sigmas
    for step in (1, 3):
        body_in, residual, result = gate.reused[(step, "cond")]
        out, stored_in, stored_residual = gate.stored[(step - 1, "cond")]
        assert residual is stored_residual
        assert mx.array_equal(stored_residual, out - stored_in).item()
        # The image stream of this step's own latents (on the joint path, the residual is kept
        # over the joint sequence the tail reads: the caption's tokens, then the image's).
        text_len = body_in.shape[1] - recorder.inputs[step].shape[1]
        image_in = body_in[:, text_len:]
        assert mx.array_equal(image_in, tr.img_in(recorder.inputs[step])).item()
        assert mx.array_equal(result, body_in + residual).item()
        timestep = mx.array([sigmas[step].item()], dtype=mx.float32)
        # The compiled tail against this eager one: bit for bit on these shells (seeds 0–2,
        # both paths, measured max |Δ| 0).
        assert mx.array_equal(sink[step], _tail(pipeline, result, timestep, text_len)).item()


def test_true_cfg_pairs_two_calls_on_one_decision_with_two_residuals(pipeline: Any) -> None:
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)
    _, sink = _run_recorded(pipeline, gate, **CFG)
    assert len(sink) == 2 * STEPS  # mflux calls the transformer twice a step under true CFG
    assert gate.pattern == "FSCSCF"
    assert gate.signals == list(range(STEPS))  # the positive call decides, the negative reuses
    assert set(gate.outputs.values()) == {1}
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            assert residual is gate.stored[(step - 1, branch)][2]
            assert mx.array_equal(result, body_in + residual).item()
        cond, uncond = gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        assert not mx.array_equal(cond, uncond).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)


def test_the_compiled_parts_are_traced_once_per_generation(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    installation = install_gate(pipeline, gate)
    with installation:
        state = type(pipeline.transformer)._teacache
        probes.generate_latents(pipeline, **RUN)
        first = dict(state.traces)
        probes.generate_latents(pipeline, **RUN)
        second = dict(state.traces)
    # Not once per step; the measurement is built with each next step's prelude (look-ahead).
    assert first == {"prelude": 1, "measure": 1, "body": 1, "tail": 1}
    # Rebuilt for the next generation.
    assert second == {"prelude": 2, "measure": 2, "body": 2, "tail": 2}
    assert gate.skipped == 2


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    config = probes.LatentRecorder()
    with common.attached(pipeline, config):
        probes.generate_latents(pipeline, **RUN)  # a config and latents of mflux's own
    embeds, mask = pipeline.prompt_cache[shells.DEFAULT_PROMPT]
    args = {"t": 2, "config": config.config, "hidden_states": config.inputs[2]}
    args |= {"encoder_hidden_states": embeds, "encoder_hidden_states_mask": mask}
    with install_gate(pipeline, gate):
        gated = pipeline.transformer(**args)
    plain = pipeline.transformer(**args)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()


def _generate(
    pipeline: Any, gate: LiveGate | None, kwargs: dict[str, Any], use_text_cache: bool
) -> tuple[mx.array, dict[str, int]]:
    """The final latents of one generation (gated where ``gate``) and the traces of its compiled
    functions."""
    pipeline.transformer.use_text_cache = use_text_cache
    try:
        if gate is None:
            return probes.generate_latents(pipeline, **kwargs), {}
        with install_gate(pipeline, gate):
            latents = probes.generate_latents(pipeline, **kwargs)
            return latents, dict(type(pipeline.transformer)._teacache.traces)
    finally:
        pipeline.transformer.use_text_cache = True


def _taken_ahead(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per conditional call that reads a signal: whether its prelude and measurement were the
    ones built at the previous step's end (a guard on them is then evaluated with the step)."""
    taken: list[bool] = []
    original = LookAhead.prelude_ahead

    def spy(self: LookAhead, *args: Any) -> Any:
        before = len(self.lifecycle.guards)
        out = original(self, *args)
        taken.append(len(self.lifecycle.guards) > before)
        return out

    monkeypatch.setattr(LookAhead, "prelude_ahead", spy)
    return taken


@pytest.mark.parametrize("path", list(PATHS))
def test_threshold_zero_and_observing_stay_bit_exact_to_untouched_mflux(
    pipeline: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kind at threshold 0 is mflux's own call; the observing (vanilla) pass runs the
    compiled block-0 split with the look-ahead on every step after the first, bit for bit."""
    kwargs, text_cache = PATHS[path]
    vanilla, _ = _generate(pipeline, None, kwargs, text_cache)
    off_gates = {
        "teacache": TeaCacheGate(OFF),
        "magcache": MagCacheGate(replace(MAGCACHE, threshold=0.0)),
        "probe": FirstBlockGate(FirstBlockParams(0.0)),
    }
    for kind, gate in off_gates.items():
        latents, traces = _generate(pipeline, gate, kwargs, text_cache)
        assert mx.array_equal(latents, vanilla).item(), kind
        assert traces == {} and gate.pattern == "C" * STEPS, kind  # none of the split's parts
    taken = _taken_ahead(monkeypatch)
    observer = probes.recorder()
    observed, traces = _generate(pipeline, observer, kwargs, text_cache)
    assert taken == [False] + [True] * (STEPS - 1)  # engagement: the look-ahead ran
    assert mx.array_equal(observed, vanilla).item()
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "firstblock", "change") is not None
        for e in observer.events[1:]
    )
    assert set(traces.values()) == {1}  # once per generation


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("kind", list(GATES))
def test_the_look_ahead_is_bit_exact_with_building_each_prelude_in_its_step(
    pipeline: Any, kind: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same compiled functions on the same inputs, built at the previous step's end and
    evaluated with its latents, or built in the step (the look-ahead switched off): the same
    latents bit for bit and the same skips. MagCache decides first, from its table: it builds
    nothing ahead."""
    kwargs, text_cache = PATHS[path]
    taken = _taken_ahead(monkeypatch)
    ahead_gate = GATES[kind]()
    ahead, traces = _generate(pipeline, ahead_gate, kwargs, text_cache)
    taken_with, taken[:] = list(taken), []
    monkeypatch.setattr(LookAhead, "look_ahead", lambda self, t, latents, config: ())
    in_step_gate = GATES[kind]()
    in_step, _ = _generate(pipeline, in_step_gate, kwargs, text_cache)

    assert ahead_gate.skipped > 0  # engagement
    assert ahead_gate.pattern == in_step_gate.pattern
    assert mx.array_equal(ahead, in_step).item()
    if kind == "magcache":
        assert taken_with == taken == []
        assert "measure" not in traces
    else:
        assert taken_with == [False] + [True] * (STEPS - 1)
        assert taken == [False] * STEPS
    assert set(traces.values()) == {1}  # every compiled part traced once for the generation


def test_a_lookahead_built_for_another_timestep_stops_the_run(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next step's prelude is built from the timestep the transformer's call computes
    (``Qwen21Transformer._compute_timestep``, pinned by test_mflux_fingerprint.py); should the
    two ever differ, the guard evaluated with the step's latents stops the run."""

    def previous_timestep(config: Any, t: int) -> mx.array:
        return qwen_image21.Qwen21Transformer._compute_timestep(t - 1, config)

    monkeypatch.setattr(
        qwen_image21.Qwen21Anatomy, "next_timestep", staticmethod(previous_timestep)
    )
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate), pytest.raises(RuntimeError, match="lookahead"):
        probes.generate_latents(pipeline, **RUN)
    assert len(gate.events) == 1  # step 0 built its own prelude; step 1 found the wrong one
