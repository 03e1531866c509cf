"""FIBO 2's data: mflux's caption check as the family's prompt check, mflux's example caption
(which FIBO 2 reads as it stands), the variant row against mflux's defaults, and the parameter
count of mflux's classes at real size."""

from __future__ import annotations

import json

import pytest
from mlx.utils import tree_flatten

from app.engine.request import RequestError, check_prompt
from app.families import FAMILIES, get_family, load
from app.families.fibo import MFLUX_EXAMPLE_CAPTION
from app.families.fibo2 import PROMPT_FORMAT, caption_problem
from app.variants import get_variant

FIBO2 = get_family("fibo2")


def test_plain_text_and_captions_pass_and_a_broken_caption_is_refused_in_one_sentence() -> None:
    assert FIBO2.prompt_check is not None and load(FIBO2.prompt_check) is caption_problem
    assert caption_problem("a red circle on a blue background") is None  # plain text: read as is
    assert caption_problem('{"short_description": "a cat", "lighting": {}}') is None
    broken = caption_problem('{"short_description": "a cat",')
    assert broken is not None and "not valid JSON" in broken
    typed = caption_problem('{"short_description": 3}')  # mflux: a field of the wrong type
    assert typed is not None and "short_description has to be a string" in typed
    for problem in (broken, typed):
        assert "\n" not in problem
    with pytest.raises(RequestError, match="not valid JSON"):
        check_prompt(get_variant("fibo2"), '{"objects": [')


def test_mflux_example_caption_is_one_fibo2_reads_without_a_warning() -> None:
    from mflux.models.fibo2.model.fibo2_text_encoder.fibo2_caption_check import (
        Fibo2CaptionCheck,
    )

    assert FIBO2.prompt_format is PROMPT_FORMAT and PROMPT_FORMAT.example == MFLUX_EXAMPLE_CAPTION
    assert "JSON caption" in PROMPT_FORMAT.note and "plain description" in PROMPT_FORMAT.note
    # every field is one FIBO 2 was trained on (FIBO 1's scores are dropped when it reads them)
    assert Fibo2CaptionCheck.check(MFLUX_EXAMPLE_CAPTION, edit=False) == []
    assert caption_problem(MFLUX_EXAMPLE_CAPTION) is None
    assert json.loads(MFLUX_EXAMPLE_CAPTION)["objects"]


def test_the_variant_is_mfluxs_fibo2() -> None:
    from mflux.cli.defaults.defaults import MODEL_INFERENCE_STEPS
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.fibo2.variants.fibo2_core import _Fibo2Core

    variant = get_variant("fibo2")
    config = ModelConfig.from_name(model_name="fibo2")
    assert variant.hf_repo == config.model_name and variant.mflux_name == "fibo2"
    assert variant.default_steps == MODEL_INFERENCE_STEPS["fibo2"]
    assert config.supports_guidance and variant.default_guidance == _Fibo2Core.DEFAULT_GUIDANCE
    assert not variant.distilled and variant.cfg and variant.coefficients is None
    assert variant.gated_repo and variant.licence is not None
    assert variant.default_gate() == "firstblock"
    assert FIBO2.supports_lora  # mflux maps FIBO 2's LoRA keys (Fibo2LoRAMapping)


def _parameters(module: object) -> int:
    """Parameters of a module built at its real size: mflux's modules draw their initial weights
    lazily, so counting their sizes allocates nothing."""
    return sum(v.size for _, v in tree_flatten(module.parameters()))  # type: ignore[attr-defined]


def test_the_parameter_count_is_mfluxs_three_models_at_real_size() -> None:
    from mflux.models.fibo2.model.fibo2_text_encoder.fibo2_text_encoder import Fibo2TextEncoder
    from mflux.models.fibo2.model.fibo2_transformer.fibo2_transformer import Fibo2Transformer
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE

    transformer = _parameters(Fibo2Transformer())
    assert round(transformer / 1e9, 2) == 8.13
    total = transformer + _parameters(Fibo2TextEncoder()) + _parameters(Flux2VAE())
    assert abs(get_variant("fibo2").params_billion - total / 1e9) < 0.005
    assert get_variant("fibo2").unquantized_billion == 0.0  # mflux quantizes all three


def test_a_folder_of_fibo2_weights_is_detected_as_fibo2() -> None:
    keys = {
        "perceiver.latent_queries": (512, 3584),
        "noise_refiner.0.attention.to_q.weight": (3584, 3584),
        "layers.6.cross_attention.to_k.weight": (3584, 7680),
        "x_embedder.weight": (3584, 128),
    }
    assert [f for f in FAMILIES.values() if f.folders and f.folders.matches(keys)] == [FIBO2]
