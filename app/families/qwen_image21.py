"""Qwen-Image 2.1 (base and Turbo): Alibaba's 7.1B single-stream, block-causal transformer with a
Qwen3-VL-8B text encoder and its own 64-channel, 16× VAE, in mflux."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import QWEN_IMAGE21_BIAS, QWEN_IMAGE21_FACTORS
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
class Qwen21Dims:
    """A Qwen-Image 2.1 transformer's size (``Qwen21Transformer``'s keywords): fully parametric;
    the rope axes sum to the head size."""

    num_layers: int
    num_attention_heads: int
    attention_head_dim: int
    context_in_dim: int
    axes_dims_rope: tuple[int, int, int]

    def kwargs(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_dim": self.attention_head_dim,
            "context_in_dim": self.context_in_dim,
            "axes_dims_rope": self.axes_dims_rope,
        }


QWEN21_TINY = Qwen21Dims(2, 2, 32, 64, (8, 12, 12))
# Qwen-Image 2.1 as mflux builds it (``Qwen21Transformer()``, no override): 32 blocks, 32 heads ×
# 128 (4096 wide), text features 4096 (Qwen3-VL-8B), rope axes 16 + 56 + 56; 7.12B parameters
# (counted from mflux's classes).
QWEN21_FULL = Qwen21Dims(32, 32, 128, 4096, (16, 56, 56))


def _pipeline() -> type:
    from mflux.models.qwen21.variants.txt2img.qwen_image_21 import QwenImage21

    return QwenImage21


def _weight_definition() -> type:
    from mflux.models.qwen21.weights.qwen21_weight_definition import Qwen21WeightDefinition

    return Qwen21WeightDefinition


def _lora_mapping() -> type:
    from mflux.models.qwen21.weights.qwen21_lora_mapping import Qwen21LoRAMapping

    return Qwen21LoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.qwen21.latent_creator.qwen21_latent_creator import Qwen21LatentCreator

    # (1, H/16·W/16, 64) tokens → (1, 64, 1, H/16, W/16), the single frame dropped
    return Qwen21LatentCreator.unpack_latents(latents, height, width)[:, :, 0]


FAMILY = Family(
    id="qwen-image-2.1",
    display_name="Qwen-Image 2.1",
    short_name="Qwen-Image 2.1",
    order=45,
    activation_gb_per_megapixel=18.6,
    memory_measured_on="qwen-image-2.1",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.qwen21",
    ),
    adapter="app.adapters.qwen_image21",
    # One 64-channel latent per 16 × 16 pixels, unpatched: projected at H/16
    preview=LatentPreview(
        unpack=_unpack,
        factors=QWEN_IMAGE21_FACTORS,
        bias=QWEN_IMAGE21_BIAS,
        packed_channels=None,
    ),
    random_weights=RandomWeights(
        builder="app.adapters.qwen_image21:shell",
        model_name="qwen-image-2.1",
        tiny=QWEN21_TINY,
        full=QWEN21_FULL,
        cases=(
            # no guidance (mflux's default): the text-cache path without CFG
            ShellCase(
                "qwen-image-2.1",
                "qwen-image-2.1",
                6,
                None,
                tests=GATE_TESTS | {ShellTest.engine, ShellTest.lora, ShellTest.preview},
            ),
            # Turbo on its fixed sigma nodes
            ShellCase(
                "qwen-image-2.1-turbo",
                "qwen-image-2.1-turbo",
                5,
                None,
                seed=1,
                tests=frozenset({ShellTest.parity}),
            ),
            # true CFG (a negative caption), on the text-cache path and on mflux's joint one
            ShellCase(
                "qwen-image-2.1-cfg",
                "qwen-image-2.1",
                6,
                4.0,
                negative_prompt="blurry",
                cfg=True,
                tests=frozenset({ShellTest.probe, ShellTest.residual}),
            ),
            ShellCase(
                "qwen-image-2.1-joint",
                "qwen-image-2.1",
                6,
                4.0,
                negative_prompt="blurry",
                transformer_attrs=(("use_text_cache", False),),
                cfg=True,
                tests=frozenset({ShellTest.probe}),
            ),
        ),
    ),
    # Qwen-Image's names (img_in., txt_in.) are here too; the shared modulation is 2.1's own
    # img_in./txt_in. are Qwen-Image's names too: 2.1 is told by its shared modulation
    folders=FolderDetection(
        prefixes=("modulation.",),
        samples={
            variant_id: ("modulation.1.weight", "img_in.weight")
            for variant_id in ("qwen-image-2.1", "qwen-image-2.1-turbo")
        },
    ),
    img2img=True,
)
