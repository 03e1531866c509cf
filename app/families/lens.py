"""Lens Turbo: Microsoft's 3.8B dual-stream MMDiT with GPT-OSS 20B text features and the FLUX.2
VAE, in mflux (``mflux/models/lens``).

Its loop holds FLUX.2's packed tokens, (1, H/16 · W/16, 128): 2×2 patches of the VAE's 32
channels, BatchNorm-normalized, which mflux decodes with ``Flux2VAE.decode_packed_latents`` after
laying the tokens out spatially (``LensImage.generate_image``), as FLUX.2's loop does; its VAE is
FLUX.2 Klein's own, loaded from ``black-forest-labs/FLUX.2-klein-4B`` (mflux's Lens README). So
FLUX.2's published preview table applies. The loop steps an Euler update on sigmas of its own
(``LensImage._turbo_sigmas``), outside ``config.scheduler``, and passes callbacks no clean
prediction: the preview reads those sigmas.

Weights come from three repositories (``LensImage.__init__``): the DiT from ``Comfy-Org/Lens``
(the variant's repo, one file: ``diffusion_models/lens_turbo_bf16.safetensors``), the GPT-OSS 20B
encoder from ``mlx-community/gpt-oss-20b-MXFP4-Q8`` and the VAE from FLUX.2 Klein 4B's repo. The
studio's download and on-disk check cover the variant's repo; mflux fetches the other two itself
on the first load (README, "This year's models").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.latent_rgb import FLUX2_BIAS, FLUX2_FACTORS
from app.families.spec import Family, LatentPreview, Mflux, RandomWeights

if TYPE_CHECKING:
    import mlx.core as mx


@dataclass(frozen=True)
class LensDims:
    """A Lens transformer's size (``LensTransformer``'s keywords). The head size stays 64: the
    rotary axes are fixed at (8, 28, 28) in mflux (``QwenEmbedRopeMLX``); the patch, 128 input
    and 32 output channels are the latent layout's."""

    num_layers: int
    num_attention_heads: int
    enc_hidden_dim: int  # per GPT-OSS layer
    num_selected_layers: int  # GPT-OSS layers stacked per token
    attention_head_dim: int = 64

    def kwargs(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "num_attention_heads": self.num_attention_heads,
            "enc_hidden_dim": self.enc_hidden_dim,
            "num_selected_layers": self.num_selected_layers,
            "attention_head_dim": self.attention_head_dim,
        }


LENS_TINY = LensDims(2, 2, 32, 4)
# Lens Turbo as mflux builds it (``LensTransformer()``'s defaults, no config override): 48
# dual-stream blocks, 1536 wide (24 heads × 64), text from 4 GPT-OSS layers of 2880; 4.10B
# parameters (counted from mflux's classes).
LENS_FULL = LensDims(48, 24, 2880, 4)


def _pipeline() -> type:
    from mflux.models.lens.variants.txt2img.lens_image import LensImage

    return LensImage


def _weight_definition() -> type:
    from mflux.models.lens.weights.lens_weight_definition import LensWeightDefinition

    class LensWeights(LensWeightDefinition):
        """mflux's definition of the variant's repo (the DiT's one file); its tokenizer comes with
        the encoder's repo, which mflux fetches itself, so none is listed here."""

        @staticmethod
        def get_tokenizers() -> list[Any]:
            return []

    return LensWeights


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    h, w = height // 16, width // 16
    packed = latents.reshape(1, h, w, latents.shape[-1]).transpose(0, 3, 1, 2)  # as mflux's loop
    return Flux2VAE._unpatchify_latents(packed)  # (1, 32, H/8, W/8)


def _loop_sigmas(config: Any) -> mx.array:
    """The sigmas mflux's Lens loop steps on (``LensImage._turbo_sigmas``, which reads only its
    model config)."""
    from types import SimpleNamespace

    import mlx.core as mx
    from mflux.models.lens.variants.txt2img.lens_image import LensImage

    owner = SimpleNamespace(model_config=config.model_config)
    tokens = (config.height // 16) * (config.width // 16)
    return mx.array(LensImage._turbo_sigmas(owner, tokens, config.num_inference_steps))  # type: ignore[arg-type]


FAMILY = Family(
    id="lens",
    display_name="Lens",
    short_name="Lens",
    order=65,
    # Borrowed: FLUX.2 Klein 4B's measured figure (the same VAE decodes both).
    activation_gb_per_megapixel=14.8,
    memory_measured_on="flux2-klein-4b",
    memory_basis=(
        "FLUX.2 Klein 4B's, until a Lens report is committed: the same VAE decodes both, and the "
        "transformer alone at 1024² peaked 5.4 GB above its bf16 weights on an H100 "
        "(families-probe, random weights), under this figure"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=None,  # mflux maps no LoRA for Lens (its README: no LoRA flags)
        package="mflux.models.lens",
    ),
    adapter="app.adapters.lens",
    preview=LatentPreview(
        unpack=_unpack,
        factors=FLUX2_FACTORS,
        bias=FLUX2_BIAS,
        packed_channels=32,
        loop_sigmas=_loop_sigmas,
    ),
    random_weights=RandomWeights(
        builder="app.adapters.lens:shell",
        model_name="lens-turbo",
        tiny=LENS_TINY,
        full=LENS_FULL,
    ),
    # No model folders: mflux has no saver for Lens (``LensImage`` has no ``save_model``), and its
    # one layout, the Comfy mirror's ``diffusion_models/`` file, is no folder layout the studio
    # reads (a ``transformer/`` folder, or Krea 2's weights at the top).
    folders=None,
)
