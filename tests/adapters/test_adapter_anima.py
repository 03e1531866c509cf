"""Anima's adapter on tiny random-weight shells running mflux's real ``generate_image``.

mflux compiles Anima's predict except on base/Pro M1/M2, and its loop calls the predict factory by
the class's name (``Anima._predict(...)``): the gate routes the class's calls for its pipeline's
transformer to its own factory. Both paths are checked: on the eager one (``is_m1_or_m2`` patched
True) vanilla and the gated re-walk share one numerical path; on the compiled one the split-
compiled step traced bit-identical to mflux's one compiled predict on these float32 shells (seeds
0–1, with and without CFG: max |Δ| 0), so both compare bit for bit.

The generic tests run Anima's shell cases (``FAMILY.random_weights.cases``); the compiled probe's
measured tolerance is the generic test's body run here on Anima's shell (its tables are keyed by
family).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.anima.model.anima_transformer.anima_block import AnimaBlock
from mflux.models.anima.variants.txt2img.anima import Anima
from mflux.utils.apple_silicon import AppleSiliconUtil

import tests.adapters.test_adapter_firstblock as firstblock
from app.adapters import common, install_gate, lora, shells
from app.adapters.anima import shell as anima_shell
from app.adapters.common import ClassFactoryRouter
from app.adapters.replay import record_and_replay
from app.families import get_family
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from tests.fakes import lora as fake_lora
from tests.fakes import probes

ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
STEPS = 6
TURBO = {"num_inference_steps": STEPS, "height": 64, "width": 64, "guidance": 1.0}
CFG = {**TURBO, "guidance": 4.0}

# The compiled probe against the eager one (firstblock's recipe: forced pattern, 8 steps, 128²),
# relative L1 of the final latents. Basis: `uv run python -m tests.adapters.test_adapter_anima`
# on the project's Linux x86-64 CPU box (2 cores, mlx-cpu 0.32.2, mflux 0.24.0), seeds 0–2, CFG
# g=4 and g=1 (pattern FSCSCSCF in every run): max 3.5e-7, fusion noise as FLUX.2's (4.6e-7),
# so FLUX.2's bound (~6× above it). The skips move the latents by at least 3.6e-3 in the same
# runs.
COMPILED_PROBE_TOLERANCE = 2e-6
COMPILED_PROBE_SKIP_EFFECT = 3.5e-3
COMPILED_PROBE_TRACES = {"prelude": 1, "measure": 1, "body": 1, "tail": 1}

pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def built() -> Iterator[Callable[[str, int], Any]]:
    """Tiny shells through the registry, one per (mflux model name, seed) for the module."""
    cache: dict[tuple[str, int], Any] = {}

    def get(model_name: str, seed: int = 0) -> Any:
        if (model_name, seed) not in cache:
            with common.use_precision(mx.float32):
                cache[(model_name, seed)] = shells.random_weight_shell(
                    get_family("anima"), model_name, seed=seed
                )
        return cache[(model_name, seed)]

    yield get
    cache.clear()


@pytest.fixture
def pipeline(built: Callable[[str, int], Any]) -> Any:
    return built("anima-base", 0)


# -- the compiled probe against the eager one (the generic test's tables are keyed by family) ----


def _compiled_probe_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        firstblock.COMPILED_CASES, "anima", lambda seed: anima_shell("anima-base", seed=seed)
    )
    monkeypatch.setitem(firstblock.TOLERANCE, "anima", COMPILED_PROBE_TOLERANCE)
    monkeypatch.setitem(firstblock.SMALLEST_SKIP_EFFECT, "anima", COMPILED_PROBE_SKIP_EFFECT)
    monkeypatch.setitem(firstblock.TRACES, "anima", COMPILED_PROBE_TRACES)


@pytest.mark.parametrize("kwargs", [firstblock.CFG, firstblock.NO_CFG], ids=["cfg", "no-cfg"])
def test_the_compiled_probe_within_measured_tolerance_of_the_eager_probe(
    kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _compiled_probe_setup(monkeypatch)
    firstblock.test_the_compiled_probe_within_measured_tolerance_of_the_eager_probe(
        "anima", kwargs, monkeypatch
    )


# -- Anima's own ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["eager", "compiled"])
def test_forced_skips_reuse_each_branchs_own_residual(
    pipeline: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: path == "eager"))
    gate = probes.RecordingGate(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    pipeline.vae.before_decode = released_before_decode
    try:
        with (
            common.attached(pipeline, probes.LatentRecorder()) as recorder,
            install_gate(pipeline, gate),
        ):
            gated = probes.generate_latents(pipeline, **CFG)
    finally:
        pipeline.vae.before_decode = None
    vanilla = probes.generate_latents(pipeline, **CFG)
    with install_gate(pipeline, probes.recorder()):
        observed_run = probes.generate_latents(pipeline, **CFG)

    assert mx.array_equal(observed_run, vanilla).item()  # the split step, every step computed
    assert gate.pattern == "FSCSCF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(gated, vanilla).item()
    assert gate.signals == list(range(STEPS))
    assert set(gate.outputs.values()) == {1}
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    if path == "compiled":
        # The compiled step keeps and adds each branch's residual inside its compiled parts.
        assert set(gate.cached_branches) <= {"cond", "uncond"}
        return
    tr = pipeline.transformer
    for step in (1, 3):
        for branch in ("cond", "uncond"):
            body_in, residual, result = gate.reused[(step, branch)]
            out, stored_in, stored_residual = gate.stored[(step - 1, branch)]
            assert residual is stored_residual
            assert mx.array_equal(stored_residual, out - stored_in).item()
            # The residual is kept over the image tokens entering the blocks: this step's
            # patch embedding of its own latents.
            expected_in = tr.x_embedder(recorder.inputs[step])
            assert mx.array_equal(body_in, expected_in).item()
            assert mx.array_equal(result, body_in + residual).item()
        cond, uncond = gate.reused[(step, "cond")][1], gate.reused[(step, "uncond")][1]
        assert not mx.array_equal(cond, uncond).item()


def test_a_skipped_step_predicts_the_tail_of_input_plus_residual(
    built: Callable[[str, int], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CFG (Turbo's default): the velocity on a skipped step is ``final_layer(x + r)``
    unpatchified, in float32, computed here independently of the adapter; no block runs."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))
    pipeline = built("anima-turbo", 0)
    blocks = 0
    original = AnimaBlock.__call__

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal blocks
        blocks += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(AnimaBlock, "__call__", counting)
    gate = probes.RecordingGate(ALTERNATE)
    sink: list[mx.array] = []
    with (
        common.attached(pipeline, probes.LatentRecorder()) as recorder,
        install_gate(pipeline, gate),
    ):
        undo = record_and_replay(pipeline, sink, None)
        try:
            probes.generate_latents(pipeline, **TURBO)
        finally:
            undo()
    assert gate.pattern == "FSCSCF"
    assert {branch for (_, branch) in gate.stored} == {"cond"}  # no CFG: one residual
    tr = pipeline.transformer
    assert blocks == 4 * len(tr.blocks)  # four computed steps, one branch each
    sigmas = recorder.config.scheduler.sigmas
    for step in (1, 3):
        _, _, result = gate.reused[(step, "cond")]
        emb = tr.t_embedder[0](sigmas[step].reshape(1)).astype(result.dtype)
        adaln_lora = tr.t_embedder[1](emb)[:, None]
        emb = tr.t_embedding_norm(emb)[:, None]
        final = tr.final_layer(result, emb, adaln_lora)  # (1, h·w, p·p·C), ordered (py, px, c)
        b, c, h, w = recorder.inputs[step].shape
        p = tr.patch_size
        image = final.reshape(b, h // p, w // p, p, p, c).transpose(0, 5, 1, 3, 2, 4)
        assert mx.array_equal(sink[step], image.reshape(b, c, h, w).astype(mx.float32)).item()


def test_the_compiled_step_is_traced_once_per_generation(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(pipeline, gate):
        state = pipeline._predict.teacache_state
        probes.generate_latents(pipeline, **CFG)
        first = dict(state.traces)
        probes.generate_latents(pipeline, **CFG)
    once = {"prelude": 1, "measure": 1, "body": 1, "tail": 1}
    assert first == once
    assert dict(state.traces) == {name: 2 * count for name, count in once.items()}


def test_the_class_named_factory_is_routed_for_the_gated_pipeline_only(
    built: Callable[[str, int], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mflux's loop calls ``Anima._predict``: while a gate is installed the class's factory hands
    that pipeline's transformer to the gate and any other Anima to mflux's own; removing the last
    gate puts mflux's own attribute back (the same object)."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))
    own = vars(Anima)["_predict"]
    gated_pipeline, other = built("anima-turbo", 0), built("anima-turbo", 1)
    vanilla_other = probes.generate_latents(other, **TURBO)
    gate, second = probes.RecordingGate(ALTERNATE), probes.RecordingGate(ALTERNATE)
    with install_gate(gated_pipeline, gate):
        assert isinstance(Anima._predict, ClassFactoryRouter)
        assert probes.generate_latents(other, **TURBO) is not None
        assert gate.events == []  # the other pipeline ran mflux's own predict, ungated
        assert mx.array_equal(other.vae.last, vanilla_other).item()
        with install_gate(other, second):  # two gated pipelines of the class at once
            probes.generate_latents(other, **TURBO)
            probes.generate_latents(gated_pipeline, **TURBO)
        assert second.pattern == gate.pattern == "FSCSCF"
        assert isinstance(Anima._predict, ClassFactoryRouter)  # the first still routed
    assert vars(Anima)["_predict"] is own


def test_calls_outside_a_generation_are_not_gated(pipeline: Any) -> None:
    gate = TeaCacheGate(ALTERNATE)
    context = pipeline._encode_prompt(shells.DEFAULT_PROMPT)
    latents = mx.random.normal((1, 16, 8, 8), key=mx.random.key(3))
    sigma = mx.array([0.6])
    with install_gate(pipeline, gate):
        gated = Anima._predict(pipeline.transformer, context, None, 1.0)(latents, sigma)
    plain = Anima._predict(pipeline.transformer, context, None, 1.0)(latents, sigma)
    assert gate.events == [] and gate.cached_branches == ()
    assert mx.array_equal(gated, plain).item()


# -- LoRA: mflux's mapping, under the prefixes it accepts, the LLM adapter included -------------

LORA_TARGETS = {
    "blocks.0.self_attn.q_proj": "blocks.0.self_attn.q_proj",
    "diffusion_model.blocks.1.mlp.layer1": "blocks.1.mlp.layer1",
    "net.llm_adapter.blocks.0.cross_attn.v_proj": "llm_adapter.blocks.0.cross_attn.v_proj",
}


@pytest.mark.usefixtures("eager")
def test_a_lora_lands_where_mflux_maps_it_and_changes_the_output(tmp_path: Path) -> None:
    """Oracles as tests/adapters/test_lora.py: the baked weight is the base plus scale × B·A to
    float32 rounding of one addition (measured 6e-8 on these shells; bound 1e-6), and the LoRA
    moves the latents (measured max |Δ| 0.34 at scale 0.7 over 4 steps with CFG; a build without
    it differs by exactly 0)."""
    run = {"num_inference_steps": 4, "height": 64, "width": 64, "guidance": 4.0}
    with common.use_precision(mx.float32):
        plain = probes.generate_latents(anima_shell("anima-base"), **run)
        patched = anima_shell("anima-base")
        before = {
            path: mx.array(fake_lora.module_at(patched.transformer, path).weight)
            for path in LORA_TARGETS.values()
        }
        file = tmp_path / "style.safetensors"
        updates = fake_lora.write_lora(file, patched.transformer, LORA_TARGETS)
        lora.apply_loras(patched, [str(file)], [0.7])
        for path, update in updates.items():
            weight = fake_lora.module_at(patched.transformer, path).weight
            assert float(mx.max(mx.abs(weight - (before[path] + 0.7 * update)))) <= 1e-6
        styled = probes.generate_latents(patched, **run)
    assert float(mx.max(mx.abs(styled - plain))) >= 0.007  # tests/adapters/test_lora.py's floor


if __name__ == "__main__":  # re-measure: python -m tests.adapters.test_adapter_anima
    import os

    from app.blas import preload_openblas

    os.environ.setdefault("TQDM_DISABLE", "1")
    preload_openblas()
    with common.use_precision(mx.float32):
        firstblock.COMPILED_CASES["anima"] = lambda seed: anima_shell("anima-base", seed=seed)
        rows = [
            firstblock._compiled_runs("anima", s, k)
            for s in range(3)
            for k in (firstblock.CFG, firstblock.NO_CFG)
        ]
        noise = [firstblock._rel_l1(r["compiled"], r["eager"]) for r in rows]
        effect = [firstblock._rel_l1(r["compiled"], r["compiled_vanilla"]) for r in rows]
        print(
            f"anima: compiled vs eager probe rel-L1 max {max(noise):.3g}; skips' effect min "
            f"{min(effect):.3g}; traces {rows[0]['compiled_traces']}; runs {len(rows)}"
        )
