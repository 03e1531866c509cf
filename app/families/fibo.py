"""FIBO and FIBO Lite: Bria's 8B JSON-native text-to-image transformer, in mflux.

FIBO is a FLUX-shaped MM-DiT (3072 wide, 8 joint + 38 single blocks, hard-coded width) whose text
stream is refreshed at every block with one of 46 SmolLM3-3B hidden layers ("DimFusion"), over
the 48-channel latents of the Wan 2.2 VAE at 16× (one token per latent pixel). It was trained on
long structured JSON captions only (Bria's model card; diffusers' FIBO page: "will not work with
freeform text prompts"), and mflux's FIBO pipeline takes nothing else
(``PromptEncoder.encode_prompt`` starts with ``json.loads(prompt)``); mflux's command line turns
plain text into a caption with a separate 8 GB vision-language model (FIBO-vlm), which the studio
does not run. So the window says so and offers mflux's example caption (``PROMPT_FORMAT``), and a
prompt that is not a JSON object is refused in one sentence before anything loads
(``json_caption_problem``).

Its loop holds the Wan 2.2 VAE's normalized latents, packed one latent pixel per token;
``Wan2_2_VAE.decode`` undoes the per-channel mean and std that ComfyUI's ``Wan22`` latent format
normalizes by (the same 48 values), so ComfyUI's published Wan 2.2 table applies
(``WAN22_FACTORS``, kept here: the Wan 2.2 latent space is FIBO's alone among the families). The
loop steps ``config.scheduler``.

mflux maps no LoRA for FIBO (``FIBOInitializer`` takes none: "mflux has no LoRA mapping for
FIBO"), so the family takes none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.families.spec import (
    Family,
    FolderDetection,
    LatentPreview,
    Mflux,
    PromptFormat,
    RandomWeights,
    RGBFactors,
)
from app.fileio.jsonio import dumps_json

if TYPE_CHECKING:
    import mlx.core as mx


@dataclass(frozen=True)
class FiboDims:
    """A FIBO transformer's size: the width (3072), heads (24 × 128) and the 2048-wide caption
    layers are hard-coded in mflux; only the block counts are free (``FiboTransformer``'s
    ``num_layers`` and ``num_single_layers``)."""

    num_layers: int  # joint (double-stream) blocks
    num_single_layers: int

    def kwargs(self) -> dict[str, int]:
        return {"num_layers": self.num_layers, "num_single_layers": self.num_single_layers}

    @property
    def blocks(self) -> int:
        return self.num_layers + self.num_single_layers


# The smallest FIBO mflux builds: one block of each kind at the hard-coded 3072 width (about 0.5B
# parameters with its embedders, 2 GB in float32).
FIBO_TINY = FiboDims(1, 1)
# FIBO and FIBO Lite as mflux builds them (``FiboTransformer()``'s defaults; no config overrides
# them): 8 joint + 38 single blocks, 8.29B parameters (counted from mflux's classes).
FIBO_FULL = FiboDims(8, 38)
# The hidden layers mflux's prompt encoder always hands the transformer, one per block of the real
# model (``PromptEncoder``: ``total_num_layers_transformer = 46``), whatever the shell's size.
CAPTION_LAYERS = 46

# Source: ComfyUI, comfy/latent_formats.py, commit 9a9a69fd745de98e89b0f1a629cd3bc43d513a42
# (github.com/Comfy-Org/ComfyUI), class ``Wan22``: 48 channels at 16×, ``rgb = latent · factors +
# bias`` on the sampler's space, which ``Wan22.process_in`` (``Wan21``'s, scale 1) normalizes by
# the per-channel mean and std that mflux's ``Wan2_2_VAE.decode`` undoes (the same 48 pairs:
# ``Wan2_2_VAE.LATENTS_MEAN``/``LATENTS_STD``).
# fmt: off
WAN22_FACTORS: RGBFactors = (
    (0.0119, 0.0103, 0.0046), (-0.1062, -0.0504, 0.0165), (0.0140, 0.0409, 0.0491),
    (-0.0813, -0.0677, 0.0607), (0.0656, 0.0851, 0.0808), (0.0264, 0.0463, 0.0912),
    (0.0295, 0.0326, 0.0590), (-0.0244, -0.0270, 0.0025), (0.0443, -0.0102, 0.0288),
    (-0.0465, -0.0090, -0.0205), (0.0359, 0.0236, 0.0082), (-0.0776, 0.0854, 0.1048),
    (0.0564, 0.0264, 0.0561), (0.0006, 0.0594, 0.0418), (-0.0319, -0.0542, -0.0637),
    (-0.0268, 0.0024, 0.0260), (0.0539, 0.0265, 0.0358), (-0.0359, -0.0312, -0.0287),
    (-0.0285, -0.1032, -0.1237), (0.1041, 0.0537, 0.0622), (-0.0086, -0.0374, -0.0051),
    (0.0390, 0.0670, 0.2863), (0.0069, 0.0144, 0.0082), (0.0006, -0.0167, 0.0079),
    (0.0313, -0.0574, -0.0232), (-0.1454, -0.0902, -0.0481), (0.0714, 0.0827, 0.0447),
    (-0.0304, -0.0574, -0.0196), (0.0401, 0.0384, 0.0204), (-0.0758, -0.0297, -0.0014),
    (0.0568, 0.1307, 0.1372), (-0.0055, -0.0310, -0.0380), (0.0239, -0.0305, 0.0325),
    (-0.0663, -0.0673, -0.0140), (-0.0416, -0.0047, -0.0023), (0.0166, 0.0112, -0.0093),
    (-0.0211, 0.0011, 0.0331), (0.1833, 0.1466, 0.2250), (-0.0368, 0.0370, 0.0295),
    (-0.3441, -0.3543, -0.2008), (-0.0479, -0.0489, -0.0420), (-0.0660, -0.0153, 0.0800),
    (-0.0101, 0.0068, 0.0156), (-0.0690, -0.0452, -0.0927), (-0.0145, 0.0041, 0.0015),
    (0.0421, 0.0451, 0.0373), (0.0504, -0.0483, -0.0356), (-0.0837, 0.0168, 0.0055),
)
# fmt: on
WAN22_BIAS: tuple[float, float, float] = (0.0317, -0.0878, -0.1388)

# The caption mflux's FIBO README ships as its example (src/mflux/models/fibo/README.md,
# "animal_bakers.json", written by FIBO-vlm from a one-line description; mflux commit
# 0c78253e8e8d344012d1f2452c000d6deff9903a: the README is not in the wheel), verbatim.
MFLUX_EXAMPLE_CAPTION = """{
  "short_description": "Three cartoon animal chefs are in a bakery kitchen, each holding a culinary creation. A bunny chef on the left presents a chocolate cake, a raccoon chef in the center is frosting cupcakes, and a penguin chef on the right carries a tray of croissants. The kitchen is brightly lit with warm tones, and flour dusts the air, creating a lively and cheerful baking atmosphere.",
  "objects": [
    {
      "description": "A cartoon bunny wearing a white chef's hat and a pink apron, holding a chocolate cake with white frosting and cherries.",
      "location": "left foreground",
      "relationship": "The bunny chef is presenting the chocolate cake.",
      "relative_size": "medium",
      "shape_and_color": "Rounded bunny shape, white hat, pink apron, brown cake, white frosting, red cherries.",
      "texture": "smooth",
      "appearance_details": "Floppy ears, rosy cheeks, smiling expression.",
      "pose": "Standing upright, holding the cake with both hands.",
      "expression": "Joyful and proud.",
      "clothing": "White chef's hat, pink apron.",
      "action": "Holding and presenting a cake.",
      "gender": "female",
      "skin_tone_and_texture": "White fur, smooth texture.",
      "orientation": "Upright, facing forward."
    },
    {
      "description": "A cartoon raccoon wearing blue oven mitts and a yellow bandana, actively frosting cupcakes with pink and yellow frosting.",
      "location": "center midground",
      "relationship": "The raccoon chef is in the process of frosting cupcakes.",
      "relative_size": "medium",
      "shape_and_color": "Distinct raccoon shape, blue mitts, yellow bandana, pink and yellow frosting, brown cupcakes.",
      "texture": "smooth",
      "appearance_details": "Striped tail, bushy fur, focused expression.",
      "pose": "Leaning forward slightly, hands busy frosting.",
      "expression": "Concentrated and happy.",
      "clothing": "Blue oven mitts, yellow bandana.",
      "action": "Frosting cupcakes.",
      "gender": "male",
      "skin_tone_and_texture": "Brown and black fur, smooth texture.",
      "orientation": "Upright, slightly angled."
    },
    {
      "description": "A cartoon penguin wearing a red bowtie and a checkered apron, carrying a tray of golden croissants.",
      "location": "right foreground",
      "relationship": "The penguin chef is carrying a tray of freshly baked croissants.",
      "relative_size": "medium",
      "shape_and_color": "Classic penguin shape, red bowtie, red and white apron, golden croissants.",
      "texture": "smooth",
      "appearance_details": "Black and white body, orange beak and feet, smiling expression.",
      "pose": "Standing upright, holding the tray with both hands.",
      "expression": "Cheerful and friendly.",
      "clothing": "Red bowtie, checkered apron.",
      "action": "Carrying a tray of croissants.",
      "gender": "male",
      "skin_tone_and_texture": "Feathered texture, smooth appearance.",
      "orientation": "Upright, facing forward."
    }
  ],
  "background_setting": "A brightly lit bakery kitchen with wooden countertops, shelves stocked with baking ingredients and equipment, and a window in the background. Flour is lightly dusted in the air.",
  "lighting": {
    "conditions": "warm indoor lighting",
    "direction": "front-lit and side-lit",
    "shadows": "soft, diffused shadows"
  },
  "aesthetics": {
    "composition": "centered composition with the three chefs forming a horizontal line",
    "color_scheme": "warm and cheerful, with dominant browns, yellows, pinks, and whites",
    "mood_atmosphere": "joyful, friendly, and inviting",
    "aesthetic_score": "very high",
    "preference_score": "very high"
  },
  "photographic_characteristics": {
    "depth_of_field": "shallow",
    "focus": "sharp focus on the chefs and their creations",
    "camera_angle": "eye-level",
    "lens_focal_length": "standard lens"
  },
  "style_medium": "digital illustration",
  "text_render": [],
  "context": "This image is a charming illustration, likely for a children's book, educational material, or a bakery-themed advertisement, designed to evoke feelings of happiness and the joy of baking.",
  "artistic_style": "Pixar-style animation"
}"""  # noqa: E501

# Suggested calibration prompts, one line each (Calibrate reads a prompt per line): the general
# list's subjects as JSON captions holding a short description alone, which FIBO reads (any JSON
# object parses; FIBO-vlm writes fuller ones), as different from each other as the general list.
_SUBJECTS = (
    "A red apple on a wooden table.",
    "A mountain landscape at sunset.",
    "A portrait of an old man with a beard.",
    "Abstract colorful circles.",
    'A sign with the text saying "HELLO".',
    "A futuristic city skyline at night.",
    "A watercolor painting of a cat.",
    "A steampunk airship above the clouds.",
    "A macro photo of a butterfly on a flower.",
    "A neon-lit rainy street.",
)
CALIBRATION_CAPTIONS = tuple(dumps_json({"short_description": s}) for s in _SUBJECTS)


def json_caption_problem(prompt: str) -> str | None:
    """Why FIBO cannot draw ``prompt`` in one sentence (it reads JSON captions only); None for a
    JSON object, which mflux's encoder takes."""
    try:
        caption = json.loads(prompt)
    except json.JSONDecodeError as exc:
        if prompt.lstrip().startswith("{"):
            return (
                f"the prompt starts like a JSON caption but is not valid JSON ({exc.msg} at line "
                f"{exc.lineno}, column {exc.colno})"
            )
        return (
            "FIBO draws from a JSON caption, not plain text: start from mflux's example caption "
            "(Example, beside the prompt) and describe your picture in its fields"
        )
    if not isinstance(caption, dict):
        return "FIBO draws from a JSON caption, an object in braces, not a bare JSON value"
    return None


