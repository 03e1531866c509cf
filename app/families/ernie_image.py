"""ERNIE-Image (base and Turbo): Baidu's 8B single-stream transformer with a Ministral-3B text
encoder and the FLUX.2 VAE, in mflux.

Its loop holds FLUX.2's latent space in the spatial layout, (1, 128, H/16, W/16): 32 VAE channels
2×2-patchified (channel ``c·4 + dy·2 + dx``, ``ErnieLatentCreator.pack_latents``) and normalized
by the VAE's BatchNorm statistics (``bn_normalize_latents``), decoded with mflux's ``Flux2VAE``
(``decode_packed_latents``, the method FLUX.2's loop decodes with; ``ErnieImageInitializer``
builds ``Flux2VAE()``). So FLUX.2's published preview table applies after unpatchifying, as it
does for FLUX.2 and FLUX.3. mflux steps ``config.scheduler`` (linear by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import FLUX2_BIAS, FLUX2_FACTORS
from app.families.spec import Family, FolderDetection, LatentPreview, Mflux, RandomWeights

if TYPE_CHECKING:
    import mlx.core as mx


@dataclass(frozen=True)
class ErnieDims:
    """An ERNIE-Image transformer's size (``ErnieTransformer``'s keywords): fully parametric; the
    rotary axes sum to the head size ``hidden_size / num_attention_heads``. The text width stays
    3072 at any size: mflux's prompt batching pads captions with 3072-wide zeros
    (``ErniePromptEncoder.build_text_batch``), which the shell's stub encoding goes through."""

    hidden_size: int
    num_attention_heads: int
    num_layers: int
    ffn_hidden_size: int
    rope_axes_dim: tuple[int, int, int]
    text_in_dim: int = 3072

    def kwargs(self) -> dict[str, Any]:
        return {
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_layers": self.num_layers,
            "ffn_hidden_size": self.ffn_hidden_size,
            "rope_axes_dim": list(self.rope_axes_dim),
            "text_in_dim": self.text_in_dim,
        }


ERNIE_TINY = ErnieDims(64, 2, 2, 128, (8, 12, 12))
# ERNIE-Image (and Turbo) as mflux builds it: ``ErnieTransformer()``'s defaults with the config's
# one override (``rope_axes_dim`` [32, 48, 48], the default too): 36 blocks, 4096 wide, 32 heads ×
# 128, GELU-gated FFN 12288; 8.03B parameters (counted from mflux's classes).
ERNIE_FULL = ErnieDims(4096, 32, 36, 12288, (32, 48, 48))


def _pipeline() -> type:
    from mflux.models.ernie_image.variants.txt2img.ernie_image import ErnieImage

    return ErnieImage


def _weight_definition() -> type:
    from mflux.models.ernie_image.weights.ernie_weight_definition import ErnieWeightDefinition

    return ErnieWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.ernie_image.weights.ernie_lora_mapping import ErnieLoRAMapping

    return ErnieLoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    return Flux2VAE._unpatchify_latents(latents)  # (1, 128, H/16, W/16) → (1, 32, H/8, W/8)


FAMILY = Family(
    id="ernie-image",
    display_name="ERNIE-Image",
    short_name="ERNIE-Image",
    order=57,
    # Borrowed: FLUX.2 Klein 4B's measured figure (the same VAE, mflux's Flux2VAE, decodes both).
    activation_gb_per_megapixel=14.8,
    memory_measured_on="flux2-klein-4b",
    memory_basis=(
        "FLUX.2 Klein 4B's, until an ERNIE-Image report is committed: the same VAE decodes both, "
        "and the transformer alone at 1024² peaked 8.2 GB above its bf16 weights on an H100 "
        "(families-probe, random weights), under this figure"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.ernie_image",
    ),
    adapter="app.adapters.ernie_image",
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX2_FACTORS, bias=FLUX2_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.ernie_image:shell",
        model_name="ernie-image-turbo",
        tiny=ERNIE_TINY,
        full=ERNIE_FULL,
    ),
    # Hugging Face's name (``adaLN_modulation.1``) and mflux-save's (``adaln_modulation``)
    folders=FolderDetection(prefixes=("adaLN_modulation.1.", "adaln_modulation.")),
)
