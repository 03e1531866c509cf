"""Per-step work, counted on tiny shells (lab/bench/step_work.py): what our adapters add to a
step of mflux's own loop. Counts are deterministic, so they are asserted exactly: threshold 0 adds
no host sync and no graph node over untouched mflux (FLUX.1, Qwen-Image: the families whose
gate off / vanilla read 0.96 / 0.97 on the H200), and a skipped step of the split-compiled path
(FLUX.2) syncs exactly twice: the gate's decision and the step's latents."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest

from app.adapters.common import use_precision
from lab.bench import step_work

pytestmark = pytest.mark.usefixtures("float32")


@pytest.fixture
def float32(monkeypatch: pytest.MonkeyPatch) -> None:
    from mflux.models.common.config.model_config import ModelConfig

    monkeypatch.setattr(ModelConfig, "precision", mx.float32)


def _counted(family: str, conditions: tuple[str, ...]) -> dict[str, list[step_work.StepWork]]:
    with use_precision(mx.float32):
        pipeline, run = step_work.tiny_case(family)
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
        assert o.nodes == v.nodes > 0  # the very same graph
        assert o.conversions == 0
    # What gate off does add is Python bookkeeping, and mflux's re-evaluation of latents that
    # are already evaluated (no work, no wait).
    assert all(o.idle_evals == 1 for o in off[1:])
    assert all(o.python_calls > v.python_calls for v, o in zip(vanilla, off, strict=True))


def test_a_skipped_step_syncs_twice_and_runs_a_fraction_of_a_computed_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mflux.utils.apple_silicon import AppleSiliconUtil

    # mflux's compiled predict (M3 and later, CUDA), so the gated step is the split-compiled one.
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
    counted = _counted("flux2", ("gate_off", "forced_skips"))
    forced = counted["forced_skips"]
    assert "".join(s.decision for s in forced) == "FSCF"
    skipped = forced[1]
    computed = forced[2]
    assert skipped.syncs == computed.syncs == 2  # the rel-L1 read and the latents
    assert skipped.conversions == computed.conversions == 1
    assert all(s.syncs == 1 for s in counted["gate_off"])
    assert 0 < skipped.nodes < computed.nodes / 5
