"""FLUX.3 Image Klein (distilled and base): Black Forest Labs' 5.6B transformer, in mflux.

Its latents are FLUX.2's: mflux decodes them with ``Flux2VAE`` and the checkpoint's VAE is the
FLUX.2 VAE with identical weights (mflux/models/flux3/README.md, "Notes";
``Flux3WeightMapping.get_vae_mapping``), 128 BatchNorm-normalized channels per token laid out
``c·4 + dy·2 + dx`` (``Flux3LatentCreator.encode_tokens``), so FLUX.2's published preview table
applies. The loop steps with its own flow-map scheduler, not ``config.scheduler``: the preview
reads its sigmas (``Flux3FlowMapScheduler.timesteps``).
"""

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
class Flux3Dims:
    """A FLUX.3 transformer's size (``Flux3Transformer``'s keywords): fully parametric; the
    distilled checkpoint's ``flow_map`` comes from mflux's model config, not from here."""

    num_layers: int  # per-mode blocks (image, image_cond, text), each
    num_single_layers: int
    num_attention_heads: int
    attention_head_dim: int
    joint_attention_dim: int
    axes_dims_rope: tuple[int, ...]  # sums to attention_head_dim

    def kwargs(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "num_single_layers": self.num_single_layers,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_dim": self.attention_head_dim,
            "joint_attention_dim": self.joint_attention_dim,
            "axes_dims_rope": self.axes_dims_rope,
        }


FLUX3_TINY = Flux3Dims(2, 2, 4, 32, 64, (8, 8, 8, 8))
# FLUX.3 Image Klein as mflux builds it: ``Flux3Transformer``'s defaults (no transformer override
# but the base's ``flow_map``): 5 per-mode + 28 single blocks, 24 heads × 128 (3072 wide), joint
# attention 20480 (Qwen3-VL-4B's hidden states, 8 layers × 2560). 5.55B parameters distilled, 5.54B
# base (counted from mflux's classes; the H200 probe read 5.55 and 5.54,
# ../shared/research/turn3/h200-rerun/flux3-probe.json).
FLUX3_FULL = Flux3Dims(5, 28, 24, 128, 20480, (32, 32, 32, 32))


def _pipeline() -> type:
    from mflux.models.flux3.variants.txt2img.flux3_klein import Flux3Klein

    return Flux3Klein


def _weight_definition() -> type:
    # The base's definition differs only in the transformer's mapping (no target-time embedder):
    # download patterns and tokenizers are the same.
    from mflux.models.flux3.weights.flux3_weight_definition import Flux3KleinWeightDefinition

    return Flux3KleinWeightDefinition


def _lora_mapping() -> type:
    from mflux.models.flux3.weights.flux3_lora_mapping import Flux3LoRAMapping

    return Flux3LoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.flux3.latent_creator.flux3_latent_creator import Flux3LatentCreator

    packed = Flux3LatentCreator.unpack_latents(latents, height, width)  # (1, 128, H/16, W/16)
    return Flux2VAE._unpatchify_latents(packed)  # (1, 32, H/8, W/8)


def _loop_sigmas(config: Any) -> mx.array:
    """The flow-map schedule mflux's FLUX.3 loop steps on (``Flux3KleinCore._generate``)."""
    from mflux.models.flux3.model.flux3_scheduler.flux3_flow_map_scheduler import (
        Flux3FlowMapScheduler,
    )

    return Flux3FlowMapScheduler(num_inference_steps=config.num_inference_steps).timesteps


def _candidates(members: tuple[str, ...], keys: Mapping[str, Sequence[int]]) -> tuple[str, ...]:
    """Only the distilled checkpoint (a flow map) has the target-time embedder."""
    flow_map = any(k.startswith("target_timestep_embedder.") for k in keys)
    return tuple(v for v in members if v.endswith("-base") != flow_map)


FAMILY = Family(
    id="flux3",
    display_name="FLUX.3 Image Klein",
    short_name="FLUX.3",
    order=25,
    # The base's H200 report (13.7; the distilled model's 13.5): the larger, an upper bound
    activation_gb_per_megapixel=13.7,
    memory_measured_on="flux3-image-klein-base",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.flux3",
    ),
    adapter="app.adapters.flux3",
    preview=LatentPreview(
        unpack=_unpack,
        factors=FLUX2_FACTORS,
        bias=FLUX2_BIAS,
        packed_channels=32,
        loop_sigmas=_loop_sigmas,
    ),
    random_weights=RandomWeights(
        builder="app.adapters.flux3:shell",
        model_name="flux3-image-klein",
        tiny=FLUX3_TINY,
        full=FLUX3_FULL,
        cases=(
            # the distilled flow map (no guidance, the target time)
            ShellCase(
                "flux3-image-klein",
                "flux3-image-klein",
                6,
                None,
                tests=GATE_TESTS | {ShellTest.engine, ShellTest.preview},
            ),
            # the base with CFG on the empty prompt. Its first block changes by 1.03–1.30 at
            # every step of 6 (1.13 at least after the warm-up), 1.02 at best over 8, 0.88 over
            # 10 (measured, seed 1, 128², float32).
            ShellCase(
                "flux3-base-cfg",
                "flux3-image-klein-base",
                6,
                3.5,
                cfg=True,
                tests=GATE_TESTS | {ShellTest.residual, ShellTest.engine, ShellTest.lora},
                probe_resume_steps=10,
            ),
        ),
    ),
    folders=FolderDetection(
        prefixes=("early_stream_modulations.", "txt_mode_blocks."),
        candidates=_candidates,
        samples={
            "flux3-image-klein": (
                "early_stream_modulations.image.linear.weight",
                "target_timestep_embedder.linear_1.weight",  # the distilled flow map
            )
        },
    ),
)
