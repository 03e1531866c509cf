"""Krea 2 (Turbo): Krea's 12.8B single-stream transformer with a Qwen3-VL-4B text encoder and the
Qwen-Image VAE, in mflux.

Its loop holds the Qwen-Image VAE's normalized latents, unpacked (1, 16, H/8, W/8): mflux decodes
them with ``QwenVAE`` (mflux/models/krea2/krea2_initializer.py), as it does Qwen-Image's, so
Qwen-Image's published Wan-2.1 table applies. The loop steps with its own sampler (ER-SDE), not
``config.scheduler``, and hands its in-loop callbacks the step's clean prediction (``denoised``),
which the preview reads.
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
class Krea2Dims:
    """A Krea 2 transformer's size (``Krea2Transformer``'s keywords): fully parametric; the head
    size ``features / heads`` must be a multiple of 16 (its rope axes are cut in sixteenths)."""

    features: int
    heads: int
    kvheads: int
    layers: int
    multiplier: int
    tdim: int
    txtdim: int
    txtlayers: int
    txtheads: int
    txtkvheads: int

    def kwargs(self) -> dict[str, Any]:
        return {
            "features": self.features,
            "heads": self.heads,
            "kvheads": self.kvheads,
            "layers": self.layers,
            "multiplier": self.multiplier,
            "tdim": self.tdim,
            "txtdim": self.txtdim,
            "txtlayers": self.txtlayers,
            "txtheads": self.txtheads,
            "txtkvheads": self.txtkvheads,
        }

    @property
    def context_dim(self) -> int:
        """The text encoder's features per token: ``txtlayers`` hidden states of ``txtdim``."""
        return self.txtlayers * self.txtdim


KREA2_TINY = Krea2Dims(64, 4, 2, 2, 2, 32, 32, 2, 2, 2)
# Krea 2 Turbo as mflux builds it (``Krea2Transformer()``'s defaults, no override): 28 blocks,
# 6144 wide, 48 heads × 128 with 12 key/value heads, SwiGLU ×4; text fusion over 12 Qwen3-VL-4B
# hidden states of 2560; 12.82B parameters (counted from mflux's classes).
KREA2_FULL = Krea2Dims(6144, 48, 12, 28, 4, 256, 2560, 12, 20, 20)


def _pipeline() -> type:
    from mflux.models.krea2.variants.txt2img.krea2 import Krea2

    return Krea2


def _weight_definition() -> type:
    from mflux.models.krea2.weights.krea2_weight_definition import Krea2WeightDefinition

    return Krea2WeightDefinition


def _lora_mapping() -> type:
    from mflux.models.krea2.weights.krea2_lora_mapping import Krea2LoRAMapping

    return Krea2LoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.krea2.latent_creator.krea2_latent_creator import Krea2LatentCreator

    return Krea2LatentCreator.unpack_latents(latents, height, width)  # already (1, 16, H/8, W/8)


FAMILY = Family(
    id="krea-2",
    display_name="Krea 2",
    short_name="Krea 2",
    order=50,
    activation_gb_per_megapixel=5.7,  # Krea 2 Turbo
    memory_measured_on="krea-2",
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.krea2",
    ),
    adapter="app.adapters.krea2",
    preview=LatentPreview(
        unpack=_unpack, factors=WAN21_FACTORS, bias=WAN21_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.krea2:shell",
        model_name="krea-2",
        tiny=KREA2_TINY,
        full=KREA2_FULL,
        cases=(
            # Turbo (guidance 1: no CFG) and CFG on " "; its stochastic sampler's noise is
            # seeded, so two passes draw alike
            ShellCase(
                "krea-2", "krea-2", 6, 1.0, tests=GATE_TESTS | {ShellTest.engine, ShellTest.preview}
            ),
            ShellCase(
                "krea-2-cfg",
                "krea-2",
                6,
                3.0,
                cfg=True,
                tests=GATE_TESTS | {ShellTest.residual, ShellTest.lora},
            ),
        ),
    ),
    # mflux's names (a Turbo single file, an mflux-save) and diffusers' (Krea 2 Raw's shards)
    folders=FolderDetection(prefixes=("txtfusion.", "tproj.", "text_fusion.", "time_mod_proj.")),
    img2img=True,
)
