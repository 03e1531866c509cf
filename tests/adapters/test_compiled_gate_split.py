"""The split-compiled gated path (app/adapters/compiled.py) on tiny float32 shells.

Where mflux compiles FLUX.2's and Z-Image's predict (``is_m1_or_m2`` patched False, as on Linux
and CUDA), the gated step runs a compiled prelude, decides eagerly and runs a compiled body+tail
or tail. Its reference is our eager gated re-walk (``is_m1_or_m2`` True), with the same forced
skip pattern: compilation fuses element-wise kernels, so the comparison is a measured tolerance.

First use of ``mx.compile`` on CPU JIT-builds kernels with g++ (tens of seconds on a cold cache,
cached on disk afterwards).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate
from app.adapters.compiled import is_compiled
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.z_image import shell as z_image_shell
from app.gate import LiveGate, MagCacheGate, MagCacheParams, TeaCacheGate, TeaCacheParams
from tests.fakes import probes

# Zero coefficients predict no change: every eligible step skips up to the streak cap, a fixed
# pattern on random weights ("FSCSCSCF" over 8 steps, 3 skips).
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
PATTERN = "FSCSCSCF"
STEPS = len(PATTERN)
# MagCache's forced pattern: a flat table accumulates no error, so every step after the retained
# ones skips, one at a time (3 skips of 8, as above).
MAGCACHE = MagCacheParams(
    ratios=(1.0,) * STEPS, threshold=0.5, retention_ratio=0.2, max_consecutive_skips=1
)
MAGCACHE_PATTERN = "FFSCSCSC"
GATES: dict[str, Callable[[], LiveGate]] = {
    "teacache": lambda: TeaCacheGate(ALTERNATE),
    "magcache": lambda: MagCacheGate(MAGCACHE),
}
CFG = {"num_inference_steps": STEPS, "height": 128, "width": 128, "guidance": 4.0}
NO_CFG = {**CFG, "guidance": 1.0}

# Relative L1 of the final latents, mean|compiled − eager| / mean|eager|, both gated with the
# forced pattern above (3 skipped steps of 8; the same pattern asserted on both sides).
# Basis: measured on the project's Linux x86-64 CPU box (2 cores, mlx-cpu 0.32.2 with OpenBLAS
# preloaded, mflux 0.24.0) with `uv run python -m tests.adapters.test_compiled_gate_split 10`: tiny
# float32 shells, 128², CFG g=4 and g=1, seeds 0–9 (20 runs per family, pattern FSCSCSCF in every
# one). FLUX.2 max 4.5e-7 (max |Δ| 3.6e-6), Z-Image max 2.3e-6 (max |Δ| 1.3e-5): the size of mflux's
# own compiled-vs-eager vanilla gap in the same runs (FLUX.2 4.4e-7, Z-Image 2.5e-6). The gates sit
# ~4× above the measured noise; the skips themselves move the latents by at least 8.2e-4 (FLUX.2)
# and 2.0e-2 (Z-Image) against vanilla in the same runs, over two orders of magnitude above each
# gate. MagCache's forced pattern (FFSCSCSC, CFG g=4, seeds 0–3, measured after #30 moved the
# residual into the compiled parts): FLUX.2 max 4.6e-7, Z-Image max 2.8e-6, the same noise; its
# skips move the latents by at least 1.9e-3 and 5.5e-2.
TOLERANCE = {"flux2": 2e-6, "z-image": 1e-5}
SMALLEST_SKIP_EFFECT = {"flux2": 8e-4, "z-image": 2e-2}

# Z-Image's caption part (refiner and rotary tables), once per generation; both branches' captions
# have the shells' 16 tokens, so one trace serves both.
CAPTION_TRACES = {"flux2": {}, "z-image": {"caption": 1}}

BUILDERS: dict[str, Callable[[int], Any]] = {
    "flux2": lambda seed: flux2_shell("flux2-klein-base-4b", seed=seed),
    "z-image": lambda seed: z_image_shell("z-image", seed=seed),
}


def _rel_l1(a: mx.array, b: mx.array) -> float:
    ratio: float = (mx.mean(mx.abs(a - b)) / mx.mean(mx.abs(b))).tolist()  # type: ignore[assignment]
    return ratio


def _compiled_mflux(compiled: bool) -> None:
    AppleSiliconUtil.is_m1_or_m2 = staticmethod(lambda: not compiled)  # type: ignore[method-assign]


_DONE: dict[tuple[object, ...], dict[str, Any]] = {}


def _runs(family: str, seed: int, kwargs: dict[str, Any], gate: str = "teacache") -> dict[str, Any]:
    """Gated eager, gated compiled (twice, with trace counts), and the compiled vanilla: each
    case once per test process (a fresh shell every time, so the result does not depend on which
    test asked first); the tolerance and trace-count tests read the same generations."""
    key = (family, seed, gate, *sorted(kwargs.items()))
    if key not in _DONE:
        _DONE[key] = _generate_cases(family, seed, kwargs, gate)
    return _DONE[key]


def _generate_cases(
    family: str, seed: int, kwargs: dict[str, Any], gate_name: str
) -> dict[str, Any]:
    pipeline = BUILDERS[family](seed)
    out: dict[str, Any] = {}
    for mode in ("eager", "compiled"):
        _compiled_mflux(mode == "compiled")
        gate = GATES[gate_name]()
        with install_gate(pipeline, gate):
            out[mode] = probes.generate_latents(pipeline, seed=seed, **kwargs)
            out[f"{mode}_pattern"] = gate.pattern
            out[f"{mode}_skips"] = gate.skipped
            state = pipeline._predict.teacache_state
            out[f"{mode}_traces"] = dict(state.traces)
            out[f"{mode}_again"] = probes.generate_latents(pipeline, seed=seed, **kwargs)
            out[f"{mode}_traces_again"] = dict(state.traces)
        out[f"{mode}_vanilla"] = probes.generate_latents(pipeline, seed=seed, **kwargs)
    return out


@pytest.fixture(autouse=True)
def _float32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ModelConfig, "precision", mx.float32)
    # _runs switches the flag per mode; monkeypatch restores mflux's own afterwards.
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", AppleSiliconUtil.is_m1_or_m2)


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.parametrize("kwargs", [CFG, NO_CFG], ids=["cfg", "no-cfg"])
def test_compiled_gated_within_measured_tolerance_of_eager_gated(
    family: str, kwargs: dict[str, Any]
) -> None:
    runs = _runs(family, 0, kwargs)
    # Engagement next to the quality check: the same skips on both paths.
    assert runs["eager_pattern"] == runs["compiled_pattern"] == PATTERN
    assert runs["eager_skips"] == runs["compiled_skips"] == 3
    assert _rel_l1(runs["compiled"], runs["eager"]) <= TOLERANCE[family]
    # The tolerance still separates: the skips themselves are far outside it.
    assert _rel_l1(runs["compiled"], runs["compiled_vanilla"]) >= SMALLEST_SKIP_EFFECT[family] / 2
    # Deterministic: a second compiled generation (a fresh trace) is bit-identical.
    assert mx.array_equal(runs["compiled"], runs["compiled_again"]).item()


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_compiled_magcache_within_measured_tolerance_of_eager_magcache(family: str) -> None:
    """MagCache on the split path decides first and runs only what its decision needs (no
    signal; tests/adapters/test_split_step.py counts it): the same skips, the same tolerance."""
    runs = _runs(family, 0, CFG, "magcache")
    assert runs["eager_pattern"] == runs["compiled_pattern"] == MAGCACHE_PATTERN
    assert runs["eager_skips"] == runs["compiled_skips"] == 3
    assert _rel_l1(runs["compiled"], runs["eager"]) <= TOLERANCE[family]
    assert _rel_l1(runs["compiled"], runs["compiled_vanilla"]) >= SMALLEST_SKIP_EFFECT[family] / 2
    assert mx.array_equal(runs["compiled"], runs["compiled_again"]).item()
    # No signal, so no measurement; the prelude, body and tail once per generation.
    assert runs["compiled_traces"] == {"prelude": 1, "body": 1, "tail": 1} | CAPTION_TRACES[family]


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.parametrize("kwargs", [CFG, NO_CFG], ids=["cfg", "no-cfg"])
def test_compiled_functions_trace_once_per_generation_not_per_step(
    family: str, kwargs: dict[str, Any]
) -> None:
    runs = _runs(family, 0, kwargs)
    assert runs["compiled_skips"] == 3  # the tail ran on 3 steps, the body on 5
    once = {"prelude": 1, "measure": 1, "body": 1, "tail": 1} | CAPTION_TRACES[family]
    assert runs["compiled_traces"] == once
    # mflux builds predict once per generation, and so do we: one more trace each, not one per
    # step.
    assert runs["compiled_traces_again"] == {name: 2 * n for name, n in once.items()}
    assert runs["eager_traces"] == {}  # the eager path compiles nothing


def test_eager_mflux_predict_keeps_the_gated_path_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled or eager follows the pipeline's own predict: on base/Pro M1/M2 mflux does not
    compile, and neither does the gated path."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))
    pipeline = flux2_shell("flux2-klein-base-4b")
    assert not is_compiled(pipeline._predict(pipeline.transformer))
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate):
        probes.generate_latents(pipeline, **CFG)
        assert pipeline._predict.teacache_state.traces == {}
    assert gate.skipped == 3


def test_demo_pipeline_never_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded demo's own predict is eager on every platform (its first Generate on a CPU
    never waits for a compile); gated and at threshold 0 it stays eager."""
    from app.demo.pipeline import load_demo_pipeline

    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
    demo = load_demo_pipeline("demo")
    assert not is_compiled(demo._predict(demo.transformer))
    run = {"num_inference_steps": 6, "height": 128, "width": 128, "guidance": 3.0, "seed": 0}
    for params in (ALTERNATE, TeaCacheParams(coefficients=(0.0,) * 5, rel_l1_thresh=0.0)):
        gate = TeaCacheGate(params)
        with install_gate(demo, gate):
            demo.generate_image(prompt="a red circle on a blue background", **run)
            assert getattr(demo._predict, "teacache_state").traces == {}  # noqa: B009 (a function attribute)
        assert gate.skipped == (2 if params is ALTERNATE else 0)


