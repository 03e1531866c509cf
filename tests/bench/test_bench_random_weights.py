"""``--random-weights`` for every family: real dimensions on paper, tiny ones built here.

Real-size weights are never built on this 24 GB machine: the full dimensions are checked against
mflux's own constructors and configs, and the memory rule (no float32 copy of the weights, one
matrix at a time) is checked on a model small enough to build.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from app.adapters.qwen_image import shell as qwen_shell
from app.bench.worker import WorkerSpec, _random_weight_pipeline, warm_loop_estimate
from app.engine.request import GenerationRequest, LoraSpec
from app.families.flux1 import FLUX1_DEV, FLUX1_TINY
from app.families.flux2 import FLUX2_KLEIN_4B
from app.families.flux3 import FLUX3_FULL, FLUX3_TINY
from app.families.krea2 import KREA2_FULL, KREA2_TINY
from app.families.qwen_image import QWEN_FULL, QWEN_TINY, QwenDims
from app.families.qwen_image21 import QWEN21_FULL, QWEN21_TINY
from app.variants import get_variant


def test_full_dimensions_are_mflux_own() -> None:
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.qwen.model.qwen_transformer.qwen_transformer import QwenTransformer

    parameters = inspect.signature(QwenTransformer.__init__).parameters
    defaults = {name: p.default for name, p in parameters.items()}
    assert QWEN_FULL.kwargs() == {
        "num_layers": defaults["num_layers"],  # 60
        "num_attention_heads": defaults["num_attention_heads"],  # 24
        "attention_head_dim": defaults["attention_head_dim"],  # 128
        "joint_attention_dim": defaults["joint_attention_dim"],  # 3584
    }
    # FLUX.1 dev's block counts come from its weights (19 joint + 38 single, mflux-internals
    # §1.1); the width is hard-coded 3072 in mflux.
    assert (FLUX1_DEV.joint_blocks, FLUX1_DEV.single_blocks) == (19, 38)
    flux2 = FLUX2_KLEIN_4B.kwargs()
    for key, value in ModelConfig.flux2_klein_4b().transformer_overrides.items():
        assert flux2[key] == value, key


def test_bfloat16_build_never_holds_a_float32_copy() -> None:
    """Peak memory while building stays near the bf16 weights: a float32 copy of them all would
    add twice their size. (At real size: FLUX.1 dev 24 GB, Qwen-Image 41 GB on a 141 GB H200.)"""
    mx.synchronize()
    mx.reset_peak_memory()
    baseline = mx.get_active_memory()
    pipeline = qwen_shell("qwen-image", dims=QwenDims(4, 8, 1024), dtype=mx.bfloat16)
    weights: dict[str, mx.array] = dict(tree_flatten(pipeline.transformer.parameters()))
    assert {v.dtype for v in weights.values()} == {mx.bfloat16}
    size = sum(v.nbytes for v in weights.values())
    assert size > 150e6  # large enough that a float32 copy would show
    peak = mx.get_peak_memory() - baseline
    # Measured: 1.25× the bf16 size (the shared 32 MB random pool and one matrix's temporaries).
    assert peak < 1.5 * size, (peak / 1e6, size / 1e6)


def _spec(variant: str) -> WorkerSpec:
    request = GenerationRequest(
        variant_id=variant,
        prompt="a red circle on a blue background",
        seed=0,
        steps=4,
        threshold=0.5,
        width=64,
        height=64,
    )
    return WorkerSpec(request, "gated", random_weights="tiny", dtype="float32")


def test_worker_builds_tiny_flux1_and_qwen_shells() -> None:
    from mflux.models.flux.variants.txt2img.flux import Flux1
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage

    qwen = _random_weight_pipeline(_spec("qwen-image"), get_variant("qwen-image"))
    assert isinstance(qwen, QwenImage)
    assert len(qwen.transformer.transformer_blocks) == QWEN_TINY.num_layers
    flux1 = _random_weight_pipeline(_spec("flux1-dev"), get_variant("flux1-dev"))
    assert isinstance(flux1, Flux1)
    assert len(flux1.transformer.transformer_blocks) == FLUX1_TINY.joint_blocks
    assert len(flux1.transformer.single_transformer_blocks) == FLUX1_TINY.single_blocks
    assert flux1.model_config is not None
    assert flux1.model_config.model_name.endswith("FLUX.1-dev")


def test_warm_loop_estimate_uses_the_timed_runs_step_costs() -> None:
    timed = {
        "loop_seconds": 1.0,
        "loop_steps": 6,
        "pattern": "FSCSCF",
        "step_seconds": [0.3, 0.01, 0.2, 0.01, 0.2, 0.2],
    }
    # Warm-up pattern FSCF: three computed steps at the median 0.2 s, one skipped at 0.01 s.
    assert abs(warm_loop_estimate(timed, "FSCF") - 0.61) < 1e-9
    vanilla = {**timed, "step_seconds": None, "pattern": "CCCCCC"}
    assert abs(warm_loop_estimate(vanilla, "CCCC") - 4 / 6) < 1e-9


def test_a_workers_lora_survives_the_process_boundary_and_is_baked_into_the_shell(
    tmp_path: Path,
) -> None:
    """``bench``/``sweep --lora`` on random weights: the spec carries the LoRA as JSON, and the
    worker applies it with mflux's loader (to float32 rounding of one addition; bound 1e-6)."""
    from dataclasses import replace

    from app.bench.worker import load_pipeline
    from tests.fakes import lora as fake_lora

    plain = replace(_spec("flux2-klein-base-4b"), dtype="float32")
    base = _random_weight_pipeline(plain, get_variant("flux2-klein-base-4b"))
    path = tmp_path / "style.safetensors"
    targets = fake_lora.lora_targets(get_variant("flux2-klein-base-4b").family, base.transformer)
    updates = fake_lora.write_lora(path, base.transformer, targets)
    with_lora = replace(plain.request, loras=(LoraSpec(str(path), 0.5),))
    spec = WorkerSpec.from_json(replace(plain, request=with_lora).to_json())
    assert spec.request.loras == (LoraSpec(str(path), 0.5),)
    patched = load_pipeline(spec)
    for module_path, update in updates.items():
        before = fake_lora.module_at(base.transformer, module_path).weight
        after = fake_lora.module_at(patched.transformer, module_path).weight
        assert float(mx.max(mx.abs(after - before - 0.5 * update))) <= 1e-6, module_path


