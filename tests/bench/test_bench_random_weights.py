"""``--random-weights`` for every family: real dimensions on paper, tiny ones built here.

Real-size weights are never built on this 24 GB machine: the full dimensions are checked against
mflux's own constructors and configs, and the memory rule (no float32 copy of the weights, one
matrix at a time) is checked on a model small enough to build.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx import nn
from mlx.utils import tree_flatten

from app.adapters.qwen_image import shell as qwen_shell
from app.bench.worker import WorkerSpec, _random_weight_pipeline, warm_loop_estimate
from app.engine.request import GenerationRequest, LoraSpec
from app.families import FAMILIES, Family
from app.families.qwen_image import QwenDims
from app.variants import get_variant
from app.variants.builtin import BUILTIN_VARIANTS

SHELL_FAMILIES = [f for f in FAMILIES.values() if f.random_weights is not None]


def _plain(value: Any) -> Any:
    """A keyword's value with tuples and lists alike."""
    return list(value) if isinstance(value, tuple | list) else value


def _settings(module: Any) -> dict[str, Any]:
    """Every submodule's plain settings (head counts, rope axes, scales: what shapes do not
    show), by path; a helper object a module holds (Z-Image's rope embedder) included."""

    def plain(value: Any) -> bool:
        numbers = isinstance(value, tuple | list) and all(isinstance(x, int | float) for x in value)
        return numbers or isinstance(value, bool | int | float | str)

    found: dict[str, Any] = {}
    for path, sub in module.named_modules():
        for key, value in {**vars(sub), **dict(sub)}.items():
            if plain(value):
                found[f"{path}.{key}"] = _plain(value)
            elif not isinstance(value, mx.array | nn.Module) and hasattr(value, "__dict__"):
                for inner, held in vars(value).items():
                    if plain(held):
                        found[f"{path}.{key}.{inner}"] = _plain(held)
    return found


def _shapes(module: Any) -> dict[str, tuple[int, ...]]:
    named: list[tuple[str, mx.array]] = tree_flatten(module.parameters())  # type: ignore[assignment]
    return {name: tuple(value.shape) for name, value in named}


def _transformer_class(family: Family) -> Any:
    """The transformer class mflux's pipeline for the family holds (its annotation)."""
    return typing.get_type_hints(family.require_mflux().pipeline())["transformer"]


def _mflux_transformer(family: Family, model_name: str, **dims: Any) -> Any:
    """The family's transformer as mflux's initializer builds it for ``model_name`` (its class's
    defaults and the model config's overrides), with ``dims`` over them; built lazily (nothing
    is allocated)."""
    from mflux.models.common.config.model_config import ModelConfig

    cls = _transformer_class(family)
    config = ModelConfig.from_name(model_name=model_name)
    kwargs = {**(config.transformer_overrides or {}), **dims}
    if "model_config" in inspect.signature(cls.__init__).parameters:
        kwargs["model_config"] = config
    return cls(**kwargs)


@pytest.mark.parametrize("family", SHELL_FAMILIES, ids=lambda f: f.id)
def test_full_dimensions_are_mflux_own(family: Family) -> None:
    """Each family's real dimensions are its transformer's as mflux builds it for the family's
    default model: the class's defaults under the model config's overrides (FLUX.2 Klein 4B's,
    FLUX.3 base's ``flow_map``): every keyword, every parameter's shape and every module's
    settings."""
    from mflux.models.common.config.model_config import ModelConfig

    spec = family.require_random_weights()
    cls = _transformer_class(family)
    defaults = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()}
    overrides = ModelConfig.from_name(model_name=spec.model_name).transformer_overrides or {}
    for key, value in spec.full.kwargs().items():
        theirs_value = overrides.get(key, defaults[key])
        if theirs_value is not None:  # None: the class picks its own inside (settings below)
            assert _plain(theirs_value) == _plain(value), key
    ours = _mflux_transformer(family, spec.model_name, **spec.full.kwargs())
    theirs = _mflux_transformer(family, spec.model_name)
    assert _shapes(ours) == _shapes(theirs)
    assert _settings(ours) == _settings(theirs)


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


@pytest.mark.parametrize("family", SHELL_FAMILIES, ids=lambda f: f.id)
def test_the_worker_builds_every_familys_tiny_shell(family: Family) -> None:
    """``--random-weights tiny`` on the family's default model: mflux's pipeline class with that
    model's config, its transformer at the tiny dimensions (as mflux builds the class there: the
    same parameters, a FLUX.3 base's config override included)."""
    from mflux.models.common.config.model_config import ModelConfig

    spec = family.require_random_weights()
    (variant,) = [
        v
        for v in BUILTIN_VARIANTS.values()
        if v.family is family and v.mflux_name == spec.model_name
    ]
    pipeline = _random_weight_pipeline(_spec(variant.id), variant)
    assert type(pipeline) is family.require_mflux().pipeline()
    config = ModelConfig.from_name(model_name=spec.model_name)
    assert pipeline.model_config.model_name == config.model_name
    tiny = _mflux_transformer(family, spec.model_name, **spec.tiny.kwargs())
    assert _shapes(pipeline.transformer) == _shapes(tiny)


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


def test_this_years_parameters_are_mflux_own() -> None:
    """FLUX.3, Qwen-Image 2.1 and Krea 2: no config overrides their transformers but FLUX.3
    base's ``flow_map``, and each variant's parameter count (the memory estimate's) is
    transformer + text encoder + VAE as mflux builds them. (Older rows carry the published,
    rounded figures: FLUX.1 16.8 against 16.87 counted, Qwen-Image 28.5 against 27.63.)"""
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
