"""FLUX.1 (dev, schnell, Krea dev): Black Forest Labs' 12B rectified-flow transformer, in mflux."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.families.latent_rgb import FLUX1_BIAS, FLUX1_FACTORS
from app.families.spec import (
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
class Flux1Dims:
    """A FLUX.1 transformer's size: hidden size 3072 is hard-coded, only block counts are free."""

    joint_blocks: int
    single_blocks: int

    def kwargs(self) -> dict[str, int]:
        """``Transformer``'s keywords (beside its model config)."""
        return {
            "num_transformer_blocks": self.joint_blocks,
            "num_single_transformer_blocks": self.single_blocks,
        }


# The smallest FLUX.1 mflux builds: one block of each kind, still at the hard-coded 3072 width
# (546M parameters, 1.1 GB in bfloat16).
FLUX1_TINY = Flux1Dims(1, 1)
# FLUX.1 dev / schnell / Krea dev as their weights define them: 19 joint + 38 single blocks,
# 3072 wide, 24 heads × 128 (about 11.9B parameters, 24 GB in bfloat16).
FLUX1_DEV = Flux1Dims(19, 38)

_ENGINE_ONLY = frozenset({ShellTest.engine})


def _pipeline() -> type:
    from mflux.models.flux.variants.txt2img.flux import Flux1

    return Flux1


def _weight_definition() -> type:
    from mflux.models.flux.weights.flux_weight_definition import FluxWeightDefinition

    return FluxWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.flux.weights.flux_lora_mapping import FluxLoRAMapping

    return FluxLoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux.latent_creator.flux_latent_creator import FluxLatentCreator

    return FluxLatentCreator.unpack_latents(latents, height, width)


_TEXT_EMBEDDER = "time_text_embed.text_embedder.linear_1.weight"
_GUIDANCE_EMBEDDER = "time_text_embed.guidance_embedder.linear_1.weight"


def _candidates(members: tuple[str, ...], keys: Mapping[str, Sequence[int]]) -> tuple[str, ...]:
    """schnell has no guidance embedder; dev and Krea dev have one."""
    guided = any(k.startswith("time_text_embed.guidance_embedder.") for k in keys)
    return tuple(v for v in members if (v != "flux1-schnell") == guided)


FAMILY = Family(
    id="flux1",
    display_name="FLUX.1",
    short_name="FLUX.1",
    order=10,
    activation_gb_per_megapixel=8.1,  # FLUX.1 dev
    memory_measured_on="flux1-dev",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.flux",
    ),
    adapter="app.adapters.flux1",
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX1_FACTORS, bias=FLUX1_BIAS, packed_channels=16
    ),
    random_weights=RandomWeights(
        builder="app.adapters.flux1:shell",
        model_name="dev",
        tiny=FLUX1_TINY,
        full=FLUX1_DEV,
        cases=(
            # 3 steps: the shell is 3072 wide even when tiny (545 M parameters); its installation
            # checks live in tests/adapters/test_adapter_flux1.py, on one shell for the module
            ShellCase(
                "flux1-dev",
                "dev",
                3,
                3.5,
                tests=frozenset({ShellTest.parity, ShellTest.probe, ShellTest.residual}),
            ),
            # Through the engine: 4 steps (the resume needs a skip after two replayed ones) on
            # 64² pixels (16 image tokens beside the 16 text tokens)
            ShellCase("flux1-dev-engine", "dev", 4, 3.5, size=64, tests=_ENGINE_ONLY),
            ShellCase(
                "flux1-schnell-engine", "schnell", 4, None, seed=3, size=64, tests=_ENGINE_ONLY
            ),
        ),
    ),
    folders=FolderDetection(
        prefixes=("time_text_embed.text_embedder.",),
        candidates=_candidates,
        samples={
            "flux1-dev": (_TEXT_EMBEDDER, _GUIDANCE_EMBEDDER),
            "flux1-krea-dev": (_TEXT_EMBEDDER, _GUIDANCE_EMBEDDER),
        },
    ),
    img2img=True,
)
