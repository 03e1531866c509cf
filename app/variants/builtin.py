"""The built-in variants: the mflux families' published gate numbers and the embedded demo pair.

A table of plain data; the demo pair's calibration is read from its committed JSON next to the
weights (``app.paths.DEMO_DIR``). No MLX, no mflux.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.families import (
    anima,
    demo,
    ernie_image,
    fibo,
    fibo2,
    flux1,
    flux2,
    flux3,
    krea2,
    lens,
    moss_image,
    qwen_image,
    qwen_image21,
    z_image,
)
from app.paths import DEMO_DIR
from app.variants.catalog import (
    MagCacheCalibration,
    Provenance,
    Variant,
    calibrated_range_from_json,
    magcache_from_document,
)

_UPSTREAM_FLUX1 = (498.651651244, -283.781631, 55.8554382, -3.82021401, 0.264230861)
_KLEIN_BASE = (-1841.022165607874, 848.4417137572868, -131.3554469956159, 8.179509586828413, 0.0)
_KLEIN_BASE_RANGE = (0.028261, 0.219845)
_Z_IMAGE = (-898.9907628349583, 367.7086118008557, -45.41511572598643, 3.95114319842774, 0.0)
_Z_IMAGE_RANGE = (0.027887, 0.259141)
_MLX_TEACACHE = "IonDen/mlx-teacache"
_UPSTREAM = "ali-vilab/TeaCache, TeaCache4FLUX/teacache_flux.py"
# Published MagCache tables, copied from the reference at Zehong-Ma/MagCache
# df81cb181776c2c61477c08e1d21f87fda1cd938 (arXiv:2506.09045).
_MAGCACHE_REF = "Zehong-Ma/MagCache @ df81cb1"
# MagCache4FLUX/magcache_flux.py, ``mag_ratios`` for FLUX.1-dev at 28 steps ([1.0] pad + 27),
# recipe E024K5R01 (threshold 0.24, K 5, retention 0.1); the forward never skips step 11 of 28.
# fmt: off
_MAGCACHE_FLUX1_DEV = MagCacheCalibration(
    ratios=(
        1.0, 1.21094, 1.11719, 1.07812, 1.0625, 1.03906, 1.03125, 1.03906, 1.02344, 1.03125,
        1.02344, 0.98047, 1.01562, 1.00781, 1.0, 1.00781, 1.0, 1.00781, 1.0, 1.0, 0.99609,
        0.99609, 0.98047, 0.98828, 0.96484, 0.95703, 0.93359, 0.89062,
    ),
    default_threshold=0.24,
    retention_ratio=0.1,
    max_consecutive_skips=5,
    always_compute=(11,),
    provenance=Provenance(
        source=f"published table ({_MAGCACHE_REF}, MagCache4FLUX/magcache_flux.py)",
        data_size="FLUX.1-dev, 28 steps, one calibration prompt (diffusers, bf16)",
        reference="arXiv:2506.09045",
        notes="reference speed-up 2.8× on an A800 at E024K5R01; resampled (nearest) to other "
        "step counts as the reference does",
    ),
)
# fmt: on
# MagCache4QwenImage/magcache_generate.py, ``mag_ratios`` for Qwen/Qwen-Image at 50 steps: the
# published list interleaves the cond/uncond columns, which are equal; this is the cond column
# with the [1.0] pad. Recipe E006K2R02 (threshold 0.06, K 2, retention 0.2).
# fmt: off
_MAGCACHE_QWEN_IMAGE = MagCacheCalibration(
    ratios=(
        1.0, 1.64062, 1.45312, 1.1875, 1.17188, 1.05469, 1.21094, 1.10938, 1.11719, 1.13281,
        1.11719, 1.07812, 1.07031, 1.08594, 1.08594, 1.07812, 1.03906, 1.04688, 1.07812, 1.07031,
        1.03125, 1.07812, 1.04688, 1.04688, 1.04688, 1.03906, 1.01562, 1.03125, 1.02344, 1.02344,
        1.02344, 1.03906, 1.0, 1.01562, 1.0, 0.99219, 1.00781, 0.98047, 0.95703, 0.96875,
        0.99219, 0.92578, 0.92578, 0.90625, 0.85938, 0.80469, 0.87891, 0.75, 0.60938, 0.55078,
    ),
    default_threshold=0.06,
    retention_ratio=0.2,
    max_consecutive_skips=2,
    provenance=Provenance(
        source=f"published table ({_MAGCACHE_REF}, MagCache4QwenImage/magcache_generate.py)",
        data_size="Qwen/Qwen-Image, 50 steps, CFG 4 (cond column; the uncond column is equal)",
        reference="arXiv:2506.09045",
        notes="measured on Qwen/Qwen-Image; mflux 0.24 loads Qwen-Image-2512 (uncalibrated). The "
        "reference's Qwen forward compares with < where the FLUX one uses <=; the app applies the "
        "FLUX rule to every family",
    ),
)
# fmt: on
_STEP_DISTILLED = "step-distilled: a few large strides, each changing the output too much to reuse"
# This year's models (issue #29): no published TeaCache or MagCache calibration exists for them;
# the first-block probe needs none, and ``calibrate`` makes a TeaCache or MagCache one.
_UNCALIBRATED = "no calibration published for this model"
_UNMEASURED = (
    "measured per run: the first-block probe compares each step's first block with the last"
)


def _uncalibrated(variant_id: str, name: str) -> Provenance:
    return Provenance(
        source=f"{_UNCALIBRATED} ({name}, mflux 0.24.0)",
        notes=(
            "no TeaCache or MagCache numbers: the first-block probe needs none; "
            f"`teacache-studio calibrate --variant {variant_id}` measures a TeaCache fit and "
            f"`--gate magcache` a MagCache table ({variant_id}+<name>)"
        ),
    )


def _this_years() -> list[Variant]:
    """FLUX.3 Image Klein, Qwen-Image 2.1 and Krea 2 (issue #29). Steps, guidance and sizes are
    mflux's own (``cli/defaults/defaults.py::MODEL_INFERENCE_STEPS``, each family's CLI and
    ``generate_image`` defaults); the Hub repos are mflux's ``ModelConfig.model_name``; parameters
    are counted from mflux's classes at their real sizes (transformer + text encoder + VAE)."""
    return [
        Variant(
            id="flux3-image-klein",
            display_name="FLUX.3 Image Klein",
            family=flux3.FAMILY,
            distilled=True,
            distilled_reason=(
                "distilled to a 16-step flow map (each step jumps to the next step's time), not "
                "a 4-step schedule: 16 steps leave room to skip, but no calibration says by how "
                f"much; {_UNMEASURED}"
            ),
            default_steps=16,
            default_guidance=None,  # guidance-distilled: mflux passes none
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("flux3-image-klein", "FLUX.3 Image Klein"),
            hf_repo="black-forest-labs/flux-3-image-klein",
            gated_repo=True,  # accepted on the model page
            licence="FLUX Kommunity License",
            params_billion=9.25,  # 5.55B transformer, 3.62B Qwen3-VL-4B (32 layers), 0.08B VAE
            mflux_name="flux3-image-klein",
            base_variant="flux3-image-klein-base",
        ),
        Variant(
            id="flux3-image-klein-base",
            display_name="FLUX.3 Image Klein base",
            family=flux3.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=3.5,  # mflux's --guidance default for the base
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("flux3-image-klein-base", "FLUX.3 Image Klein base"),
            hf_repo="black-forest-labs/flux-3-image-klein-base",
            gated_repo=True,
            licence="FLUX Kommunity License",
            params_billion=9.24,  # no target-time embedder: 5.54B transformer
            mflux_name="flux3-image-klein-base",
            cfg=True,  # the unconditional branch is the empty prompt
        ),
        Variant(
            id="qwen-image-2.1",
            display_name="Qwen-Image 2.1",
            family=qwen_image21.FAMILY,
            distilled=False,
            default_steps=40,
            # Sampled without guidance (mflux's default 1.0): mflux runs CFG only with a negative
            # prompt, which the studio does not send, so no guidance value would change the image
            default_guidance=None,
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("qwen-image-2.1", "Qwen-Image 2.1"),
            hf_repo="Qwen/Qwen-Image-2.1",
            params_billion=15.01,  # 7.12B transformer, 7.57B Qwen3-VL-8B, 0.33B VAE
            unquantized_billion=7.57,  # mflux never quantizes its text encoder (skip_quantization)
            mflux_name="qwen-image-2.1",
            licence="Qwen Research License (non-commercial use only)",
        ),
        Variant(
            id="qwen-image-2.1-turbo",
            display_name="Qwen-Image 2.1 Turbo",
            family=qwen_image21.FAMILY,
            distilled=True,
            distilled_reason=(
                "step-distilled to 8 steps on fixed sigma nodes (1.0 to 0.41, then 0) whose last "
                f"strides are the largest; no calibration exists for it; {_UNMEASURED}"
            ),
            default_steps=8,
            default_guidance=None,  # runs without CFG: mflux refuses any guidance but 1
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("qwen-image-2.1-turbo", "Qwen-Image 2.1 Turbo"),
            hf_repo="Qwen/Qwen-Image-2.1-Turbo",
            params_billion=15.01,
            unquantized_billion=7.57,
            mflux_name="qwen-image-2.1-turbo",
            base_variant="qwen-image-2.1",
            licence="Qwen Research License (non-commercial use only)",
        ),
        Variant(
            id="krea-2",
            display_name="Krea 2 Turbo",
            family=krea2.FAMILY,
            distilled=True,
            distilled_reason=(
                "distilled to 8 steps (trajectory distribution matching) with a stochastic "
                f"sampler (ER-SDE); no calibration exists for it; {_UNMEASURED}"
            ),
            default_steps=8,
            default_guidance=1.0,  # mflux's Turbo default: no CFG (above 1: CFG on " ")
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("krea-2", "Krea 2 Turbo"),
            hf_repo="krea/Krea-2-Turbo",
            gated_repo=True,  # mflux says to accept its terms
            licence="Krea 2 Community License",
            params_billion=16.97,  # 12.82B transformer, 4.02B Qwen3-VL-4B, 0.13B VAE
            unquantized_billion=4.02,  # mflux never quantizes its text encoder (skip_quantization)
            mflux_name="krea-2",
            notes=(
                "Krea 2 Raw, the undistilled checkpoint, is for training, not inference (Krea): "
                "no base variant to suggest",
            ),
        ),
    ]


