"""FIBO's data: JSON captions (the check, mflux's example, the calibration captions), the variant
rows against mflux's own defaults, and the parameter count of mflux's classes at real size."""

from __future__ import annotations

import json

import pytest
from mlx.utils import tree_flatten

from app.engine.calibration import REAL_PROMPTS, default_prompts
from app.engine.request import RequestError, check_prompt
from app.families import FAMILIES, get_family, load
from app.families.fibo import (
    CALIBRATION_CAPTIONS,
    MFLUX_EXAMPLE_CAPTION,
    PROMPT_FORMAT,
    json_caption_problem,
)
from app.variants import get_variant

FIBO = get_family("fibo")


def test_a_plain_text_prompt_is_refused_in_one_sentence_and_a_json_caption_passes() -> None:
    assert FIBO.prompt_check is not None and load(FIBO.prompt_check) is json_caption_problem
    plain = json_caption_problem("a red circle on a blue background")
    assert plain is not None and "JSON caption" in plain and "Example" in plain
    broken = json_caption_problem('{"short_description": "a cat",}')
    assert broken is not None and "not valid JSON" in broken and "line 1" in broken
    bare = json_caption_problem('"a cat"')  # JSON, but not a caption
    assert bare is not None and "object" in bare
    assert json_caption_problem('{"short_description": "a cat"}') is None
    for problem in (plain, broken, bare):
        assert "\n" not in problem
    # the request check says it (the command line and the window alike), before anything loads
    with pytest.raises(RequestError, match="JSON caption"):
        check_prompt(get_variant("fibo-lite"), "a red circle")


def test_the_window_offers_mflux_example_caption_which_fibo_reads() -> None:
    assert FIBO.prompt_format is PROMPT_FORMAT
    assert PROMPT_FORMAT.example == MFLUX_EXAMPLE_CAPTION
    assert "JSON caption" in PROMPT_FORMAT.note and "Example" in PROMPT_FORMAT.note
    caption = json.loads(MFLUX_EXAMPLE_CAPTION)
    assert caption["short_description"].startswith("Three cartoon animal chefs")
    assert len(caption["objects"]) == 3
    assert json_caption_problem(MFLUX_EXAMPLE_CAPTION) is None
    assert check_prompt(get_variant("fibo"), MFLUX_EXAMPLE_CAPTION) == MFLUX_EXAMPLE_CAPTION


def test_the_suggested_calibration_prompts_are_one_line_captions_of_the_general_subjects() -> None:
    prompts = default_prompts(get_variant("fibo"))
    assert prompts == CALIBRATION_CAPTIONS and len(prompts) == len(REAL_PROMPTS)
    for prompt in prompts:
        assert "\n" not in prompt and json_caption_problem(prompt) is None
    described = [json.loads(p)["short_description"].rstrip(".").lower() for p in prompts]
    assert described == [p.lower() for p in REAL_PROMPTS]


def test_the_variants_are_mfluxs_fibo_and_fibo_lite() -> None:
    from mflux.cli.defaults.defaults import MODEL_INFERENCE_STEPS
    from mflux.models.common.config.model_config import ModelConfig

    base, lite = get_variant("fibo"), get_variant("fibo-lite")
    for variant in (base, lite):
        config = ModelConfig.from_name(model_name=variant.mflux_name or "")
        assert variant.hf_repo == config.model_name
        assert variant.default_steps == MODEL_INFERENCE_STEPS[variant.id]
        assert variant.family is FIBO and variant.coefficients is None
        assert (
            variant.gated_repo
            and variant.licence is not None
            and "non-commercial" in (variant.licence)
        )
        assert variant.default_gate() == "firstblock"
    assert not base.distilled and base.default_guidance == 5.0 and base.cfg  # mflux's CLI: 5
    assert lite.distilled and lite.default_guidance is None and lite.base_variant == "fibo"
    assert lite.distilled_reason and "8 steps" in lite.distilled_reason
    assert not FIBO.supports_lora  # mflux maps no LoRA for FIBO


def _parameters(module: object) -> int:
    """Parameters of a module built at its real size: mflux's modules draw their initial weights
    lazily, so counting their sizes allocates nothing."""
    return sum(v.size for _, v in tree_flatten(module.parameters()))  # type: ignore[attr-defined]


def test_the_parameter_count_is_mfluxs_three_models_at_real_size() -> None:
    from mflux.models.fibo.model.fibo_text_encoder.smol_lm3_3b_text_encoder import (
        SmolLM3_3B_TextEncoder,
    )
    from mflux.models.fibo.model.fibo_transformer.transformer import FiboTransformer
    from mflux.models.fibo.model.fibo_vae.wan_2_2_vae import Wan2_2_VAE

    transformer = _parameters(FiboTransformer())
    assert round(transformer / 1e9, 2) == 8.29
    total = transformer + _parameters(SmolLM3_3B_TextEncoder()) + _parameters(Wan2_2_VAE())
    for variant_id in ("fibo", "fibo-lite"):
        assert abs(get_variant(variant_id).params_billion - total / 1e9) < 0.005, variant_id
        assert get_variant(variant_id).unquantized_billion == 0.0  # mflux quantizes all three


def test_a_folder_of_fibo_weights_is_detected_as_fibo() -> None:
    keys = {
        "caption_projection.0.linear.weight": (1536, 2048),
        "transformer_blocks.0.attn.to_q.weight": (3072, 3072),
        "x_embedder.weight": (3072, 48),
    }
    assert [f for f in FAMILIES.values() if f.folders and f.folders.matches(keys)] == [FIBO]
