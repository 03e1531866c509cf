"""FIBO 2: Bria's 8.1B JSON-caption text-to-image transformer, in mflux.

A single-stream Z-Image-style DiT (3584 wide, 44 blocks of 28 heads) over the FLUX.2 VAE's
latents (mflux loads FIBO 2's VAE as the FLUX.2 VAE: ``Fibo2WeightMapping.get_vae_mapping``).
Before block 0, two noise refiners run over the image tokens, and a 2-layer perceiver turns the
first of six stacked bundles of Qwen3-VL layers into 256–512 "gist" tokens that lead the stream;
five blocks cross-attend to the other five bundles.

FIBO 2 was trained on long structured JSON captions, FIBO's format, and also reads a plain-text
description (mflux's ``Fibo2PromptEncoder.format_prompt`` passes one through), so the window says
so and offers mflux's example caption. mflux refuses a prompt that starts like a JSON caption but
does not parse, or whose fields have the wrong types (``Fibo2CaptionCheck``): the same check
runs here before anything loads (``caption_problem``), in one sentence.

Its loop holds the FLUX.2 VAE's BatchNorm-normalized latents unpatchified, (1, 32, H/8, W/8):
``Fibo2LatentCreator.decode`` patchifies them 2×2 and decodes them as FLUX.2's packed latents,
and ``Flux2VAE._unpatchify_latents`` undoes that patchify exactly — the space FLUX.2's preview
projects after its own unpatchify, so FLUX.2's published table applies as it stands. The loop
steps ``config.scheduler``.

The edit pipelines (FIBO 2 Edit Turbo, issue #41) are another class (``Fibo2Edit``) and not
offered here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.families.fibo import MFLUX_EXAMPLE_CAPTION
from app.families.latent_rgb import FLUX2_BIAS, FLUX2_FACTORS
from app.families.spec import (
    Family,
    FolderDetection,
    LatentPreview,
    Mflux,
    PromptFormat,
    RandomWeights,
)

if TYPE_CHECKING:
    import mlx.core as mx


@dataclass(frozen=True)
class Fibo2Dims:
    """A FIBO 2 transformer's size (``Fibo2Transformer``'s keywords): fully parametric but for
    the perceiver's gist count, which mflux keeps at 256 or more whatever ``max_num_gist_tokens``
    says (``Fibo2Perceiver.min_gist``), so a shell keeps 256 queries at least."""

    dim: int
    n_layers: int
    n_refiner_layers: int
    n_heads: int
    cap_feat_dim: int  # one text bundle's features (three Qwen3-VL layers of 2560)
    injection_layer_ids: tuple[int, ...]  # the blocks that cross-attend to a bundle each
    perceiver_num_layers: int
    max_num_gist_tokens: int
    axes_dims: tuple[int, ...]  # sums to dim / n_heads

    def kwargs(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "n_layers": self.n_layers,
            "n_refiner_layers": self.n_refiner_layers,
            "n_heads": self.n_heads,
            "cap_feat_dim": self.cap_feat_dim,
            "injection_layer_ids": self.injection_layer_ids,
            "perceiver_num_layers": self.perceiver_num_layers,
            "max_num_gist_tokens": self.max_num_gist_tokens,
            "axes_dims": self.axes_dims,
        }

    @property
    def bundles(self) -> int:
        """The text encoder's bundles the transformer reads: the perceiver's and one per
        injection block."""
        return 1 + len(self.injection_layer_ids)


# Tiny: 128 wide, 3 blocks (block 1 injects the second bundle), the real refiner and perceiver
# depths; up to 320 gist tokens, so a caption of more than 256 tokens gets more gist tokens than a
# short one, as at real size (the shell's negative caption: a stream of its own length).
FIBO2_TINY = Fibo2Dims(128, 3, 2, 4, 64, (1,), 2, 320, (8, 12, 12))
# FIBO 2 as mflux builds it: ``Fibo2Transformer()``'s defaults (its config overrides none): 44
# blocks 3584 wide (28 heads × 128), 2 noise refiners, a 2-layer perceiver of up to 512 gist
# tokens, text bundles of 7680 (three Qwen3-VL-4B layers of 2560) injected at blocks 6, 14, 22,
# 30 and 38; 8.13B parameters (counted from mflux's classes).
FIBO2_FULL = Fibo2Dims(3584, 44, 2, 28, 7680, (6, 14, 22, 30, 38), 2, 512, (32, 48, 48))


def caption_problem(prompt: str) -> str | None:
    """mflux's FIBO 2 caption check (``Fibo2CaptionCheck.check``, as ``Fibo2.generate_image``
    runs it first) in one sentence: None for plain text or a caption FIBO 2 reads (its warnings,
    an unknown or missing field, are mflux's log lines, not refusals)."""
    from mflux.models.fibo2.model.fibo2_text_encoder.fibo2_caption_check import (
        Fibo2CaptionCheck,
    )

    try:
        Fibo2CaptionCheck.check(prompt, edit=False)
    except ValueError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return " ".join(lines)
    return None


PROMPT_FORMAT = PromptFormat(
    note=(
        "FIBO 2 follows a structured JSON caption (subject, objects, lighting, camera…) most "
        "closely; a plain description works too. Example puts in mflux's caption to edit."
    ),
    example=MFLUX_EXAMPLE_CAPTION,
)


def _pipeline() -> type:
    from mflux.models.fibo2.variants.txt2img.fibo2 import Fibo2

    return Fibo2


def _weight_definition() -> type:
    from mflux.models.fibo2.weights.fibo2_weight_definition import Fibo2WeightDefinition

    return Fibo2WeightDefinition


def _lora_mapping() -> type:
    from mflux.models.fibo2.weights.fibo2_lora_mapping import Fibo2LoRAMapping

    return Fibo2LoRAMapping


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    return latents  # already (1, 32, H/8, W/8): the FLUX.2 preview's space


FAMILY = Family(
    id="fibo2",
    display_name="FIBO 2",
    short_name="FIBO 2",
    order=82,
    # Borrowed until a FIBO 2 report is committed: its blocks are Z-Image's (the same block,
    # 3584 wide where Z-Image's are 3840) and its CFG runs the two branches in turn as Z-Image's.
    activation_gb_per_megapixel=11.8,
    memory_measured_on="z-image",
    memory_basis=(
        "FIBO 2's blocks are Z-Image's (3584 wide against 3840) and it runs CFG's branches in "
        "turn as Z-Image does; an H100 probe of one FIBO 2 forward at 1024² peaked 11.9 GB above "
        "its weights, where FLUX.2 Klein 4B's peaked 17.1 and its report measured 14.8"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=_lora_mapping,
        package="mflux.models.fibo2",
    ),
    adapter="app.adapters.fibo2",
    preview=LatentPreview(
        unpack=_unpack, factors=FLUX2_FACTORS, bias=FLUX2_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.fibo2:shell",
        model_name="fibo2",
        tiny=FIBO2_TINY,
        full=FIBO2_FULL,
    ),
    # The perceiver is FIBO 2's alone (Z-Image has noise refiners too)
    folders=FolderDetection(prefixes=("perceiver.",)),
    prompt_check="app.families.fibo2:caption_problem",
    prompt_format=PROMPT_FORMAT,
)
