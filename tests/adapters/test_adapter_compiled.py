"""The gated path against mflux's *compiled* vanilla predict (FLUX.2 Klein and Z-Image).

mflux wraps their predict in ``mx.compile`` everywhere except base/Pro M1/M2 (always on Linux).
At threshold 0 the adapter calls that compiled predict itself, so gate off is bit-exact with
vanilla. Observe mode measures the signal on every step, so it runs the split-compiled path
(compiled prelude, eager decision, compiled body+tail; app/adapters/compiled.py), whose fusion
boundaries differ from mflux's single compiled predict: there the comparison is a tolerance,
measured first. The vanilla-before/after control stays bit-exact.

First use of ``mx.compile`` on CPU JIT-builds kernels with g++ (tens of seconds on a cold cache,
cached on disk afterwards); these two tests are where that cost is the point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, install_gate
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.z_image import shell as z_image_shell
from app.gate import TeaCacheGate, TeaCacheParams
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
ONE_SKIP = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0),
    rel_l1_thresh=0.5,
    max_consecutive_skips=1,
    skip_first=3,
    skip_last=4,
)
RUN = {"num_inference_steps": 8, "height": 128, "width": 128, "guidance": 4.0}

# Relative L1 of the final latents, mean|observed − vanilla| / mean|vanilla|, the observe-mode
# (split-compiled, every step computed) run against mflux's compiled vanilla.
# Basis: measured on the project's Linux x86-64 CPU box (2 cores, mlx-cpu 0.32.2 with OpenBLAS
# preloaded, mflux 0.24.0) with `uv run python -m tests.adapters.test_adapter_compiled 10`: the tiny
# float32 shells below (RUN: CFG g=4, 8 steps, 128²), seeds 0–9: observe mode was bit-identical to
# the compiled vanilla for both families (max |Δ| 0) and threshold 0 bit-exact. The gates are kept
# at what the eager gated path measured against compiled vanilla before the split (FLUX.2 4.7e-7,
# Z-Image 2.5e-6, ~4× below each gate), so a fusion change in a later MLX does not fail this test
# while a real change does: one skipped step in the same runs moves the latents by at least 3.7e-4
# (FLUX.2) and 1.3e-2 (Z-Image), over two orders of magnitude above each gate.
TOLERANCE = {"flux2": 2e-6, "z-image": 1e-5}
SMALLEST_REAL_CHANGE = {"flux2": 3.7e-4, "z-image": 1.3e-2}

BUILDERS: dict[str, Callable[[int], Any]] = {
    "flux2": lambda seed: flux2_shell("flux2-klein-base-4b", seed=seed),
    "z-image": lambda seed: z_image_shell("z-image", seed=seed),
}


def _rel_l1(a: mx.array, b: mx.array) -> float:
    ratio: float = (mx.mean(mx.abs(a - b)) / mx.mean(mx.abs(b))).tolist()  # type: ignore[assignment]
    return ratio


def _runs(family: str, seed: int) -> dict[str, Any]:
    """Vanilla (compiled), gated at threshold 0, observe mode, one forced skip, vanilla again."""
    pipeline = BUILDERS[family](seed)
    out: dict[str, Any] = {"vanilla_before": probes.generate_latents(pipeline, seed=seed, **RUN)}
    with install_gate(pipeline, TeaCacheGate(OFF)):
        out["gated"] = probes.generate_latents(pipeline, seed=seed, **RUN)
    with install_gate(pipeline, probes.recorder()):
        out["observed"] = probes.generate_latents(pipeline, seed=seed, **RUN)
    one_skip = TeaCacheGate(ONE_SKIP)
    with install_gate(pipeline, one_skip):
        out["one_skip"] = probes.generate_latents(pipeline, seed=seed, **RUN)
    out["skips"] = one_skip.skipped
    out["vanilla_after"] = probes.generate_latents(pipeline, seed=seed, **RUN)
    return out


pytestmark = pytest.mark.usefixtures("float32", "compiled")  # tests/adapters/conftest.py


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.parametrize("seed", [0, 1])
def test_gated_eager_path_within_measured_tolerance_of_compiled_vanilla(
    family: str, seed: int
) -> None:
    runs = _runs(family, seed)
    vanilla = runs["vanilla_before"]
    assert mx.array_equal(vanilla, runs["vanilla_after"]).item()
    # Threshold 0 is mflux's own compiled predict, untouched: bit-exact.
    assert mx.array_equal(runs["gated"], vanilla).item()
    assert _rel_l1(runs["observed"], vanilla) <= TOLERANCE[family]
    # The tolerance still separates: one skipped step is far outside it.
    assert runs["skips"] == 1
    assert _rel_l1(runs["one_skip"], vanilla) >= SMALLEST_REAL_CHANGE[family] / 2


if __name__ == "__main__":  # re-measure: python -m tests.adapters.test_adapter_compiled [seeds]
    import os
    import sys

    from app.blas import preload_openblas

    os.environ.setdefault("TQDM_DISABLE", "1")

    preload_openblas()
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    with common.use_precision(mx.float32):
        for family in sorted(BUILDERS):
            rows = [_runs(family, seed) for seed in seeds]
            noise = [_rel_l1(r["observed"], r["vanilla_before"]) for r in rows]
            worst = [
                float(mx.abs(r["observed"] - r["vanilla_before"]).max().tolist())  # type: ignore[arg-type]
                for r in rows
            ]
            exact = all(mx.array_equal(r["gated"], r["vanilla_before"]).item() for r in rows)
            skip = [_rel_l1(r["one_skip"], r["vanilla_before"]) for r in rows]
            print(
                f"{family}: threshold 0 bit-exact {exact}; observe rel-L1 max {max(noise):.3g} "
                f"(max |d| {max(worst):.3g}); "
                f"one skipped step rel-L1 min {min(skip):.3g}; seeds {len(rows)}"
            )
