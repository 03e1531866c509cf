"""Qwen-Image: Alibaba's 20B MMDiT with a Qwen2.5-VL text encoder and the Wan-2.1 VAE, in mflux."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import WAN21_BIAS, WAN21_FACTORS
from app.families.spec import (
    GATE_TESTS,
    Family,
    FolderDetection,
    LatentPreview,
    Mflux,
    RandomWeights,
    ShellCase,
    ShellTest,
)

if TYPE_CHECKING:
    import mlx.core as mx


@dataclass(frozen=True)
class QwenDims:
    """A Qwen-Image transformer's size: parametric except head_dim = 128 (rope axes are
    hard-coded to 16 + 56 + 56)."""

    num_layers: int
    num_attention_heads: int
    joint_attention_dim: int

    def kwargs(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_dim": 128,
            "joint_attention_dim": self.joint_attention_dim,
        }


QWEN_TINY = QwenDims(2, 1, 64)
# Qwen-Image (2512) as mflux builds it: QwenTransformer's defaults, 60 blocks, 24 heads × 128
# (3072 wide), joint attention 3584 (Qwen2.5-VL's hidden size); about 20B parameters, 41 GB in
# bfloat16.
QWEN_FULL = QwenDims(60, 24, 3584)


def _pipeline() -> type:
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage

    return QwenImage


def _weight_definition() -> type:
    from mflux.models.qwen.weights.qwen_weight_definition import QwenWeightDefinition

    return QwenWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.qwen.weights.qwen_lora_mapping import QwenLoRAMapping

    return QwenLoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.qwen.latent_creator.qwen_latent_creator import QwenLatentCreator

    return QwenLatentCreator.unpack_latents(latents, height, width)


FAMILY = Family(
    id="qwen-image",
    display_name="Qwen-Image",
    short_name="Qwen-Image",
    order=40,
    activation_gb_per_megapixel=5.1,
    memory_measured_on="qwen-image",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.qwen",
    ),
    adapter="app.adapters.qwen_image",
    preview=LatentPreview(
        unpack=_unpack, factors=WAN21_FACTORS, bias=WAN21_BIAS, packed_channels=16
    ),
    random_weights=RandomWeights(
        builder="app.adapters.qwen_image:shell",
        model_name="qwen-image",
        tiny=QWEN_TINY,
        full=QWEN_FULL,
        cases=(
            ShellCase(
                "qwen-image",
                "qwen-image",
                6,
                4.0,
                cfg=True,
                tests=GATE_TESTS | {ShellTest.residual, ShellTest.engine, ShellTest.preview},
            ),
        ),
    ),
    # Qwen-Image 2.1 (its shared modulation) and Krea 2 Raw's diffusers shards (its text fusion)
    # carry img_in. and txt_in. too
    folders=FolderDetection(
        prefixes=("img_in.", "txt_in."), without=("modulation.", "text_fusion.", "txtfusion.")
    ),
    img2img=True,
)