# Anima's licence (model card of circlestone-labs/Anima, read there; mflux does not name it): the
# weights are for non-commercial use, commercial use under a separate licence from CircleStone
# Labs (the repo's licence discussion, #58). Its Hub repo is not gated.
_ANIMA_LICENCE = "Anima model licence (non-commercial use; commercial use licensed separately)"


def _anima() -> list[Variant]:
    """Anima's three transformers (issue #40), one Hub repo of ComfyUI single files. Steps and
    guidance are mflux's (``Anima.DEFAULT_STEPS`` / ``DEFAULT_GUIDANCE``, from the model card);
    parameters counted from mflux's classes at real size: 2.09B transformer (the 0.13B LLM
    adapter included), 0.60B Qwen3-0.6B text encoder, 0.13B Qwen-Image VAE. mflux keeps the text
    encoder and the transformer's LLM adapter, timestep embedding and AdaLN modulations dense at
    every quantization (``AnimaWeightDefinition``: 0.60B + 0.33B)."""
    common = {
        "family": anima.FAMILY,
        "coefficients": None,
        "default_threshold": None,
        "hf_repo": "circlestone-labs/Anima",
        "licence": _ANIMA_LICENCE,
        "params_billion": 2.81,
        "unquantized_billion": 0.93,
    }
    return [
        Variant(
            id="anima-turbo",
            display_name="Anima Turbo",
            distilled=True,
            distilled_reason=(
                "distilled for 8 to 12 steps without CFG (model card); 10 steps leave room to "
                f"skip, but no calibration says how much; {_UNMEASURED}"
            ),
            default_steps=10,
            default_guidance=1.0,  # mflux's Turbo default: no CFG (above 1: CFG on "")
            provenance=_uncalibrated("anima-turbo", "Anima Turbo"),
            mflux_name="anima-turbo",
            base_variant="anima-aesthetic",
            **common,
        ),
        Variant(
            id="anima-aesthetic",
            display_name="Anima Aesthetic",
            distilled=False,
            default_steps=30,
            default_guidance=4.0,
            provenance=_uncalibrated("anima-aesthetic", "Anima Aesthetic"),
            mflux_name="anima-aesthetic",
            cfg=True,  # the unconditional branch is the empty prompt
            **common,
        ),
        Variant(
            id="anima-base",
            display_name="Anima Base",
            distilled=False,
            default_steps=30,
            default_guidance=4.0,
            provenance=_uncalibrated("anima-base", "Anima Base"),
            mflux_name="anima-base",
            cfg=True,
            notes=("the checkpoint to train LoRAs on; a plainer default style than Aesthetic",),
            **common,
        ),
    ]


