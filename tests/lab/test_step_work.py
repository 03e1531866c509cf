"""Per-step work, counted on tiny shells (lab/bench/step_work.py): what our adapters add to a
step of mflux's own loop. Counts are deterministic, so they are asserted exactly: threshold 0 adds
no host sync and no graph node over untouched mflux (FLUX.1, Qwen-Image: the families whose
gate off / vanilla read 0.96 / 0.97 on the H200), and every step of the split-compiled path
(FLUX.2, Z-Image; TeaCache, MagCache and the first-block probe) syncs once, the step's latents:
the gate's decision reads a measurement evaluated with the previous step's latents (#30; it
synced twice before)."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest

from app.adapters.common import use_precision
from app.adapters.qwen_image21 import shell as qwen21_shell
from app.families.qwen_image21 import QWEN21_TINY
from lab.bench import step_work

# Research counts of an adapter's per-step work (lab/bench/step_work.py): run by the lab_slow step
pytestmark = [pytest.mark.usefixtures("float32"), pytest.mark.lab_slow]


@pytest.fixture
def float32(monkeypatch: pytest.MonkeyPatch) -> None:
    from mflux.models.common.config.model_config import ModelConfig

    monkeypatch.setattr(ModelConfig, "precision", mx.float32)


def _counted(
    family: str, conditions: tuple[str, ...], case: tuple[Any, dict[str, Any]] | None = None
) -> dict[str, list[step_work.StepWork]]:
    with use_precision(mx.float32):
        pipeline, run = case or step_work.tiny_case(family)
        makers = step_work.conditions()
        out: dict[str, Any] = {}
        for name in conditions:
            step_work.count_steps(pipeline, run, makers[name]())  # first calls, traces
            out[name] = step_work.count_steps(pipeline, run, makers[name]())
        return out


@pytest.mark.parametrize("family", ["flux1", "qwen-image"])
def test_gate_off_adds_no_sync_and_no_graph_node_per_step(family: str) -> None:
    counted = _counted(family, ("vanilla", "gate_off"))
    vanilla, off = counted["vanilla"], counted["gate_off"]
    assert len(vanilla) == len(off) == 4
    assert all(s.evals == 1 for s in vanilla)  # mflux's own latents evaluation per step
    for v, o in zip(vanilla, off, strict=True):
        assert o.syncs == v.syncs  # our lifecycle's eval replaces mflux's, it does not add one
        # no node added: the same graph, less the schedule's lazily built sigmas where the
        # loop rebuilds them each step (FLUX.1: 28 nodes), which the gate reads once before
        # the loop for the fill's step positions (app.adapters.base.schedule_positions)
        assert 0 < o.nodes <= v.nodes
        assert o.conversions == 0
    # What gate off does add is Python bookkeeping, and mflux's re-evaluation of latents that
    # are already evaluated (no work, no wait).
    assert all(o.idle_evals == 1 for o in off[1:])
    assert all(o.python_calls > v.python_calls for v, o in zip(vanilla, off, strict=True))


@pytest.mark.parametrize("family", ["flux2", "z-image"])
def test_a_split_compiled_step_adds_no_sync_to_mfluxs_one_latents_eval(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's decision reads a measurement evaluated with the previous step's latents: a
    skipped step, a computed one and the first alike sync once, the latents' own evaluation
    (mflux's eval after it finds them evaluated: no wait). A skipped step runs a fraction of a
    computed step's graph, and a gate that reads no signal (MagCache) less still."""
    from mflux.utils.apple_silicon import AppleSiliconUtil

    # mflux's compiled predict (M3 and later, CUDA), so the gated step is the split-compiled one.
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
    counted = _counted(family, ("vanilla", "forced_skips", "magcache_forced", "probe_forced"))
    forced, magcache = counted["forced_skips"], counted["magcache_forced"]
    probe = counted["probe_forced"]
    assert "".join(s.decision for s in forced) == "FSCF"
    assert "".join(s.decision for s in magcache) == "FSCS"
    assert "".join(s.decision for s in probe) == "FSCF"
    for run in (forced, magcache, probe):
        assert all(s.syncs == s.evals == 1 and s.conversions == 0 for s in run)
        assert all(s.idle_evals == 1 for s in run[1:])  # mflux's own eval: nothing left to run
    assert all(s.syncs == 1 for s in counted["vanilla"])
    skipped, computed = forced[1], forced[2]
    assert 0 < skipped.nodes < computed.nodes / 2
    # MagCache decides from its table: a skipped step builds no signal and no next prelude.
    assert 0 < magcache[1].nodes < skipped.nodes
    assert magcache[3].nodes == magcache[1].nodes
    # The first-block probe's skipped step: its prelude with the first block (what it decides
    # on, built at the step before's end) and the tail, less than its computed step; what it runs
    # beyond TeaCache's skipped step (the caption's context and the first block: one of the tiny
    # shell's four blocks) is under half a computed step. (The one gated step passes the
    # context from the prelude to the body instead of building it again, so its computed step
    # holds fewer nodes than the split it replaced: 551 against more than 584 here.)
    assert 0 < probe[1].nodes < probe[2].nodes
    assert 0 < probe[1].nodes - skipped.nodes < probe[2].nodes / 2


