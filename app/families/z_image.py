"""Z-Image (base and Turbo): Tongyi-MAI's single-stream 6B transformer, in mflux."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import FLUX1_BIAS, FLUX1_FACTORS
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
class ZImageDims:
    """A Z-Image transformer's size (``ZImageTransformer``'s keywords): fully parametric."""

    dim: int
    n_layers: int
    n_refiner_layers: int
    n_heads: int
    cap_feat_dim: int
    axes_dims: tuple[int, ...]

    def kwargs(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "n_layers": self.n_layers,
            "n_refiner_layers": self.n_refiner_layers,
            "n_heads": self.n_heads,
            "cap_feat_dim": self.cap_feat_dim,
            "axes_dims": list(self.axes_dims),
        }


Z_IMAGE_TINY = ZImageDims(128, 4, 1, 4, 64, (8, 12, 12))
Z_IMAGE_FULL = ZImageDims(3840, 30, 2, 30, 2560, (32, 48, 48))


def _pipeline() -> type:
    from mflux.models.z_image.variants.z_image import ZImage

    return ZImage


def _weight_definition() -> type:
    from mflux.models.z_image.weights.z_image_weight_definition import ZImageWeightDefinition

    return ZImageWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.z_image.weights.z_image_lora_mapping import ZImageLoRAMapping

    return ZImageLoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.z_image.latent_creator.z_image_latent_creator import ZImageLatentCreator

    return ZImageLatentCreator.unpack_latents(latents, height, width)


FAMILY = Family(
    id="z-image",
    display_name="Z-Image",
    short_name="Z-Image",
    order=30,
    activation_gb_per_megapixel=11.8,
    memory_measured_on="z-image",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.z_image",
    ),
    adapter="app.adapters.z_image",
    # FLUX.1's latent space (ComfyUI's ZImage uses the Flux format); the loop's latents are
    # (16, 1, H/8, W/8), not packed tokens
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX1_FACTORS, bias=FLUX1_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.z_image:shell",
        model_name="z-image",
        tiny=Z_IMAGE_TINY,
        full=Z_IMAGE_FULL,
        cases=(
            ShellCase(
                "z-image-cfg",
                "z-image",
                6,
                4.0,
                cfg=True,
                tests=GATE_TESTS
                | {ShellTest.residual, ShellTest.engine, ShellTest.lora, ShellTest.preview},
            ),
            # guidance-distilled: one branch, the linear scheduler
            ShellCase("z-image-turbo", "z-image-turbo", 5, None, seed=1),
        ),
    ),
    folders=FolderDetection(prefixes=("cap_embedder.", "all_x_embedder.")),
    img2img=True,
)
