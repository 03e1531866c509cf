"""The first-block probe on every family's anatomy (the one gated step, app/adapters/step.py,
split after the first block), on tiny float32 random-weight shells running mflux's real
``generate_image``.

Oracles: at threshold 0 the probe is mflux's own forward (bit-exact against the vanilla pass, which
is bit-exact against untouched mflux: test_adapter_parity.py); the vanilla pass records the first
block's change against each previous step; a forced pattern skips exactly where the guards allow,
runs the rest of the stack on computed steps only, and each skip reuses the residual the last
computed step stored; before the first skip the probe measures exactly what the vanilla pass
recorded. The compiled split (FLUX.2, Z-Image, Krea 2) against the eager one: a measured
tolerance. Qwen-Image 2.1 is compiled in every case (mflux never runs its forward eagerly).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.krea2 import shell as krea2_shell
from app.adapters.shells import case_shell
from app.adapters.step import GatedStep
from app.adapters.z_image import shell as z_image_shell
from app.families import Family, ShellCase, ShellTest, shell_cases
from app.gate import Decision, TeaCacheParams
from app.gate.firstblock import TRACE_DEPTH, FirstBlockParams
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
# Timing-style forced pattern: one warm-up step, then skip / compute in turn, the last computed.
FORCED = FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)


def forced_pattern(steps: int) -> str:
    return "F" + ("SC" * steps)[: steps - 2] + "F"


# Every family's probe cases (``ShellCase``, ``ShellTest.probe``), with CFG where the family has
# it (the unconditional branch reads the conditional branch's verdict) and without. The remaining
# blocks are the one gated step's for every family (app/adapters/step.py): the conditional
# branch's body, from the decision's split (the spy wraps each generation's, compiled or not:
# Qwen-Image 2.1 is always compiled, mflux having no eager 2.1 forward).
CASES = shell_cases(ShellTest.probe)
REST = (GatedStep, "cond_body")


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Family, ShellCase], Any]]:
    built: dict[tuple[str, str, int, str | None], Any] = {}

    def get(family: Family, case: ShellCase) -> Any:
        key = (family.id, case.model_name, case.seed, case.negative_prompt)
        if key not in built:
            with common.use_precision(mx.float32):
                built[key] = case_shell(family, case)
        return built[key]

    yield get
    built.clear()


@pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py
@pytest.mark.parametrize(("family", "case"), CASES, ids=[case.name for _, case in CASES])
def test_the_probe_on_every_family(
    shell: Callable[[Family, ShellCase], Any],
    family: Family,
    case: ShellCase,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = shell(family, case)
    for name, value in case.transformer_attrs:
        monkeypatch.setattr(pipeline.transformer, name, value)
    steps = case.steps
    observer = probes.recorder()
    with install_gate(pipeline, observer):
        observed = probes.generate_latents(pipeline, **case.generate_kwargs())
    off = probes.RecordingProbe(FirstBlockParams(0.0))
    with install_gate(pipeline, off):
        zero = probes.generate_latents(pipeline, **case.generate_kwargs())

    rest_calls: list[int] = []
    owner, name = REST
    original_init = owner.__init__
    probe = probes.RecordingProbe(FORCED)

    def spying_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        body = getattr(self, name)

        def spy(pre: Any, *rest: Any) -> Any:
            if "state" in pre:  # the conditional branch, continuing from the decision's split
                rest_calls.append(probe.step_index)
            return body(pre, *rest)

        setattr(self, name, spy)

    monkeypatch.setattr(owner, "__init__", spying_init)
    with install_gate(pipeline, probe):
        forced = probes.generate_latents(pipeline, **case.generate_kwargs())

    # Threshold 0: mflux's own forward, no signal, nothing stored (the vanilla pass is mflux's
    # own, bit for bit: test_adapter_parity.py).
    assert mx.array_equal(zero, observed).item()
    assert off.pattern == "C" * steps and off.signals == {} and off.stored == {}
    # The vanilla pass recorded the first block's change against each previous step.
    assert probes.figure(observer.events[0], "firstblock", "changes") is None
    for index, event in enumerate(observer.events[1:], start=1):
        changes = probes.figure(event, "firstblock", "changes")
        assert changes is not None and len(changes) == min(index, TRACE_DEPTH)
        assert all(math.isfinite(c) and c > 0 for c in changes)
        assert probes.figure(event, "firstblock", "change") == changes[0]

    # Forced: skips where the guards allow (engagement), the rest of the stack on computed steps
    # only, and the skips move the latents.
    assert probe.pattern == forced_pattern(steps) and probe.skipped > 0
    computed = [e.index for e in probe.events if e.decision.computes]
    assert rest_calls == computed
    assert not mx.array_equal(forced, observed).item()
    # A skip adds the residual the last computed step stored (per branch) to this step's first
    # block output, the signal's base.
    branches = {branch for _, branch in probe.stored}
    assert common.COND in branches and (common.UNCOND in branches) is case.cfg
    for event in probe.events:
        if event.decision is not Decision.skipped:
            continue
        for branch in branches:
            previous = max(i for i, b in probe.stored if b == branch and i < event.index)
            _, stored_base, residual = probe.stored[(previous, branch)]
            base, reused, result = probe.reused[(event.index, branch)]
            assert reused is residual
            assert base.shape == stored_base.shape
            assert mx.array_equal(result, base + residual).item()
    # Every step handed the gate its first block's residual; before the first skip the probe's
    # trajectory is vanilla's, so it measured exactly the change the vanilla pass recorded.
    assert sorted(probe.signals) == list(range(steps))
    first_skip = probe.pattern.index("S")
    assert probes.figure(probe.events[first_skip], "firstblock", "change") == probes.figure(
        observer.events[first_skip], "firstblock", "change"
    )


# -- the compiled split (FLUX.2, Z-Image, Krea 2) --------------------------------------------------

COMPILED_CASES = {
    "flux2": lambda seed: flux2_shell("flux2-klein-base-4b", seed=seed),
    "z-image": lambda seed: z_image_shell("z-image", seed=seed),
    "krea-2": lambda seed: krea2_shell("krea-2", seed=seed),
}
STEPS = 8
CFG = {"num_inference_steps": STEPS, "height": 128, "width": 128, "guidance": 4.0}
NO_CFG = {**CFG, "guidance": 1.0}
# Relative L1 of the final latents, mean|compiled − eager| / mean|eager|, both probed with the
# forced pattern (3 skipped of 8 on both sides). Basis: measured on the project's Linux x86-64 CPU
# box (2 cores, mlx-cpu with OpenBLAS preloaded, mflux 0.24.0) with
# `uv run python -m tests.adapters.test_adapter_firstblock 3`: seeds 0–2, CFG g=4 and g=1 (6 runs
# per family, pattern FSCSCSCF in every one): FLUX.2 max 4.6e-7, Z-Image max 2.3e-6, Krea 2 max
# 3.9e-7, the same fusion noise as TeaCache's split (test_compiled_gate_split.py), so the same
# gates (~4× above it; Krea 2's as FLUX.2's). The skips themselves move the latents by at least
# 6.8e-4 (FLUX.2), 1.85e-2 (Z-Image) and 5.4e-4 (Krea 2) against vanilla in the same runs.
# Qwen-Image 2.1 has no eager forward in mflux: test_the_probe_on_every_family runs its
# compiled split.
TOLERANCE = {"flux2": 2e-6, "z-image": 1e-5, "krea-2": 2e-6}
SMALLEST_SKIP_EFFECT = {"flux2": 6.8e-4, "z-image": 1.85e-2, "krea-2": 5.4e-4}
TRACES = {
    "flux2": {"prelude": 1, "body": 1, "tail": 1, "measure": 1},
    "z-image": {"caption": 1, "prelude": 1, "body": 1, "tail": 1, "measure": 1},
    "krea-2": {"caption": 1, "prelude": 1, "measure": 1, "body": 1, "tail": 1},
}


def _rel_l1(a: mx.array, b: mx.array) -> float:
    ratio: float = (mx.mean(mx.abs(a - b)) / mx.mean(mx.abs(b))).tolist()  # type: ignore[assignment]
    return ratio


def _compiled_runs(family: str, seed: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    pipeline = COMPILED_CASES[family](seed)
    out: dict[str, Any] = {}
    for mode in ("eager", "compiled"):
        eager = mode == "eager"
        AppleSiliconUtil.is_m1_or_m2 = staticmethod(lambda eager=eager: eager)  # type: ignore[method-assign]
        gate = probes.RecordingProbe(FORCED)
        with install_gate(pipeline, gate):
            out[mode] = probes.generate_latents(pipeline, seed=seed, **kwargs)
            out[f"{mode}_pattern"] = gate.pattern
            out[f"{mode}_traces"] = dict(pipeline._predict.teacache_state.traces)
        with install_gate(pipeline, probes.RecordingProbe(FirstBlockParams(0.0))):
            out[f"{mode}_zero"] = probes.generate_latents(pipeline, seed=seed, **kwargs)
        out[f"{mode}_vanilla"] = probes.generate_latents(pipeline, seed=seed, **kwargs)
    return out


@pytest.mark.parametrize("family", sorted(COMPILED_CASES))
@pytest.mark.parametrize("kwargs", [CFG, NO_CFG], ids=["cfg", "no-cfg"])
def test_the_compiled_probe_within_measured_tolerance_of_the_eager_probe(
    family: str, kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ModelConfig, "precision", mx.float32)
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", AppleSiliconUtil.is_m1_or_m2)
    runs = _compiled_runs(family, 0, kwargs)
    assert runs["eager_pattern"] == runs["compiled_pattern"] == forced_pattern(STEPS)
    assert _rel_l1(runs["compiled"], runs["eager"]) <= TOLERANCE[family]
    assert _rel_l1(runs["compiled"], runs["compiled_vanilla"]) >= SMALLEST_SKIP_EFFECT[family] / 2
    # Threshold 0 is mflux's own compiled predict, untouched.
    assert mx.array_equal(runs["compiled_zero"], runs["compiled_vanilla"]).item()
    # Each compiled function traced once for the generation, never per step.
    assert runs["compiled_traces"] == TRACES[family]
    assert runs["eager_traces"] == {}


if __name__ == "__main__":  # re-measure: python -m tests.adapters.test_adapter_firstblock [seeds]
    import os
    import sys

    from app.blas import preload_openblas

    os.environ.setdefault("TQDM_DISABLE", "1")
    preload_openblas()
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    with common.use_precision(mx.float32):
        for family in sorted(COMPILED_CASES):
            rows = [_compiled_runs(family, s, k) for s in seeds for k in (CFG, NO_CFG)]
            noise = [_rel_l1(r["compiled"], r["eager"]) for r in rows]
            effect = [_rel_l1(r["compiled"], r["compiled_vanilla"]) for r in rows]
            patterns = {r["compiled_pattern"] for r in rows} | {r["eager_pattern"] for r in rows}
            print(
                f"{family}: compiled vs eager probe rel-L1 max {max(noise):.3g}; skips' effect "
                f"min {min(effect):.3g}; patterns {sorted(patterns)}; runs {len(rows)}"
            )