if __name__ == "__main__":  # re-measure: python -m tests.adapters.test_compiled_gate_split [seeds]
    import os
    import sys

    from app.blas import preload_openblas

    os.environ.setdefault("TQDM_DISABLE", "1")
    preload_openblas()
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    with common.use_precision(mx.float32):
        for family in sorted(BUILDERS):
            rows = [_runs(family, seed, kw) for seed in seeds for kw in (CFG, NO_CFG)]
            assert all(r["compiled_pattern"] == r["eager_pattern"] == PATTERN for r in rows)
            gap = [_rel_l1(r["compiled"], r["eager"]) for r in rows]
            worst = [float(mx.abs(r["compiled"] - r["eager"]).max().tolist()) for r in rows]  # type: ignore[arg-type]
            vanilla_gap = [_rel_l1(r["compiled_vanilla"], r["eager_vanilla"]) for r in rows]
            effect = [_rel_l1(r["compiled"], r["compiled_vanilla"]) for r in rows]
            print(
                f"{family}: compiled vs eager gated rel-L1 max {max(gap):.3g} "
                f"(max |d| {max(worst):.3g}); mflux compiled vs eager vanilla max "
                f"{max(vanilla_gap):.3g}; skip effect min {min(effect):.3g}; runs {len(rows)}"
            )
            mag = [_runs(family, seed, CFG, "magcache") for seed in seeds]
            assert all(r["compiled_pattern"] == r["eager_pattern"] == MAGCACHE_PATTERN for r in mag)
            gap = [_rel_l1(r["compiled"], r["eager"]) for r in mag]
            effect = [_rel_l1(r["compiled"], r["compiled_vanilla"]) for r in mag]
            print(
                f"{family} MagCache: compiled vs eager gated rel-L1 max {max(gap):.3g}; "
                f"skip effect min {min(effect):.3g}; runs {len(mag)}"
            )