PROMPT_FORMAT = PromptFormat(
    note=(
        "FIBO reads a structured JSON caption (subject, objects, lighting, camera…), not plain "
        "text. Example puts in mflux's caption to edit."
    ),
    example=MFLUX_EXAMPLE_CAPTION,
)


def _pipeline() -> type:
    from mflux.models.fibo.variants.txt2img.fibo import FIBO

    return FIBO


def _weight_definition() -> type:
    from mflux.models.fibo.weights.fibo_weight_definition import FIBOWeightDefinition

    return FIBOWeightDefinition


def _unpack(latents: mx.array, height: int, width: int) -> mx.array:
    from mflux.models.fibo.latent_creator.fibo_latent_creator import FiboLatentCreator

    return FiboLatentCreator.unpack_latents(latents, height, width)  # (1, 48, H/16, W/16)


FAMILY = Family(
    id="fibo",
    display_name="FIBO",
    short_name="FIBO",
    order=80,
    # Borrowed until a FIBO report is committed: FIBO runs classifier-free guidance as one batch
    # of two (both branches through every block at once), FLUX.1's 3072-wide blocks at twice the
    # batch, about 2 × FLUX.1 dev's 8.1; the largest measured figure does not understate that.
    activation_gb_per_megapixel=18.6,
    memory_measured_on="qwen-image-2.1",
    memory_basis=(
        "FIBO runs CFG as one batch of both branches through FLUX.1-wide blocks (about twice "
        "FLUX.1 dev's 8.1 GB/MP); Qwen-Image 2.1's 18.6, the largest measured, does not "
        "understate it (an H100 probe of one FIBO branch at 1024² peaked 13.1 GB above its "
        "weights)"
    ),
    mflux=Mflux(
        pipeline=_pipeline,
        weight_definition=_weight_definition,
        lora_mapping=None,  # mflux maps no LoRA for FIBO
        package="mflux.models.fibo",
    ),
    adapter="app.adapters.fibo",
    preview=LatentPreview(
        unpack=_unpack, factors=WAN22_FACTORS, bias=WAN22_BIAS, packed_channels=None
    ),
    random_weights=RandomWeights(
        builder="app.adapters.fibo:shell",
        model_name="fibo",
        tiny=FIBO_TINY,
        full=FIBO_FULL,
    ),
    # The 46 caption projections are FIBO's alone (mflux-save and diffusers name them alike);
    # FIBO and FIBO Lite share the architecture
    folders=FolderDetection(prefixes=("caption_projection.",)),
    prompt_check="app.families.fibo:json_caption_problem",
    calibration_prompts=CALIBRATION_CAPTIONS,
    prompt_format=PROMPT_FORMAT,
)
