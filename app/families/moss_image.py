"""MOSS-Image (SFT and Base): OpenMOSS's 5.1B single-stream transformer (42 layers over the image
tokens followed by the caption's, one shared timestep modulation) with a Qwen3.5-9B text encoder
and the FLUX.2 VAE with its small decoder, in mflux.

Its loop holds the FLUX.2 VAE's packed, BatchNorm-normalized latents (1, 128, H/16, W/16): mflux
decodes them with ``Flux2VAE.decode_packed_latents`` (mflux/models/moss_image/
moss_image_initializer.py: the FLUX.2 VAE, its decoder the small one), the space FLUX.2 Klein's
loop holds once unpacked to that shape, so FLUX.2's published table applies after the same 2×2
unpatchify. The loop steps ``config.scheduler`` (MOSS-Image's snapped flow-matching Euler), which
the preview reads.
"""

from __future__ import annotations

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
class MOSSImageDims:
    """A MOSS-Image transformer's size (``MOSSImageTransformer``'s keywords; the latents keep
    mflux's 128 channels): fully parametric, the head size ``dim / num_heads`` a multiple of 8.
    mflux's CFG branch skips layer 22 by default, so a shell has at least 23 layers."""

    dim: int
    ffn_dim: int
    num_heads: int
    num_layers: int
    text_dim: int
    freq_dim: int

    def kwargs(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "ffn_dim": self.ffn_dim,
            "num_heads": self.num_heads,
            "num_layers": self.num_layers,
            "text_dim": self.text_dim,
            "freq_dim": self.freq_dim,
        }


MOSS_IMAGE_TINY = MOSSImageDims(64, 128, 4, 23, 64, 32)
# MOSS-Image as mflux builds it (``MOSSImageTransformer()``'s defaults; neither variant's config
# overrides them): 42 layers, 3072 wide, 24 heads × 128, SiTU FFN 8192; text features 4096
# (Qwen3.5-9B's); 5.08B parameters (counted from mflux's classes).
MOSS_IMAGE_FULL = MOSSImageDims(3072, 8192, 24, 42, 4096, 256)


def _pipeline() -> type:
    from mflux.models.moss_image.variants.txt2img.moss_image import MOSSImage

    return MOSSImage


def _weight_definition() -> type:
    from mflux.models.moss_image.weights.moss_image_weight_definition import (
        MOSSImageWeightDefinition,
    )

    return MOSSImageWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.moss_image.weights.moss_image_lora_mapping import MOSSImageLoRAMapping

    return MOSSImageLoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    return Flux2VAE._unpatchify_latents(latents)  # (1, 128, H/16, W/16) → (1, 32, H/8, W/8)


FAMILY = Family(
    id="moss-image",
    display_name="MOSS-Image",
    short_name="MOSS-Image",
    order=100,
    activation_gb_per_megapixel=14.8,
    memory_measured_on="flux2-klein-4b",
    memory_basis=(
        "no MOSS-Image report yet: FLUX.2 Klein 4B's figure, an upper bound here (a transformer "
        "forward at 1024² peaked 6.9 GB above MOSS-Image's weights on an H100 against 17.1 GB "
        "above Klein 4B's, ../shared/research/turn4/families-probe.md; both decode with the "
        "FLUX.2 VAE, MOSS-Image with the small decoder)"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.moss_image",
    ),
    adapter="app.adapters.moss_image",
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX2_FACTORS, bias=FLUX2_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.moss_image:shell",
        model_name="moss-image-sft",
        tiny=MOSS_IMAGE_TINY,
        full=MOSS_IMAGE_FULL,
        cases=(
            # mflux's CFG (guidance 3: the unconditional call on the empty prompt, layer 22
            # skipped, its own residual) and without (guidance 1: one call a step)
            ShellCase(
                "moss-image-sft-cfg",
                "moss-image-sft",
                6,
                3.0,
                cfg=True,
                tests=GATE_TESTS
                | {ShellTest.residual, ShellTest.engine, ShellTest.lora, ShellTest.preview},
            ),
            ShellCase("moss-image-no-cfg", "moss-image-sft", 6, 1.0),
        ),
    ),
    # The official checkpoint's names (mflux's are the same): the video embedder and the shared
    # modulations are MOSS-Image's own. SFT and Base share one layout.
    folders=FolderDetection(prefixes=("video_embedder.", "shared_block_modulation.")),
)
