"""Anima (Turbo, Aesthetic, Base): circlestone-labs' 2B anime and illustration model, a
Cosmos-Predict2 DiT (28 blocks, self-attention over the image, cross-attention to the caption)
with an LLM adapter from Qwen3-0.6B states to the caption, and the Qwen-Image VAE, in mflux.

Its loop holds the Qwen-Image VAE's normalized latents, unpacked (1, 16, H/8, W/8): mflux decodes
them with ``QwenVAE`` (mflux/models/anima/anima_initializer.py), as it does Qwen-Image's, so
Qwen-Image's published Wan-2.1 table applies. The loop steps with its own sampler (ER-SDE or
Euler), not ``config.scheduler``, and hands its in-loop callbacks the step's clean prediction
(``denoised``), which the preview reads.

The Hub repo is one of ComfyUI single files, one transformer file per variant beside the VAE and
the Qwen3 text encoder (``split_files/``), not the layout mflux's weight definition downloads (an
``mflux-save`` one): ``Mflux.hub_files`` names the files mflux reads for a variant
(``AnimaInitializer._load_upstream_weights``), which a download fetches. mflux fetches the two
tokenizers itself at load, from ``Qwen/Qwen3-0.6B-Base`` and ``google/t5-v1_1-xxl`` (a few MB).
"""

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
class AnimaDims:
    """An Anima transformer's size (``AnimaTransformer``'s keywords; the LLM adapter inside it is
    ``context_dim`` wide, with mflux's fixed 6 blocks and 16 heads): fully parametric. The head
    size ``dim / num_heads`` must leave the rotary embedding a spatial band (at least 6)."""

    dim: int
    num_blocks: int
    num_heads: int
    mlp_ratio: float
    context_dim: int
    adaln_lora_dim: int

    def kwargs(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "num_blocks": self.num_blocks,
            "num_heads": self.num_heads,
            "mlp_ratio": self.mlp_ratio,
            "context_dim": self.context_dim,
            "adaln_lora_dim": self.adaln_lora_dim,
        }


ANIMA_TINY = AnimaDims(64, 2, 4, 2.0, 64, 16)
# Anima as mflux builds it (``AnimaTransformer()``'s defaults, no override): 28 blocks, 2048 wide,
# 16 heads × 128, MLP ×4, AdaLN-LoRA rank 256; the caption is 1024 wide (Qwen3-0.6B's states
# through the 6-block LLM adapter); 2.09B parameters, 0.135B of them the adapter (counted from
# mflux's classes).
ANIMA_FULL = AnimaDims(2048, 28, 16, 4.0, 1024, 256)


def _pipeline() -> type:
    from mflux.models.anima.variants.txt2img.anima import Anima

    return Anima


def _weight_definition() -> type:
    from mflux.models.anima.weights.anima_weight_definition import AnimaWeightDefinition

    return AnimaWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.anima.weights.anima_lora_mapping import AnimaLoRAMapping

    return AnimaLoRAMapping


# The files mflux reads from the repo for each variant (``AnimaInitializer._load_upstream_weights``
# over ``AnimaWeightDefinition.source_vae``, ``source_transformer`` and ``source_text_encoder``):
# data here, so a download names them without importing mflux on its own thread
# (tests/families/test_anima.py holds them to mflux's).
_DIR = "split_files"
_VAE = f"{_DIR}/vae/qwen_image_vae.safetensors"
_TEXT_ENCODER = f"{_DIR}/text_encoders/qwen_3_06b_base.safetensors"
HUB_FILES = {
    name: (_VAE, f"{_DIR}/diffusion_models/{file}", _TEXT_ENCODER)
    for name, file in (
        ("anima-turbo", "anima-turbo-v1.1.safetensors"),
        ("anima-aesthetic", "anima-aesthetic-v1.1.safetensors"),
        ("anima-base", "anima-base-v1.0.safetensors"),
    )
}


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.anima.latent_creator.anima_latent_creator import AnimaLatentCreator

    return AnimaLatentCreator.unpack_latents(latents, height, width)  # already (1, 16, H/8, W/8)


FAMILY = Family(
    id="anima",
    display_name="Anima",
    short_name="Anima",
    order=55,
    activation_gb_per_megapixel=14.8,
    memory_measured_on="flux2-klein-4b",
    memory_basis=(
        "no Anima report yet: FLUX.2 Klein 4B's figure, an upper bound here (a transformer "
        "forward at 1024² peaked 9.2 GB above Anima's weights on an H100 against 17.1 GB above "
        "Klein 4B's, ../shared/research/turn4/families-probe.md)"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.anima",
        hub_files=HUB_FILES,
    ),
    adapter="app.adapters.anima",
    preview=LatentPreview(
        unpack=_unpack, factors=WAN21_FACTORS, bias=WAN21_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.anima:shell",
        model_name="anima-turbo",
        tiny=ANIMA_TINY,
        full=ANIMA_FULL,
        cases=(
            # Turbo (guidance 1: one branch) and Base with CFG on the empty prompt (Aesthetic is
            # the same path); mflux's ER-SDE noise is seeded, so two passes draw alike
            ShellCase(
                "anima-turbo",
                "anima-turbo",
                6,
                1.0,
                tests=GATE_TESTS | {ShellTest.engine, ShellTest.preview},
            ),
            ShellCase(
                "anima-base-cfg",
                "anima-base",
                6,
                4.0,
                cfg=True,
                tests=GATE_TESTS | {ShellTest.residual, ShellTest.engine, ShellTest.lora},
            ),
        ),
    ),
    # The LLM adapter and the timestep embedding's norm are Anima's own: mflux-save's names, and
    # the ComfyUI files' in a copy of the Hub repo (``net.`` or ``model.diffusion_model.``
    # prefixed, split_files/diffusion_models). The three variants share one layout (you choose).
    folders=FolderDetection(
        prefixes=tuple(
            f"{prefix}{name}"
            for prefix in ("", "net.", "model.diffusion_model.")
            for name in ("llm_adapter.", "t_embedding_norm.")
        ),
        weight_dirs=(f"{_DIR}/diffusion_models",),
    ),
)