def _moss_image() -> list[Variant]:
    """MOSS-Image SFT and Base (issue #40): mflux's defaults (``MOSSImage.DEFAULT_STEPS`` 50,
    ``DEFAULT_GUIDANCE`` 3, CFG on the empty prompt with layer 22 skipped in that branch) and
    repos; parameters counted from mflux's classes at real size: 5.08B transformer, 7.94B
    Qwen3.5 text model (the vision tower is not loaded), 0.06B FLUX.2 VAE with the small decoder;
    mflux quantizes the transformer and the text encoder. Licence: Apache 2.0, an open one (the
    SFT's model card, as mflux's README gives it; the project, OpenMOSS/MOSS-Image, is Apache
    2.0 too; the Base's card was not readable offline)."""
    return [
        Variant(
            id=variant_id,
            display_name=name,
            family=moss_image.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=3.0,
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated(variant_id, name),
            hf_repo=repo,
            params_billion=13.08,
            mflux_name=variant_id,
            cfg=True,  # the unconditional branch: the empty prompt, layer 22 skipped
            notes=notes,
        )
        for variant_id, name, repo, notes in (
            ("moss-image-sft", "MOSS-Image SFT", "OpenMOSS-Team/MOSS-Image-SFT", ()),
            (
                "moss-image-base",
                "MOSS-Image Base",
                "OpenMOSS-Team/MOSS-Image-Base",
                ("the SFT's base checkpoint: the same architecture, other transformer weights",),
            ),
        )
    ]


