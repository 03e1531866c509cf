"""Anima's data against mflux 0.24's own classes: its real dimensions and parameter counts, the
variants' steps and guidance, and the Hub files a download fetches (the repo's ComfyUI single
files, which mflux's loader reads by name, not the layout of its download patterns)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx import nn
from mlx.utils import tree_flatten

from app.families import get_family
from app.families.anima import ANIMA_FULL, HUB_FILES
from app.variants import get_variant, weights

VARIANTS = ["anima-turbo", "anima-aesthetic", "anima-base"]


def _parameters(module: Any) -> int:
    """Parameters of a module built at its real size (mflux's modules draw their weights
    lazily, so counting allocates nothing)."""
    return sum(v.size for _, v in tree_flatten(module.parameters()))  # type: ignore[attr-defined]


def test_the_real_dimensions_and_parameters_are_mfluxs() -> None:
    from mflux.models.anima.anima_initializer import QWEN3_06B_CONFIG
    from mflux.models.anima.model.anima_transformer.anima_transformer import AnimaTransformer
    from mflux.models.anima.weights.anima_weight_definition import AnimaWeightDefinition
    from mflux.models.common.config.model_config import ModelConfig
    from mflux.models.flux2.model.flux2_text_encoder.qwen3_text_encoder import Qwen3TextEncoder
    from mflux.models.qwen.model.qwen_vae.qwen_vae import QwenVAE

    defaults = {
        n: p.default for n, p in inspect.signature(AnimaTransformer.__init__).parameters.items()
    }
    assert all(defaults[k] == v for k, v in ANIMA_FULL.kwargs().items())
    for name in VARIANTS:  # mflux builds each with AnimaTransformer(): no override
        assert ModelConfig.from_name(model_name=name).transformer_overrides == {}

    transformer = AnimaTransformer()
    text_encoder = _parameters(Qwen3TextEncoder(**QWEN3_06B_CONFIG))  # type: ignore[arg-type]
    total = _parameters(transformer) + text_encoder + _parameters(QwenVAE())
    # mflux keeps the text encoder and the transformer's LLM adapter, timestep embedding and
    # AdaLN modulations dense at every level (its quantization predicate)
    dense = text_encoder + sum(
        _parameters(module)
        for path, module in transformer.named_modules()
        if isinstance(module, nn.Linear | nn.Embedding)
        and not AnimaWeightDefinition.quantization_predicate(path, module)
    )
    for variant_id in VARIANTS:
        variant = get_variant(variant_id)
        assert abs(variant.params_billion - total / 1e9) < 0.005, variant_id
        assert abs(variant.unquantized_billion - dense / 1e9) < 0.005, variant_id


def test_the_variants_take_mfluxs_steps_guidance_and_repo() -> None:
    from mflux.models.anima.variants.txt2img.anima import Anima
    from mflux.models.common.config.model_config import ModelConfig

    for variant_id in VARIANTS:
        variant = get_variant(variant_id)
        assert variant.family is get_family("anima") and variant.mflux_name == variant_id
        assert variant.default_steps == Anima.DEFAULT_STEPS[variant_id]
        assert variant.default_guidance == Anima.DEFAULT_GUIDANCE[variant_id]
        assert variant.cfg == (Anima.DEFAULT_GUIDANCE[variant_id] != 1.0)
        assert variant.hf_repo == ModelConfig.from_name(model_name=variant_id).model_name
        assert variant.coefficients is None and variant.default_gate() == "firstblock"
    turbo = get_variant("anima-turbo")
    assert turbo.distilled and turbo.base_variant == "anima-aesthetic"
    assert not get_variant(turbo.base_variant).distilled


def test_the_hub_files_are_the_ones_mflux_reads_for_each_variant() -> None:
    from mflux.models.anima.weights.anima_weight_definition import AnimaWeightDefinition

    assert set(HUB_FILES) == set(AnimaWeightDefinition.TRANSFORMER_FILES) == set(VARIANTS)
    for name, files in HUB_FILES.items():
        components = (  # AnimaInitializer._load_upstream_weights' order and pattern
            AnimaWeightDefinition.source_vae(),
            AnimaWeightDefinition.source_transformer(name),
            AnimaWeightDefinition.source_text_encoder(),
        )
        assert files == tuple(f"{c.hf_subdir}/{(c.weight_files or [''])[0]}" for c in components)
        assert weights.download_patterns(get_variant(name)) == list(files)


def _write(root: Path, files: tuple[str, ...]) -> Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        mx.save_safetensors(str(root / name), {"w": mx.zeros((4, 4))})
    return root


def test_a_snapshot_is_complete_with_the_variants_own_files_only(tmp_path: Path) -> None:
    turbo, base = get_variant("anima-turbo"), get_variant("anima-base")
    root = _write(tmp_path / "snap", HUB_FILES["anima-turbo"])
    assert weights.snapshot_problems(root, turbo) == []
    # The repo holds the three variants; another's transformer file is another download.
    assert weights.snapshot_problems(root, base) == [
        "split_files/diffusion_models/anima-base-v1.0.safetensors is missing"
    ]
    vae = root / HUB_FILES["anima-turbo"][0]
    vae.write_bytes(vae.read_bytes()[:-10])
    problems = weights.snapshot_problems(root, turbo)
    assert len(problems) == 1 and problems[0].startswith(f"{HUB_FILES['anima-turbo'][0]} is trunc")
    with pytest.raises(weights.IncompleteSnapshotError, match="delete that folder"):
        weights.verify_snapshot(root, turbo)


def test_a_download_asks_the_hub_for_those_files_and_says_the_licence_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, online: None
) -> None:
    variant = get_variant("anima-aesthetic")
    calls: list[dict[str, Any]] = []

    def snapshot_download(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if kwargs.get("dry_run"):
            return []
        return str(_write(tmp_path / "snap", tuple(kwargs["allow_patterns"])))

    monkeypatch.setattr(weights, "snapshot_download", snapshot_download)
    said: list[str] = []
    root = weights.ensure_snapshot(variant, progress=lambda done, total, text: said.append(text))
    assert root == tmp_path / "snap"
    assert [c["repo_id"] for c in calls] == ["circlestone-labs/Anima"] * 2
    assert all(c["allow_patterns"] == list(HUB_FILES["anima-aesthetic"]) for c in calls)
    assert said[0] == variant.licence_note and variant.licence and variant.licence in said[0]


def test_a_copy_of_the_hub_repo_opens_as_a_model_folder_of_the_variants_it_holds(
    tmp_path: Path,
) -> None:
    """mflux loads a copy of circlestone-labs/Anima as it is (its ComfyUI files under
    split_files/, the transformer's names ``net.`` prefixed in the Base file): the folder check
    finds Anima there, the three variants its weights fit (one layout), and a variant whose
    transformer file is missing is one sentence."""
    from app.variants.folders import check_folder, inspect_folder

    root = tmp_path / "Anima"
    for name in HUB_FILES["anima-base"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        keys = ["vae.w"]
        if "diffusion_models" in name:
            keys = ["net.llm_adapter.blocks.0.self_attn.q_proj.weight", "net.blocks.0.mlp.layer1"]
        mx.save_safetensors(str(root / name), {k: mx.zeros((4, 4)) for k in keys})
    info = inspect_folder(root)
    assert info.family is get_family("anima") and info.has_transformer
    assert set(info.candidates) == set(VARIANTS)
    assert check_folder(root, get_variant("anima-base")).family is get_family("anima")
    with pytest.raises(
        weights.IncompleteSnapshotError, match=r"anima-turbo-v1\.1\.safetensors is missing"
    ):
        check_folder(root, get_variant("anima-turbo"))
    # names no family reads are no model of any family
    transformer = root / HUB_FILES["anima-base"][1]
    mx.save_safetensors(str(transformer), {"something.else.weight": mx.zeros((4, 4))})
    assert inspect_folder(root).family is None
    with pytest.raises(weights.IncompleteSnapshotError, match="no weights mflux can read"):
        check_folder(root, get_variant("anima-base"))