@pytest.mark.parametrize("path", ["text-cache", "joint", "text-cache-cfg"])
def test_a_qwen21_gated_step_adds_no_sync_to_mfluxs_one_latents_eval(path: str) -> None:
    """Qwen-Image 2.1's split (the gate inside the swapped transformer's call, mflux compiling
    its forward on every machine), on both of mflux's paths and under true CFG: the decision reads
    a measurement evaluated with the previous step's latents, so every step after the first syncs
    once, as untouched mflux's do (step 0 adds mflux's own text-cache evaluation, in every
    condition alike). Before the look-ahead, each step with something to compare synced twice."""

    negative = "blurry" if path.endswith("cfg") else None
    with use_precision(mx.float32):
        pipeline = qwen21_shell("qwen-image-2.1", dims=QWEN21_TINY, negative_prompt=negative)
    pipeline.transformer.use_text_cache = path != "joint"
    run: dict[str, Any] = {"num_inference_steps": 4, "height": 64, "width": 64}
    if negative is not None:
        run |= {"guidance": 4.0, "negative_prompt": negative}
    conditions = ("vanilla", "forced_skips", "magcache_forced", "probe_forced")
    counted = _counted("qwen-image-2.1", conditions, (pipeline, run))
    vanilla = counted["vanilla"]
    forced, magcache = counted["forced_skips"], counted["magcache_forced"]
    probe = counted["probe_forced"]
    assert "".join(s.decision for s in forced) == "FSCF"
    assert "".join(s.decision for s in magcache) == "FSCS"
    assert "".join(s.decision for s in probe) == "FSCF"
    assert all(s.syncs == s.evals == 1 for s in vanilla[1:])
    for run_steps in (forced, magcache, probe):
        assert run_steps[0].syncs == vanilla[0].syncs  # mflux's own first-step evaluations
        assert all(s.conversions == 0 for s in run_steps)  # no decision waits
        assert all(s.syncs == s.evals == 1 for s in run_steps[1:])
        assert all(s.idle_evals == 1 for s in run_steps[1:])  # mflux's own eval: nothing left
    # A skipped step runs a fraction of a computed step's graph.
    assert 0 < forced[1].nodes < forced[2].nodes / 2
    assert 0 < probe[1].nodes < probe[2].nodes
    assert 0 < magcache[1].nodes < magcache[2].nodes / 2


def test_a_read_of_a_measurement_not_yet_evaluated_is_counted_as_a_sync() -> None:
    """The counter's own check: ``read_ratio`` of a measurement not yet evaluated waits (one
    conversion), of one evaluated already (as the split-compiled adapters hand it) does not."""
    import sys

    from app.gate.live import read_ratio, rel_l1_pair

    probe = step_work._Probe()
    probe.in_loop = True
    pending = rel_l1_pair(mx.ones((4,)), mx.full((4,), 2.0))
    ready = rel_l1_pair(mx.ones((4,)), mx.full((4,), 4.0))
    mx.eval(ready)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            probe.on_call(frame)

    sys.setprofile(profile)
    try:
        values = [read_ratio(pending), read_ratio(ready)]
    finally:
        sys.setprofile(None)
    assert probe.bucket.conversions == 1
    assert values == [pytest.approx(0.5), pytest.approx(0.75)]
