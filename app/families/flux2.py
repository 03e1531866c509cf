"""FLUX.2 Klein (4B and 9B, distilled and base): Black Forest Labs' small FLUX.2, in mflux."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import FLUX2_BIAS, FLUX2_FACTORS
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
class Flux2Dims:
    """A FLUX.2 transformer's size (``Flux2Transformer``'s keywords): fully parametric."""

    num_layers: int
    num_single_layers: int
    num_attention_heads: int
    attention_head_dim: int
    joint_attention_dim: int
    axes_dims_rope: tuple[int, ...]

    def kwargs(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "num_single_layers": self.num_single_layers,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_dim": self.attention_head_dim,
            "joint_attention_dim": self.joint_attention_dim,
            "axes_dims_rope": self.axes_dims_rope,
        }


FLUX2_TINY = Flux2Dims(2, 2, 4, 32, 64, (8, 8, 8, 8))
# FLUX.2 Klein 4B exactly as mflux builds it (ModelConfig.flux2_klein_4b().transformer_overrides).
FLUX2_KLEIN_4B = Flux2Dims(5, 20, 24, 128, 7680, (32, 32, 32, 32))

# Klein sizes by their double-stream block count (mflux's ModelConfig: 4B has 5, 9B 8).
_KLEIN_BY_LAYERS = {
    5: ("flux2-klein-4b", "flux2-klein-base-4b"),
    8: ("flux2-klein-9b", "flux2-klein-base-9b"),
}


def _pipeline() -> type:
    from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

    return Flux2Klein


def _weight_definition() -> type:
    from mflux.models.flux2.weights.flux2_weight_definition import Flux2KleinWeightDefinition

    return Flux2KleinWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.flux2.weights.flux2_lora_mapping import Flux2LoRAMapping

    return Flux2LoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    packed = Flux2LatentCreator.unpack_latents(latents, height, width)  # (1, 128, H/16, W/16)
    return Flux2VAE._unpatchify_latents(packed)  # (1, 32, H/8, W/8)


def _candidates(members: tuple[str, ...], keys: Mapping[str, Sequence[int]]) -> tuple[str, ...]:
    blocks = {k.split(".")[1] for k in keys if k.startswith("transformer_blocks.")}
    return _KLEIN_BY_LAYERS.get(len(blocks), members)


FAMILY = Family(
    id="flux2",
    display_name="FLUX.2 Klein",
    short_name="FLUX.2",
    order=20,
    activation_gb_per_megapixel=14.8,  # Klein 4B (the 9B has wider blocks: likely more)
    memory_measured_on="flux2-klein-4b",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.flux2",
    ),
    adapter="app.adapters.flux2",
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX2_FACTORS, bias=FLUX2_BIAS, packed_channels=32
    ),
    random_weights=RandomWeights(
        builder="app.adapters.flux2:shell",
        model_name="flux2-klein-4b",
        tiny=FLUX2_TINY,
        full=FLUX2_KLEIN_4B,
        cases=(
            # The FLUX.2 shell's first block changes by 1.0–1.3 at every step of its 6 after a
            # 2-step warm-up (measured), more than any threshold allows; over 10 it dips to 0.90.
            ShellCase(
                "flux2-cfg",
                "flux2-klein-base-4b",
                6,
                4.0,
                cfg=True,
                tests=GATE_TESTS
                | {ShellTest.residual, ShellTest.engine, ShellTest.lora, ShellTest.preview},
                probe_resume_steps=10,
            ),
            ShellCase("flux2-no-cfg", "flux2-klein-base-4b", 6, 1.0),  # guidance 1: no CFG
        ),
    ),
    folders=FolderDetection(
        prefixes=("time_guidance_embed.", "double_stream_modulation_img."), candidates=_candidates
    ),
    img2img=True,
)