def _parameters(module: object) -> int:
    """Parameters of a module built at its real size: mflux's modules draw their initial weights
    lazily, so counting their sizes allocates nothing."""
    return sum(v.size for _, v in tree_flatten(module.parameters()))  # type: ignore[attr-defined]


def test_this_years_full_dimensions_and_parameters_are_mflux_own() -> None:
    """FLUX.3, Qwen-Image 2.1 and Krea 2 at real size are their transformers' mflux defaults (no
    config overrides them but FLUX.3 base's ``flow_map``), and each variant's parameter count
    (the memory estimate's) is transformer + text encoder + VAE as mflux builds them."""
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.flux2.model.flux2_text_encoder.qwen3_text_encoder import Qwen3TextEncoder
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.flux3.model.flux3_transformer.flux3_transformer import Flux3Transformer
    from mflux.models.krea2.model.krea2_text_encoder.text_encoder import Krea2TextEncoder
    from mflux.models.krea2.model.krea2_transformer.transformer import Krea2Transformer
    from mflux.models.qwen.model.qwen_vae.qwen_vae import QwenVAE
    from mflux.models.qwen21.model.qwen21_text_encoder.qwen21_text_encoder import (
        Qwen21TextEncoder,
    )
    from mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer import Qwen21Transformer
    from mflux.models.qwen21.model.qwen21_vae.qwen21_vae import Qwen21VAE

    for cls, full in (
        (Flux3Transformer, FLUX3_FULL),
        (Qwen21Transformer, QWEN21_FULL),
        (Krea2Transformer, KREA2_FULL),
    ):
        defaults = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()}
        assert all(defaults[k] == v for k, v in full.kwargs().items()), cls.__name__
    assert ModelConfig.flux3_image_klein_base().transformer_overrides == {"flow_map": False}
    for name in ("flux3-image-klein", "qwen-image-2.1", "qwen-image-2.1-turbo", "krea-2"):
        assert ModelConfig.from_name(model_name=name).transformer_overrides == {}, name

    klein = ModelConfig.flux3_image_klein()
    text = _parameters(Qwen3TextEncoder(**klein.text_encoder_overrides))
    flux3_vae = _parameters(Flux2VAE())
    counted = {
        "flux3-image-klein": _parameters(Flux3Transformer()) + text + flux3_vae,
        "flux3-image-klein-base": _parameters(Flux3Transformer(flow_map=False)) + text + flux3_vae,
        "qwen-image-2.1": _parameters(Qwen21Transformer())
        + _parameters(Qwen21TextEncoder())
        + _parameters(Qwen21VAE()),
        "krea-2": _parameters(Krea2Transformer())
        + _parameters(Krea2TextEncoder())
        + _parameters(QwenVAE()),
    }
    for variant_id, parameters in counted.items():  # the table's figures, to 0.01B
        assert abs(get_variant(variant_id).params_billion - parameters / 1e9) < 0.005, variant_id
    assert get_variant("qwen-image-2.1").unquantized_billion == round(
        _parameters(Qwen21TextEncoder()) / 1e9, 2
    )
    assert get_variant("krea-2").unquantized_billion == round(
        _parameters(Krea2TextEncoder()) / 1e9, 2
    )


def test_worker_builds_this_years_tiny_shells() -> None:
    from mflux.models.flux3.variants.txt2img.flux3_klein import Flux3Klein
    from mflux.models.krea2.variants.txt2img.krea2 import Krea2
    from mflux.models.qwen21.variants.txt2img.qwen_image_21 import QwenImage21

    base = _random_weight_pipeline(
        _spec("flux3-image-klein-base"), get_variant("flux3-image-klein-base")
    )
    assert isinstance(base, Flux3Klein) and not base.transformer.flow_map  # the base's config
    assert len(base.transformer.single_transformer_blocks) == FLUX3_TINY.num_single_layers
    qwen21 = _random_weight_pipeline(_spec("qwen-image-2.1"), get_variant("qwen-image-2.1"))
    assert isinstance(qwen21, QwenImage21)
    assert len(qwen21.transformer.transformer_blocks) == QWEN21_TINY.num_layers
    krea2 = _random_weight_pipeline(_spec("krea-2"), get_variant("krea-2"))
    assert isinstance(krea2, Krea2) and len(krea2.transformer.blocks) == KREA2_TINY.layers