def _ernie_image() -> list[Variant]:
    """ERNIE-Image and its Turbo (issue #40): steps from mflux's ``MODEL_INFERENCE_STEPS``,
    guidance from each of its two commands (base ``--guidance`` 4.0; Turbo refuses any but 1.0),
    the size from ``generate_image``; the Hub repos are ``ModelConfig.model_name``. Parameters are
    counted from mflux's classes at real size: ``ErnieTransformer()`` 8.03B, the Ministral-3B
    text encoder (``ErnieMistralTextEncoder``) 3.43B, ``Flux2VAE`` 0.08B; mflux quantizes all
    three. Both repos say Apache 2.0 on their model cards (as reported of them; not readable
    here offline): an open licence, so no ``licence`` is recorded and nothing is gated."""
    return [
        Variant(
            id="ernie-image",
            display_name="ERNIE-Image",
            family=ernie_image.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,  # mflux-generate-ernie-image's --guidance default
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("ernie-image", "ERNIE-Image"),
            hf_repo="baidu/ERNIE-Image",
            params_billion=11.55,
            mflux_name="ernie-image",
            # both branches in one transformer call of batch 2 ([negative " ", prompt])
            cfg=True,
        ),
        Variant(
            id="ernie-image-turbo",
            display_name="ERNIE-Image Turbo",
            family=ernie_image.FAMILY,
            distilled=True,
            distilled_reason=(
                "step- and guidance-distilled to 8 steps (mflux refuses any guidance but 1); no "
                f"calibration exists for it; {_UNMEASURED}"
            ),
            default_steps=8,
            default_guidance=None,  # guidance-distilled: mflux's Turbo command passes 1.0 only
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("ernie-image-turbo", "ERNIE-Image Turbo"),
            hf_repo="baidu/ERNIE-Image-Turbo",
            params_billion=11.55,
            mflux_name="ernie-image-turbo",
            base_variant="ernie-image",
        ),
    ]


