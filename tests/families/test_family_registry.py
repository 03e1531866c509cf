"""The family registry's contract: every family module is registered and complete, its lazy names
resolve to mflux's real classes, and nothing that lacks an entry falls through to another family.

A new family fails here until its module is complete: its mflux classes live in the package it
names and are what mflux's own registries hold (its ``ModelConfig`` names, its weight definition's
transformer component), its shell is beside its anatomy, and its shell cases cover every generic
test (``ShellTest``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from dataclasses import replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage
from mlx import nn

import app.families
from app.families import (
    FAMILIES,
    Family,
    FamilyError,
    ShellTest,
    UnknownFamilyError,
    family_names,
    get_family,
    load,
)
from app.variants.builtin import BUILTIN_VARIANTS

ROOT = Path(__file__).resolve().parents[2]
SUPPORT_MODULES = {"spec", "latent_rgb"}  # app/families modules that are not a family


def _members(family: Family) -> list[Any]:
    return [v for v in BUILTIN_VARIANTS.values() if v.family is family]


MFLUX_FAMILIES = [f for f in FAMILIES.values() if not f.weights_shipped]


# -- registration ---------------------------------------------------------------------------------


def test_every_module_of_the_package_is_a_registered_family() -> None:
    names = {m.name for m in pkgutil.iter_modules(app.families.__path__)}
    assert names >= SUPPORT_MODULES
    for name in sorted(names - SUPPORT_MODULES):
        module = importlib.import_module(f"app.families.{name}")
        family = getattr(module, "FAMILY", None)
        assert isinstance(family, Family), f"app/families/{name}.py defines no FAMILY"
        assert FAMILIES[family.id] is family
    assert len(FAMILIES) == len(names - SUPPORT_MODULES)


def test_ids_labels_and_order_are_unique_and_the_order_is_the_pickers() -> None:
    families = list(FAMILIES.values())
    assert len({f.display_name for f in families}) == len(families)
    assert len({f.short_name for f in families}) == len(families)
    assert len({f.order for f in families}) == len(families)
    assert [f.order for f in families] == sorted(f.order for f in families)
    # the picker's order, as the window has shown it
    assert list(FAMILIES) == [
        "demo",
        "flux1",
        "flux2",
        "flux3",
        "z-image",
        "qwen-image",
        "qwen-image-2.1",
        "krea-2",
        "anima",
        "ernie-image",
        "lens",
        "fibo",
        "fibo2",
        "moss-image",
    ]


def test_every_family_has_variants_and_one_kind_of_them() -> None:
    for family in FAMILIES.values():
        members = _members(family)
        assert members, f"{family.id} has no built-in variant"
        # weights shipped with the app, or every variant's from the Hub
        from_hub = {v.hf_repo is not None for v in members}
        assert from_hub == {not family.weights_shipped}, f"{family.id} mixes shipped and Hub"


# -- completeness -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_every_mflux_family_has_every_entry(family: Family) -> None:
    assert family.mflux is not None
    # a LoRA mapping exactly where mflux maps LoRA weights (FIBO, Lens: none)
    assert (family.mflux.lora_mapping is not None) == family.supports_lora
    assert family.adapter is not None
    assert family.preview is not None
    assert family.random_weights is not None
    assert family.folders is not None and family.folders.prefixes
    assert family.sizes
    # memory: measured (tests/variants/test_memory_estimate.py reads the report it names), on one
    # of the family's variants, or borrowed from another family's with the reason written
    assert family.activation_gb_per_megapixel > 0
    if family.memory_basis is None:
        assert family.memory_measured_on in {v.id for v in _members(family)}
    else:
        lender = BUILTIN_VARIANTS[family.memory_measured_on or ""]
        assert lender.family is not family and family.memory_basis.strip()
        assert family.activation_gb_per_megapixel == lender.family.activation_gb_per_megapixel


def test_only_the_embedded_family_lacks_the_mflux_entries() -> None:
    embedded = [f for f in FAMILIES.values() if f.weights_shipped]
    assert [f.id for f in embedded] == ["demo"]
    demo = embedded[0]
    assert demo.mflux is None and demo.adapter is None and demo.random_weights is None
    assert demo.folders is None and not demo.supports_lora
    assert demo.sizes == ((128, 128),)  # the demo model is trained at one size


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_an_mflux_family_has_the_capabilities_of_a_hub_model(family: Family) -> None:
    assert not family.weights_shipped and family.loader is None
    assert family.quantizable
    assert family.prompt_check is None and family.calibration_prompts is None
    assert not family.fixed_size and family.flat_working_gb is None


def test_the_demo_family_says_what_it_is_as_capabilities() -> None:
    """Weights shipped, not quantizable, no LoRA, one size, its own loader and a prompt check
    over its closed vocabulary (which its suggested calibration prompts pass)."""
    demo = get_family("demo")
    assert demo.weights_shipped and not demo.quantizable and not demo.supports_lora
    assert demo.fixed_size and demo.flat_working_gb == 0.5 and not demo.mflux_packages
    assert callable(load(demo.loader or ""))
    check = load(demo.prompt_check or "")
    assert demo.calibration_prompts
    assert [check(prompt) for prompt in demo.calibration_prompts] == [None] * len(
        demo.calibration_prompts
    )
    problem = check("a purple elephant")
    assert isinstance(problem, str) and "'elephant'" in problem


# -- the lazy names -----------------------------------------------------------------------------


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_lazy_names_resolve_to_mfluxs_real_classes(family: Family) -> None:
    mflux = family.require_mflux()
    pipeline: Any = mflux.pipeline()
    weights: Any = mflux.weight_definition()
    lora = mflux.lora_mapping() if mflux.lora_mapping else None
    # the package the bundle collects for the family holds its classes
    assert family.mflux_packages == (mflux.package,)
    for cls in (pipeline, weights, lora):
        assert cls is None or cls.__module__.startswith(f"{mflux.package}."), cls
    # each is the kind of class mflux's loaders take
    assert all(inspect.isclass(cls) for cls in (pipeline, weights))
    assert callable(pipeline.generate_image)
    assert weights.get_components() and weights.get_tokenizers()
    # the transformer's weights are in mflux's download patterns: a folder of shards, or the
    # files its weight definition names (Krea 2 Turbo's single native file at the repo's root),
    # each matched by a pattern (Anima's mflux-save layout downloads ``transformer/*``)
    (transformer,) = [c for c in weights.get_components() if c.name == "transformer"]
    patterns = weights.get_download_patterns()
    files = transformer.weight_files or [f"{transformer.hf_subdir}/*.safetensors"]
    assert all(any(fnmatch(f, p) for p in patterns) for f in files), (files, patterns)
    if lora is not None:
        assert lora.get_mapping()  # mflux's own key mapping, non-empty


def test_no_two_families_share_an_mflux_class() -> None:
    for name in ("pipeline", "weight_definition"):
        classes = [getattr(f.require_mflux(), name)() for f in MFLUX_FAMILIES]
        assert len(set(classes)) == len(classes), name


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_img2img_is_said_exactly_where_mflux_takes_a_picture(family: Family) -> None:
    """``Family.img2img`` is mflux's own answer: its pipeline's ``generate_image`` takes
    ``image_path`` and ``image_strength`` (mflux 0.24: every family here but FLUX.3 Klein)."""
    import inspect

    pipeline = family.require_mflux().pipeline()
    parameters = inspect.signature(pipeline.generate_image).parameters
    takes = {"image_path", "image_strength"} <= set(parameters)
    assert family.img2img == takes


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_the_adapter_is_a_module_of_the_adapters_layer_with_an_install(family: Family) -> None:
    assert family.adapter is not None and family.adapter.startswith("app.adapters.")
    module = load(family.adapter)
    assert callable(module.install)
    assert list(inspect.signature(module.install).parameters) == ["pipeline", "gate"]


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_the_shell_builder_takes_the_shared_keywords_and_both_sizes(family: Family) -> None:
    spec = family.require_random_weights()
    assert spec.builder == f"{family.adapter}:shell"  # beside the family's anatomy
    builder = load(spec.builder)
    parameters = inspect.signature(builder).parameters
    assert next(iter(parameters)) == "model_name"
    assert {"dims", "prompts", "dtype", "seed"} <= set(parameters)
    assert type(spec.tiny) is type(spec.full) and spec.tiny != spec.full
    assert isinstance(parameters["dims"].default, type(spec.tiny))
    # the default model is one mflux knows, and one of the family's variants runs it
    assert ModelConfig.from_name(model_name=spec.model_name) is not None
    assert spec.model_name in {v.mflux_name for v in _members(family)}


# The generic tests every shell family must have a case for (the LoRA case is where the family's
# LoRA runs on a shell; the installation's checks where its shell is cheap enough for a fresh one a
# test: FLUX.1's are in tests/adapters/test_adapter_flux1.py).
REQUIRED_TESTS = (ShellTest.parity, ShellTest.probe, ShellTest.residual, ShellTest.engine)


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_the_shell_cases_cover_every_generic_test_with_models_the_family_runs(
    family: Family,
) -> None:
    spec = family.require_random_weights()
    members = _members(family)
    for test in REQUIRED_TESTS:
        assert spec.cases_for(test), f"{family.id} has no {test} case"
    assert len(spec.cases_for(ShellTest.residual)) == 1  # one a family, with CFG where it has it
    assert any(case.cfg for case in spec.cases) <= spec.cases_for(ShellTest.residual)[0].cfg
    for case in spec.cases:
        assert ModelConfig.from_name(model_name=case.model_name) is not None
        assert case.model_name in {v.mflux_name for v in members}, case.name
        assert case.steps >= 2 and case.size % 16 == 0 and case.tests
        assert not case.cfg or (case.guidance is not None and case.guidance > 1.0), case.name
        if ShellTest.engine in case.tests:
            # the engine runs the variant of that model, with its guidance
            (variant,) = [v for v in members if v.mflux_name == case.model_name]
            assert variant.default_guidance == case.guidance, case.name


def test_shell_case_names_are_unique_test_ids() -> None:
    names = [
        case.name for family in MFLUX_FAMILIES for case in family.require_random_weights().cases
    ]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9.-]+", name) for name in names)


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_the_preview_table_matches_the_latent_channels(family: Family) -> None:
    preview = family.require_preview()
    assert all(len(row) == 3 for row in preview.factors) and len(preview.bias) == 3
    assert preview.packed_channels in (None, len(preview.factors))
    assert callable(preview.unpack)


@pytest.mark.parametrize("family", MFLUX_FAMILIES, ids=lambda f: f.id)
def test_a_folder_with_the_familys_weight_names_is_detected_as_that_family(
    family: Family,
) -> None:
    from app.variants import folders

    assert family.folders is not None
    members = tuple(v.id for v in _members(family))
    for prefix in family.folders.prefixes:
        keys = {f"{prefix}weight": [4, 4]}
        assert folders._family(keys) is family
        assert set(folders._candidates(family, keys)) <= set(members)


# -- no family stands in for another ------------------------------------------------------------


def test_an_unknown_family_id_is_one_clear_error() -> None:
    with pytest.raises(UnknownFamilyError) as raised:
        get_family("flux9")
    assert str(raised.value) == (
        "unknown model family 'flux9'; known: demo, flux1, flux2, flux3, z-image, qwen-image, "
        "qwen-image-2.1, krea-2, anima, moss-image"
    )


def test_a_family_without_an_entry_raises_instead_of_borrowing_anothers() -> None:
    """What ended in an ``else`` that meant Qwen-Image now asks the family, and a family without
    the entry says so."""
    from app.adapters import UnsupportedPipelineError, _installer, previews, shells
    from app.engine import loader
    from app.variants import get_variant, weights

    bare = replace(get_family("qwen-image"), id="bare", mflux=None, adapter=None, preview=None)
    bare = replace(bare, random_weights=None, folders=None)
    variant = replace(get_variant("qwen-image"), family=bare)
    with pytest.raises(FamilyError, match="Qwen-Image is not an mflux model"):
        loader.pipeline_class(variant)
    with pytest.raises(FamilyError, match="not an mflux model"):
        weights._weight_definition(variant)
    with pytest.raises(FamilyError, match="no latent preview"):
        previews.family_projection(bare)
    with pytest.raises(FamilyError, match="no random-weight shell"):
        shells.random_weight_shell(bare)
    with pytest.raises(UnsupportedPipelineError, match="no adapter for Qwen-Image"):
        _installer(bare)


def test_a_pipeline_is_its_own_familys_even_when_it_subclasses_another() -> None:
    from app.adapters import UnsupportedPipelineError, detect_family

    class Derived(QwenImage):  # a family's class is found in the pipeline's MRO
        pass

    assert detect_family(Derived.__new__(Derived)) is get_family("qwen-image")
    flux2 = get_family("flux2")
    klein: Any = flux2.require_mflux().pipeline()
    assert detect_family(klein.__new__(klein)) is flux2
    with pytest.raises(UnsupportedPipelineError, match=r"no adapter for Module; supported: "):
        detect_family(nn.Module())


def test_family_lists_in_sentences_come_from_the_registry() -> None:
    assert family_names(lambda f: f.supports_lora, "or") == (
        "FLUX.1, FLUX.2, FLUX.3, Z-Image, Qwen-Image, Qwen-Image 2.1, Krea 2, Anima or MOSS-Image"
    )
    assert family_names(lambda f: f.random_weights is not None, "and") == (
        "FLUX.1, FLUX.2, FLUX.3, Z-Image, Qwen-Image, Qwen-Image 2.1, Krea 2, Anima and MOSS-Image"
    )


# -- no family spelled out elsewhere ------------------------------------------------------------


def _family_comparisons(file: Path, root: Path = ROOT) -> list[str]:
    """Comparisons that mention a family and hold a string constant or a family module's
    ``FAMILY``: a family spelled out (``variant.family.id == "flux1"``, ``family is
    flux1.FAMILY``) instead of asked of the registry."""
    source = file.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        parts = list(ast.walk(node))
        names = [n.id for n in parts if isinstance(n, ast.Name)]
        names += [n.attr for n in parts if isinstance(n, ast.Attribute)]
        spelled = any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in parts)
        spelled = spelled or "FAMILY" in names  # a family module's constant: ``is flux1.FAMILY``
        if spelled and any("family" in name.lower() for name in names):
            text = ast.get_source_segment(source, node)
            found.append(f"{file.relative_to(root)}:{node.lineno}: {text}")
    return found


def test_no_module_outside_the_registry_compares_a_family_to_a_name() -> None:
    offenders = [
        line
        for file in sorted((ROOT / "app").rglob("*.py"))
        if "families" not in file.relative_to(ROOT / "app").parts[:1]
        for line in _family_comparisons(file)
    ]
    assert not offenders, offenders


def test_the_comparison_finder_finds_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'if variant.family.id == "flux1":\n    pass\n'
        "if v.family is family:\n    pass\n"
        "if v.family is z_image.FAMILY:\n    pass\n"
        'if family in ("flux1", "flux2"):\n    pass\n'
    )
    assert [line.split(": ", 1)[1] for line in _family_comparisons(sample, tmp_path)] == [
        'variant.family.id == "flux1"',
        "v.family is z_image.FAMILY",
        'family in ("flux1", "flux2")',
    ]


# -- no hidden family branch --------------------------------------------------------------------


def _embedded_reads(file: Path, root: Path = ROOT) -> list[str]:
    """Every ``x.embedded``: the demo as a branch (``if variant.embedded``) instead of a
    capability its family states (``variant.family.weights_shipped``, ``.quantizable``, ...)."""
    source = file.read_text(encoding="utf-8")
    return [
        f"{file.relative_to(root)}:{node.lineno}: {ast.get_source_segment(source, node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "embedded"
    ]


def test_no_module_outside_the_registries_branches_on_embedded() -> None:
    offenders = [
        line
        for file in sorted((ROOT / "app").rglob("*.py"))
        if file.relative_to(ROOT / "app").parts[0] not in {"families", "variants"}
        for line in _embedded_reads(file)
    ]
    assert not offenders, offenders


def test_the_embedded_finder_finds_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "if variant.embedded:\n    pass\n"
        "quantize = None if self.variant.embedded else 4\n"
        "shipped = variant.family.weights_shipped\n"
    )
    assert [line.split(": ", 1)[1] for line in _embedded_reads(sample, tmp_path)] == [
        "variant.embedded",
        "self.variant.embedded",
    ]
