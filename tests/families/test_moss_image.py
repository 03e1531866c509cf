"""MOSS-Image's data against mflux 0.24's own classes: its real dimensions and parameter counts,
the variants' steps, guidance and repos."""

from __future__ import annotations

import inspect
from typing import Any

from mlx.utils import tree_flatten

from app.families import get_family
from app.families.moss_image import MOSS_IMAGE_FULL, MOSS_IMAGE_TINY
from app.variants import get_variant

VARIANTS = ["moss-image-sft", "moss-image-base"]


def _parameters(module: Any) -> int:
    """Parameters of a module built at its real size (mflux's modules draw their weights
    lazily, so counting allocates nothing)."""
    return sum(v.size for _, v in tree_flatten(module.parameters()))  # type: ignore[attr-defined]


def test_the_real_dimensions_and_parameters_are_mfluxs() -> None:
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.common_models.qwen3_5 import Qwen35TextModel
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.moss_image.model.moss_image_transformer.moss_image_transformer import (
        MOSSImageTransformer,
    )
    from mflux.models.moss_image.moss_image_initializer import (
        MOSS_IMAGE_DECODER_BLOCK_OUT_CHANNELS,
    )

    signature = inspect.signature(MOSSImageTransformer.__init__).parameters
    defaults = {n: p.default for n, p in signature.items()}
    assert all(defaults[k] == v for k, v in MOSS_IMAGE_FULL.kwargs().items())
    for name in VARIANTS:  # mflux builds both with MOSSImageTransformer(): no override
        config = ModelConfig.from_name(model_name=name)
        assert config.transformer_overrides == {} and config.text_encoder_overrides == {}
    total = (
        _parameters(MOSSImageTransformer())
        + _parameters(Qwen35TextModel())
        + _parameters(Flux2VAE(decoder_block_out_channels=MOSS_IMAGE_DECODER_BLOCK_OUT_CHANNELS))
    )
    for variant_id in VARIANTS:
        variant = get_variant(variant_id)
        assert abs(variant.params_billion - total / 1e9) < 0.005, variant_id
        assert variant.unquantized_billion == 0.0  # mflux quantizes the text encoder too


def test_the_tiny_shell_is_deep_enough_for_mfluxs_layer_skip() -> None:
    from mflux.models.moss_image.variants.txt2img.moss_image import MOSSImage

    assert MOSS_IMAGE_TINY.num_layers > max(MOSSImage.DEFAULT_UNCOND_SKIP_LAYERS)


def test_the_variants_take_mfluxs_steps_guidance_and_repo() -> None:
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.moss_image.variants.txt2img.moss_image import MOSSImage

    for variant_id in VARIANTS:
        variant = get_variant(variant_id)
        assert variant.family is get_family("moss-image") and variant.mflux_name == variant_id
        assert variant.default_steps == MOSSImage.DEFAULT_STEPS
        assert variant.default_guidance == MOSSImage.DEFAULT_GUIDANCE and variant.cfg
        assert variant.hf_repo == ModelConfig.from_name(model_name=variant_id).model_name
        assert not variant.distilled and variant.licence is None and not variant.gated_repo
        assert variant.coefficients is None and variant.default_gate() == "firstblock"