def _lens() -> list[Variant]:
    """Lens Turbo (issue #40), mflux's one Lens variant: 4 steps (``MODEL_INFERENCE_STEPS``), no
    guidance (``LensImage.generate_image`` takes none), 1024² (its default); the Hub repo is
    ``ModelConfig.model_name``, the DiT's. Parameters counted from mflux's classes at real size:
    ``LensTransformer()`` 4.10B and ``Flux2VAE`` 0.08B, quantizable; the GPT-OSS 20B encoder
    (20.9B parameters, mflux's ``GptOssModel`` at GPT-OSS-20B's config: 24 layers, 32 experts)
    ships pre-quantized and no ``quantize`` changes it: its 11.45 GB in memory (19.12B expert
    weights at MXFP4's 4.25 bits, 1.22B other matrices at 8-bit's 8.5, the repo's name's recipe
    assumed; lm_head dropped by mflux) counted as 5.73B parameters at 16 bits
    (``unquantized_billion``)."""
    return [
        Variant(
            id="lens-turbo",
            display_name="Lens Turbo",
            family=lens.FAMILY,
            distilled=True,
            distilled_reason=(
                "distilled to 4 steps with guidance internalized (mflux's Lens README); no "
                f"calibration exists for it; {_UNMEASURED}"
            ),
            default_steps=4,
            default_guidance=None,  # LensImage.generate_image takes no guidance
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("lens-turbo", "Lens Turbo"),
            hf_repo="Comfy-Org/Lens",
            licence=(
                "Lens licence (not known here: Microsoft withdrew its release, Comfy-Org "
                "mirrors the weights)"
            ),
            params_billion=9.91,
            unquantized_billion=5.73,
            mflux_name="lens-turbo",
            notes=(
                "mflux configures no undistilled Lens (Microsoft's base was withdrawn): no base "
                "variant to suggest",
                "mflux assembles Lens from three repositories: the studio downloads and checks "
                "the DiT (Comfy-Org/Lens); mflux fetches the GPT-OSS 20B encoder "
                "(mlx-community/gpt-oss-20b-MXFP4-Q8) and FLUX.2 Klein 4B's VAE itself on the "
                "first load",
            ),
        ),
    ]


# Bria's FIBO cards: briaai/FIBO's is gated (a form to accept), under the "bria-fibo" licence, CC
# BY-NC 4.0: non-commercial use only (read on its model card). FIBO Lite's card was not read here
# (offline), nor FIBO 2's (briaai/Fibo-2.0-dev); they are taken to be the same, as Bria's FIBO
# cards share the gate and the licence (a FIBO 2 mirror names "bria-fibo" too).
_BRIA_FIBO = "Bria FIBO licence (CC BY-NC 4.0, non-commercial use only)"


