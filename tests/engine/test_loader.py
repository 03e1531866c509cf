"""Building real mflux pipelines (app/engine/loader.py): the memory check, mflux's constructor,
and one line for every failure on the way (the download's included). Tiny files and a fake
``snapshot_download``; there is no network here."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)

from app.engine import loader
from app.engine.request import LoraSpec
from app.variants import VARIANTS, get_variant, weights
from tests.fakes.hub import KLEIN, FakeHub, damage, http_error, write_snapshot

REAL = [v for v in VARIANTS.values() if not v.family.weights_shipped]
DEV = get_variant("flux1-dev")
GB = 1024**3
KLEIN_PIN = weights.pinned_revision("black-forest-labs/FLUX.2-klein-4B")


# -- what to download ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.id)
def test_each_real_variant_maps_to_mflux_config_repo_pin_and_patterns(variant: Any) -> None:
    config = loader.model_config(variant)
    assert config.model_name == variant.hf_repo  # the registry's repo is the one mflux loads
    assert weights.pinned_revision(variant.hf_repo or "")  # and mflux pins a revision of it
    patterns = weights.download_patterns(variant)
    mflux = variant.family.require_mflux()
    if mflux.hub_files is not None:  # the files mflux's loader reads by name (Anima's)
        assert patterns == list(mflux.hub_files[variant.mflux_name])
    else:
        # The transformer's weights (in its folder, or the files mflux's definition names there:
        # Krea 2's one file at the repo's top, Lens's in diffusion_models/), the VAE's where the
        # repo holds it (Lens's comes from FLUX.2 Klein's), and the text encoder's tokenizer
        # where mflux's definition names one (Lens's comes with its encoder's repo).
        definition: Any = mflux.weight_definition()
        components = {c.name: c for c in definition.get_components()}
        assert "transformer" in components
        for name in ("transformer", "vae"):
            component = components.get(name)
            if component is None:  # a VAE from another repo, which mflux fetches itself
                continue
            folder = f"{component.hf_subdir}/" if component.hf_subdir else ""
            files = [folder + f for f in component.weight_files or ["*.safetensors"]]
            assert all(f in patterns for f in files), (name, files, patterns)
        for tokenizer in mflux.tokenizers():
            assert tokenizer.download_patterns or f"{tokenizer.hf_subdir}/**" in patterns
            assert set(tokenizer.download_patterns or ()) <= set(patterns)
        assert mflux.tokenizers() or mflux.tokenizers_elsewhere
    # the loader builds the family's own mflux pipeline (tests/families/test_family_registry.py
    # holds it to mflux's classes)
    assert loader.pipeline_class(variant) is mflux.pipeline()


def test_embedded_variants_are_not_loaded_here() -> None:
    with pytest.raises(weights.ModelNotFoundError, match="ships with the app"):
        loader.load_pipeline(get_variant("demo"))
    assert weights.snapshot_status(get_variant("demo")).on_disk


# -- memory -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("on_a_mac")
def test_memory_check_refuses_only_when_the_weights_cannot_fit() -> None:
    # FLUX.1 dev's weights: 16.8e9 parameters × 2 bytes = 31.3 GB; its estimated peak at
    # 1024 × 1024 (the CUDA upper bound) is 39.4 GB.
    assert DEV.memory_estimate_gb(None) > 36  # so the second call below is over the peak
    loader.check_memory(DEV, 4, memory_bytes=64 * GB)  # fits: silent
    loader.check_memory(DEV, None, memory_bytes=36 * GB)  # the peak is over, the weights fit
    loader.check_memory(DEV, None, memory_bytes=33 * GB)  # 31.3 + the 1.5 GB floor = 32.8
    # The image size never causes a refusal: at 4096 × 4096 the upper bound is 160.9 GB.
    assert DEV.memory_estimate_gb(None, (4096, 4096)) > 4 * 33
    loader.check_memory(DEV, None, memory_bytes=33 * GB, size=(4096, 4096))
    with pytest.raises(loader.NotEnoughMemoryError) as refused:
        loader.check_memory(DEV, None, memory_bytes=32 * GB)
    assert str(refused.value) == (
        "FLUX.1 dev at full precision cannot load on this machine: its weights alone need 31.3 GB "
        "plus 1.5 GB for macOS and the app, and it has 32 GB; choose 8-bit quantization "
        "(16.6 GB of weights)"
    )
    with pytest.raises(loader.NotEnoughMemoryError) as refused:
        loader.check_memory(DEV, 4, memory_bytes=8 * GB)  # 3-bit: 6.8 + 1.5 = 8.3 GB
    assert str(refused.value).endswith("no quantization fits: choose a smaller variant")
    assert "\n" not in str(refused.value) and ". " not in str(refused.value)  # one sentence


def test_weights_are_parameters_times_bytes_per_weight() -> None:
    assert DEV.weights_gb(None) == pytest.approx(16.8e9 * 2 / GB)
    assert DEV.weights_gb(4) == pytest.approx(16.8e9 * (4 / 8 + 4 / 64) / GB)
    need = DEV.weights_gb(4) + loader.OS_FLOOR_GB  # the weights plus the floor, nothing else
    assert loader.weights_fit(DEV, 4, need) and not loader.weights_fit(DEV, 4, need - 0.01)


@pytest.mark.usefixtures("on_a_mac")
def test_a_peak_over_memory_with_weights_that_fit_is_a_warning_with_the_fix() -> None:
    warning = loader.memory_warning(DEV, None, memory_bytes=36 * GB)
    assert warning == (
        "FLUX.1 dev at full precision at 1024 × 1024 may need up to 39.4 GB and this machine has "
        "36 GB: that figure is an upper bound measured with MLX on CUDA, so macOS may swap or the "
        "run may stop with an out-of-memory message. 8-bit quantization (up to 24.7 GB) would fit."
    )
    assert loader.memory_warning(DEV, None, memory_bytes=64 * GB) is None  # fits
    assert loader.memory_warning(DEV, None, memory_bytes=24 * GB) is None  # refused instead
    # The size counts: 8-bit on 24 GB fits at 512 × 512 (18.6 GB) and not at 2048 × 2048 (49.0),
    # where no level's upper bound fits: the fix is the default rule's level, not one bit less.
    assert loader.memory_warning(DEV, 8, memory_bytes=24 * GB, size=(512, 512)) is None
    large = loader.memory_warning(DEV, 8, memory_bytes=24 * GB, size=(2048, 2048))
    assert large is not None and "at 2048 × 2048 may need up to 49.0 GB" in large
    assert large.endswith("3-bit quantization (up to 39.2 GB) needs less.")
    # FLUX.2 Klein 4B on a 16 GB Mac at its default (6-bit): allowed, warned, no lower level helps.
    klein = get_variant("flux2-klein-4b")
    assert loader.default_quantize(klein, memory_bytes=16 * GB) == 6
    klein_warning = loader.memory_warning(klein, 6, memory_bytes=16 * GB)
    assert klein_warning is not None and klein_warning.endswith(" A smaller image needs less.")
    loader.check_memory(klein, 6, memory_bytes=16 * GB)  # not refused


def test_every_mflux_level_is_accepted_and_the_default_leaves_headroom() -> None:
    from mflux.cli.defaults.defaults import QUANTIZE_CHOICES

    assert sorted(QUANTIZE_CHOICES) == list(loader.QUANTIZE_LEVELS)
    # The default counts the weights plus half the CUDA working memory (4.05 GB at 1024 × 1024).
    # 64 GB: full precision (35.3 GB) leaves more than 15 % free.
    assert loader.default_quantize(DEV, memory_bytes=64 * GB) is None
    # 24 GB: 85 % is 20.4 GB; 8-bit needs 20.7 GB, 6-bit 16.8 (its upper bound, 20.8, fits too).
    assert loader.default_quantize(DEV, memory_bytes=24 * GB) == 6
    # 16 GB: 85 % is 13.6 GB; 5-bit needs 14.8 GB, 4-bit 12.9.
    assert loader.default_quantize(DEV, memory_bytes=16 * GB) == 4
    # ... at 512 × 512 the working memory is the 1 GB floor: 5-bit needs 11.8 GB.
    assert loader.default_quantize(DEV, size=(512, 512), memory_bytes=16 * GB) == 5
    # 8 GB: nothing fits with headroom: the smallest is offered (and the load check refuses it).
    assert loader.default_quantize(DEV, memory_bytes=8 * GB) == 3
    assert loader.default_quantize(get_variant("demo"), memory_bytes=8 * GB) is None


def test_not_enough_memory_is_refused_before_any_download(hub: FakeHub, online: None) -> None:
    with pytest.raises(loader.NotEnoughMemoryError):
        loader.load_pipeline(DEV, memory_bytes=16 * GB)
    assert hub.calls == []


# -- snapshot checks ----------------------------------------------------------------------------


def test_a_local_model_path_is_checked_before_mflux_sees_it(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snap")
    damage(root, "truncated")
    with pytest.raises(weights.IncompleteSnapshotError):
        loader.load_pipeline(KLEIN, model_path=str(root), memory_bytes=64 * GB)


def test_a_cancel_before_starting_fetches_nothing(hub: FakeHub, online: None) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(weights.DownloadCancelled):
        loader.load_pipeline(KLEIN, cancel=cancel, memory_bytes=64 * GB)
    assert hub.calls == []


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        (
            http_error(GatedRepoError, 403),
            weights.GatedModelError,
            "FLUX.1 dev is a gated model: accept its licence at "
            "https://huggingface.co/black-forest-labs/FLUX.1-dev, then log in with "
            "`hf auth login` (or set HF_TOKEN) and try again",
        ),
        (
            http_error(HfHubHTTPError, 401),
            weights.GatedModelError,
            "Hugging Face refused access to black-forest-labs/FLUX.1-dev (HTTP 401)",
        ),
        (
            http_error(RepositoryNotFoundError, 404),
            weights.ModelNotFoundError,
            "black-forest-labs/FLUX.1-dev was not found on Hugging Face",
        ),
        (
            LocalEntryNotFoundError("connection refused"),
            weights.NetworkError,
            "FLUX.1 dev is not downloaded and Hugging Face cannot be reached",
        ),
        (
            IncompleteSnapshotError("3 files missing", snapshot_path="/cache/x"),
            weights.IncompleteSnapshotError,
            "the cached download of FLUX.1 dev is incomplete",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            weights.NotEnoughDiskError,
            "the disk is full while downloading FLUX.1 dev",
        ),
        (http_error(HfHubHTTPError, 500), weights.NetworkError, "HTTP 500"),
    ],
    ids=["gated", "token", "not-found", "network", "incomplete", "disk-full", "server"],
)
def test_hub_failures_become_one_clear_message(
    hub: FakeHub, online: None, error: Exception, kind: type, text: str
) -> None:
    hub.error = error
    with pytest.raises(kind) as failed:
        loader.load_pipeline(DEV, quantize=4, memory_bytes=64 * GB)
    message = str(failed.value)
    assert text in message and "\n" not in message
    assert failed.value.__suppress_context__  # no chained traceback behind it


# -- building the pipeline ------------------------------------------------------------------------


class FakePipeline:
    made: list[dict[str, Any]] = []  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        FakePipeline.made.append(kwargs)


@pytest.fixture
def fake_mflux(monkeypatch: pytest.MonkeyPatch) -> type[FakePipeline]:
    FakePipeline.made = []
    monkeypatch.setattr(loader, "pipeline_class", lambda variant: FakePipeline)
    return FakePipeline


@pytest.mark.parametrize("quantize", [None, 8, 4])
def test_load_builds_with_mflux_constructor_arguments(
    hub: FakeHub, online: None, fake_mflux: type[FakePipeline], quantize: int | None
) -> None:
    messages: list[str] = []
    pipeline = loader.load_pipeline(
        KLEIN, quantize=quantize, memory_bytes=64 * GB, progress=lambda d, t, m: messages.append(m)
    )
    assert isinstance(pipeline, FakePipeline)
    (made,) = fake_mflux.made
    assert made["quantize"] == quantize
    assert made["model_config"] is loader.model_config(KLEIN)
    assert Path(made["model_path"]).name == KLEIN_PIN
    assert messages[-1].startswith("loading FLUX.2 Klein 4B")


def test_loras_go_to_mflux_constructor(
    hub: FakeHub, online: None, fake_mflux: type[FakePipeline], tmp_path: Path
) -> None:
    local = str(write_snapshot(tmp_path / "klein"))
    loras = (LoraSpec("/loras/ink.safetensors", 0.8), LoraSpec("/loras/film.safetensors", -0.5))
    loader.load_pipeline(KLEIN, model_path=local, memory_bytes=64 * GB, loras=loras)
    loader.load_pipeline(KLEIN, model_path=local, memory_bytes=64 * GB)
    with_loras, without = fake_mflux.made
    assert with_loras["lora_paths"] == ["/loras/ink.safetensors", "/loras/film.safetensors"]
    assert with_loras["lora_scales"] == [0.8, -0.5]
    assert "lora_paths" not in without and "lora_scales" not in without


def test_load_from_a_local_folder_or_another_repo(
    hub: FakeHub, online: None, fake_mflux: type[FakePipeline], tmp_path: Path
) -> None:
    local = write_snapshot(tmp_path / "my-klein")
    loader.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert fake_mflux.made[-1]["model_path"] == str(local) and hub.calls == []
    loader.load_pipeline(KLEIN, model_path="someone/klein-finetune", memory_bytes=64 * GB)
    assert hub.calls[-1]["repo_id"] == "someone/klein-finetune"
    assert hub.calls[-1]["revision"] is None  # mflux pins only its own repos
    with pytest.raises(weights.ModelNotFoundError, match="neither a folder nor"):
        loader.load_pipeline(KLEIN, model_path="no/such/folder", memory_bytes=64 * GB)


def test_mflux_failures_become_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, online: None
) -> None:
    local = write_snapshot(tmp_path / "snap")

    class Exploding:
        def __init__(self, **kwargs: Any) -> None:
            raise KeyError("transformer.blocks.0.weight\n(and a long story)")

    monkeypatch.setattr(loader, "pipeline_class", lambda v: Exploding)
    with pytest.raises(loader.ModelLoadError) as failed:
        loader.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith(f"mflux could not load FLUX.2 Klein 4B from {local}: ")

    class Oom:
        def __init__(self, **kwargs: Any) -> None:
            raise MemoryError

    monkeypatch.setattr(loader, "pipeline_class", lambda v: Oom)
    with pytest.raises(loader.NotEnoughMemoryError, match="ran out of memory"):
        loader.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)


def test_a_lora_that_does_not_fit_the_model_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, online: None
) -> None:
    local = write_snapshot(tmp_path / "snap")

    class Refusing:  # what mflux's LoRALoader raises for a file of another model's keys
        def __init__(self, **kwargs: Any) -> None:
            raise ValueError(
                "No LoRA layers were applied from ink.safetensors. Key endings seen in the file:\n"
                "['lora_A.weight']. This model's mapping expects endings like lora_A/lora_B"
            )

    monkeypatch.setattr(loader, "pipeline_class", lambda v: Refusing)
    with pytest.raises(loader.ModelLoadError) as failed:
        loader.load_pipeline(
            KLEIN, model_path=str(local), memory_bytes=64 * GB,
            loras=(LoraSpec("/l/ink.safetensors", 1.0),),
        )  # fmt: skip
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("FLUX.2 Klein 4B could not take the LoRA (ink.safetensors): No LoRA")


def test_real_mflux_constructor_on_unusable_files_fails_with_one_line(tmp_path: Path) -> None:
    """mflux's own Flux2Klein constructor, on a folder that passes our checks but holds no real
    weights or tokenizer: whatever mflux raises reaches the user as one sentence."""
    local = write_snapshot(tmp_path / "snap")
    with pytest.raises(loader.ModelLoadError) as failed:
        loader.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith("mflux could not load FLUX.2 Klein 4B")


def test_flux1_dev_here_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `generate --variant flux1-dev` meets on this box: no weights, no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(weights.OfflineNotCachedError, match=r"FLUX\.1 dev is not downloaded"):
        loader.load_pipeline(DEV, quantize=4, cache_dir=tmp_path, memory_bytes=64 * GB)