def _fibo() -> list[Variant]:
    """FIBO, FIBO Lite and FIBO 2 (issue #40). Steps are mflux's ``MODEL_INFERENCE_STEPS``;
    guidance its own defaults (``fibo_generate.py``: 5 for FIBO; FIBO Lite runs at 1 whatever is
    asked, ``FIBO.generate_image``; ``_Fibo2Core.DEFAULT_GUIDANCE`` 5); the Hub repos are
    ``ModelConfig.model_name``; parameters counted from mflux's classes at real size (FIBO: 8.29B
    transformer, 3.08B SmolLM3-3B, 0.69B Wan 2.2 VAE). mflux's FIBO 2 command also runs Edit Turbo
    from a caption; the edit checkpoints are issue #41's."""
    return [
        Variant(
            id="fibo",
            display_name="FIBO",
            family=fibo.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=5.0,
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("fibo", "FIBO"),
            hf_repo="briaai/FIBO",
            gated_repo=True,  # a form to fill on the model page
            licence=_BRIA_FIBO,
            params_billion=12.05,
            mflux_name="fibo",
            cfg=True,  # both branches in one call, a batch of two
        ),
        Variant(
            id="fibo-lite",
            display_name="FIBO Lite",
            family=fibo.FAMILY,
            distilled=True,
            distilled_reason=(
                "distilled in two stages (classifier-free guidance, then SCFM) to 8 steps without "
                f"guidance; no calibration exists for it; {_UNMEASURED}"
            ),
            default_steps=8,
            default_guidance=None,  # mflux runs FIBO Lite at guidance 1 whatever is asked
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("fibo-lite", "FIBO Lite"),
            hf_repo="briaai/Fibo-lite",
            gated_repo=True,
            licence=_BRIA_FIBO,
            params_billion=12.05,
            mflux_name="fibo-lite",
            base_variant="fibo",
        ),
        Variant(
            id="fibo2",
            display_name="FIBO 2",
            family=fibo2.FAMILY,
            distilled=False,
            default_steps=50,  # mflux's MODEL_INFERENCE_STEPS
            default_guidance=5.0,  # _Fibo2Core.DEFAULT_GUIDANCE (the model card's)
            default_threshold=None,
            coefficients=None,
            provenance=_uncalibrated("fibo2", "FIBO 2"),
            hf_repo="briaai/Fibo-2.0-dev",
            gated_repo=True,
            licence=_BRIA_FIBO,
            # 8.13B transformer, 4.34B Qwen3-VL-4B (with its vision tower), 0.08B FLUX.2 VAE
            params_billion=12.55,
            mflux_name="fibo2",
            cfg=True,  # the negative caption's pass after the caption's, as mflux runs them
        ),
    ]


def _builtin() -> list[Variant]:
    flux1_prov = Provenance(
        source=f"upstream TeaCache FLUX.1 fit ({_UPSTREAM}), as vendored by {_MLX_TEACACHE}",
        notes="no published R² for this fit",
        reference="arXiv:2411.19108",
    )
    return [
        Variant(
            id="flux1-dev",
            display_name="FLUX.1 dev",
            family=flux1.FAMILY,
            distilled=False,
            default_steps=25,
            default_guidance=3.5,
            default_threshold=0.20,
            coefficients=_UPSTREAM_FLUX1,
            provenance=flux1_prov,
            hf_repo="black-forest-labs/FLUX.1-dev",
            gated_repo=True,
            licence="FLUX.1 [dev] Non-Commercial License",
            params_billion=16.8,
            mflux_name="dev",
            notes=(
                "guidance-distilled only, not step-distilled: a 25-step schedule still engages",
                "0.20 skips 6 of 25 steps on the mlx-teacache bench recipe",
            ),
            magcache=_MAGCACHE_FLUX1_DEV,
        ),
        Variant(
            id="flux1-schnell",
            display_name="FLUX.1 schnell",
            family=flux1.FAMILY,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; at its 4-step default only 2 steps are gate-eligible and the "
                "FLUX.1 polynomial never predicts below about 0.18"
            ),
            default_steps=4,
            default_guidance=None,
            default_threshold=None,
            coefficients=_UPSTREAM_FLUX1,
            provenance=flux1_prov,
            hf_repo="black-forest-labs/FLUX.1-schnell",
            params_billion=16.8,
            mflux_name="schnell",
            base_variant="flux1-dev",
            min_predicted_change=0.18,
        ),
        Variant(
            id="flux1-krea-dev",
            display_name="FLUX.1 Krea dev",
            family=flux1.FAMILY,
            distilled=False,
            default_steps=28,
            default_guidance=4.5,
            default_threshold=0.30,
            coefficients=(
                24.18037744588824,
                -45.41912128506917,
                26.20213376107934,
                -3.579234954660995,
                0.40140693642366004,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} free fit on Krea pairs",
                fit_metric="R²",
                fit_value=0.68,
                data_size="270 pairs (10 prompts × 28 steps, g=4.5, q4)",
                notes="the FLUX.1-dev tuple scored R² −496 on the same pairs",
            ),
            hf_repo="black-forest-labs/FLUX.1-Krea-dev",
            gated_repo=True,
            licence="FLUX.1 [dev] Non-Commercial License",
            params_billion=16.8,
            mflux_name="krea-dev",
            notes=(
                "guidance-distilled only, not step-distilled: a 28-step schedule still engages",
            ),
        ),
        Variant(
            id="flux2-klein-4b",
            display_name="FLUX.2 Klein 4B",
            family=flux2.FAMILY,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; measured body-output change 0.261–1.008 between adjacent steps"
            ),
            default_steps=4,
            default_guidance=1.0,
            default_threshold=None,
            coefficients=(
                236.9190176127698,
                -201.47401360106662,
                66.91354236854073,
                -11.14796738073235,
                1.2674506310647067,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} free fit",
                fit_metric="R²",
                fit_value=0.653,
                data_size="70 pairs (10 prompts × 8 steps, 512², g=1)",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-4B",
            params_billion=8.0,
            mflux_name="flux2-klein-4b",
            base_variant="flux2-klein-base-4b",
            min_predicted_change=0.261,
        ),
        Variant(
            id="flux2-klein-9b",
            display_name="FLUX.2 Klein 9B",
            family=flux2.FAMILY,
            distilled=True,
            distilled_reason=(
                f"{_STEP_DISTILLED}; the origin fit predicts above 0.20 over the whole observed "
                "input range 0.1316–0.4498"
            ),
            default_steps=4,
            default_guidance=1.0,
            default_threshold=None,
            coefficients=(
                -523.8412980807129,
                530.2492512602308,
                -177.64385734082498,
                20.893264957040557,
                0.0,
            ),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin-constrained fit",
                fit_metric="R²",
                fit_value=0.471,
                data_size="70 pairs (10 prompts × 8 steps, 512², g=1)",
                notes="the free fit gave poly(0) ≈ 5.36 and was rejected",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-9B",
            params_billion=17.0,
            mflux_name="flux2-klein-9b",
            base_variant="flux2-klein-base-9b",
            min_predicted_change=0.20,
        ),
        Variant(
            id="flux2-klein-base-4b",
            display_name="FLUX.2 Klein base 4B",
            family=flux2.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.17,
            coefficients=_KLEIN_BASE,
            calibrated_range=_KLEIN_BASE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin-constrained fit",
                fit_metric="R²",
                fit_value=0.106,
                data_size="240 pairs (10 prompts × 25 steps, g=1)",
                notes="threshold from an SSIM sweep: 0.17 → SSIM 0.985 at 8/50 skips (g=4)",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-base-4B",
            params_billion=8.0,
            mflux_name="flux2-klein-base-4b",
            cfg=True,
        ),
        Variant(
            id="flux2-klein-base-9b",
            display_name="FLUX.2 Klein base 9B",
            family=flux2.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.17,
            coefficients=_KLEIN_BASE,
            calibrated_range=_KLEIN_BASE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE}: the base-4B fit reused (same architecture and recipe)",
                fit_metric="validation SSIM",
                fit_value=0.986,
                data_size="validated at 50 steps, g=4",
            ),
            hf_repo="black-forest-labs/FLUX.2-klein-base-9B",
            params_billion=17.0,
            mflux_name="flux2-klein-base-9b",
            cfg=True,
        ),
        Variant(
            id="z-image",
            display_name="Z-Image",
            family=z_image.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.12,
            coefficients=_Z_IMAGE,
            calibrated_range=_Z_IMAGE_RANGE,
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin fit on the first-main-layer residual (signal B)",
                fit_metric="R²",
                fit_value=0.400,
                data_size="10 prompts × 50 steps, q8, g=4; held-out R² 0.179",
            ),
            hf_repo="Tongyi-MAI/Z-Image",
            params_billion=10.2,
            mflux_name="z-image",
            cfg=True,
        ),
        Variant(
            id="z-image-turbo",
            display_name="Z-Image Turbo",
            family=z_image.FAMILY,
            distilled=True,
            distilled_reason=f"{_STEP_DISTILLED} and guidance-distilled (9 steps, no CFG)",
            default_steps=9,
            default_guidance=None,
            default_threshold=None,
            coefficients=_Z_IMAGE,
            calibrated_range=_Z_IMAGE_RANGE,
            provenance=Provenance(
                source=f"the Z-Image base fit ({_MLX_TEACACHE}); never calibrated on Turbo",
                notes="shown only to explain why the gate stays off",
            ),
            hf_repo="Tongyi-MAI/Z-Image-Turbo",
            params_billion=10.2,
            mflux_name="z-image-turbo",
            base_variant="z-image",
        ),
        Variant(
            id="qwen-image",
            display_name="Qwen-Image",
            family=qwen_image.FAMILY,
            distilled=False,
            default_steps=50,
            default_guidance=4.0,
            default_threshold=0.30,
            coefficients=(
                -12.954226906135869,
                8.883805167578382,
                -0.9363839862290331,
                1.4538816050570036,
                0.0,
            ),
            calibrated_range=(0.046760, 0.587800),
            provenance=Provenance(
                source=f"{_MLX_TEACACHE} origin fit (signal A, modulated block-0 input)",
                fit_metric="R²",
                fit_value=0.849,
                data_size="10 prompts × 50 steps, 768², q4, g=4; held-out R² 0.845",
                notes="fitted on Qwen/Qwen-Image; mflux 0.24 loads Qwen-Image-2512 (uncalibrated)",
            ),
            hf_repo="Qwen/Qwen-Image-2512",
            params_billion=28.5,
            mflux_name="qwen-image",
            cfg=True,
            magcache=_MAGCACHE_QWEN_IMAGE,
        ),
    ]


DEMO_GUIDANCE = 3.0
# The settings defaults the demo pair had while settings format 1 stored every value (thresholds
# 0.1 → 0.0125 → 0.1 as it was recalibrated, guidance 1 → 3 when it began to sample with CFG):
# ``app.storage.settings`` drops them from a format-1 file. The real models' defaults did not
# change in that time.
FORMAT1_DEFAULTS: dict[str, dict[str, tuple[float, ...]]] = {
    "thresholds": {"demo": (0.0125, 0.1), "demo-turbo": (0.0125, 0.1)},
    "steps": {"demo": (28,), "demo-turbo": (4,)},
    "guidance": {"demo": (1.0, 3.0), "demo-turbo": (1.0,)},
}


def _demo_variants() -> list[Variant]:
    """The embedded demo pair; their calibration is committed next to the weights."""
    variants = []
    for variant_id, distilled in (("demo", False), ("demo-turbo", True)):
        calibration = _load_calibration(DEMO_DIR / f"{variant_id}.calibration.json")
        variants.append(
            Variant(
                id=variant_id,
                display_name="Demo shapes" if not distilled else "Demo shapes turbo",
                family=demo.FAMILY,
                distilled=distilled,
                distilled_reason=(
                    "distilled from `demo` to 4 steps on mflux's sigmas (1, 0.955, 0.875, 0.70); "
                    "its output changes 0.14–0.86 between steps, and its short early strides "
                    "change little, so a gate can skip one of them (TeaCache from a threshold "
                    "between 0.19 and 0.40, depending on the prompt, on its 12 calibration "
                    "prompts); its calibration sets no default threshold"
                    if distilled
                    else None
                ),
                default_steps=4 if distilled else 28,
                # As FLUX.2 Klein: the base model samples with CFG (trained with caption dropout;
                # colour 88% → 97%, shape 27% → 45% on run 3), the distilled one without.
                default_guidance=1.0 if distilled else DEMO_GUIDANCE,
                default_threshold=calibration.get("default_threshold"),
                coefficients=tuple(calibration["coefficients"]),  # type: ignore[arg-type]
                calibrated_range=calibrated_range_from_json(calibration.get("calibrated_range")),
                provenance=Provenance(**calibration["provenance"]),
                hf_repo=None,
                params_billion=0.01,
                default_size=(128, 128),
                base_variant="demo" if distilled else None,
                min_predicted_change=calibration.get("min_predicted_change"),
                magcache=magcache_from_document(calibration),
            )
        )
    return variants


def _load_calibration(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


BUILTIN_VARIANTS: dict[str, Variant] = {
    v.id: v
    for v in [
        *_builtin(),
        *_this_years(),
        *_anima(),
        *_moss_image(),
        *_ernie_image(),
        *_lens(),
        *_fibo(),
        *_demo_variants(),
    ]
}
