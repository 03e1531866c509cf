"""Model folders (app/variants/folders.py): recognised from their files, checked, remembered,
offered as ``<base>@<name>`` variants. The folders are written by mflux's own ``ModelSaver`` from
tiny random-weight shells (``mflux-save``'s layout) or laid out as Hugging Face snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlx.core as mx
import pytest

from app.adapters import common
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.qwen_image import shell as qwen_shell
from app.adapters.shells import random_weight_shell
from app.engine.request import RequestError, make_request
from app.families.flux2 import Flux2Dims
from app.variants import all_variants, get_variant, weights
from app.variants.builtin import BUILTIN_VARIANTS
from app.variants.catalog import UnknownVariantError
from app.variants.folders import (
    ModelFolderError,
    add_model_folder,
    check_folder,
    folders_file,
    inspect_folder,
    model_folders,
    remove_model_folder,
)
from tests.fakes.hub import write_snapshot
from tests.fakes.model_folders import quantize_shell, save_shell

KLEIN = get_variant("flux2-klein-4b")
QWEN = get_variant("qwen-image")
# Klein 4B's block count (5 double-stream blocks) at a tiny width: the size is read from it.
KLEIN_4B_TINY = Flux2Dims(5, 1, 4, 32, 64, (8, 8, 8, 8))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("folders")
    with common.use_precision(mx.float32):
        klein = flux2_shell("flux2-klein-4b", dims=KLEIN_4B_TINY)
        quantize_shell(klein, 4)
        qwen = qwen_shell("qwen-image")
        return {
            "klein-q4": save_shell(klein, KLEIN, root / "klein-q4", 4),
            "qwen": save_shell(qwen, QWEN, root / "qwen", None),
        }


def test_an_mflux_save_folder_tells_its_family_size_and_quantization(
    saved: dict[str, Path],
) -> None:
    klein = inspect_folder(saved["klein-q4"])
    assert klein.layout == "mflux-save"
    assert klein.family is KLEIN.family and klein.quantize == 4
    # Klein and Klein base share one architecture: the files cannot tell them apart.
    assert klein.candidates == ("flux2-klein-4b", "flux2-klein-base-4b")
    assert klein.detected is None
    on_disk = sum(p.stat().st_size for p in saved["klein-q4"].rglob("*") if p.is_file())
    assert klein.size_bytes == on_disk > 0
    qwen = inspect_folder(saved["qwen"])
    assert qwen.detected == "qwen-image" and qwen.quantize is None


def test_a_hugging_face_snapshot_is_recognised_too(tmp_path: Path) -> None:
    dev = inspect_folder(write_snapshot(tmp_path / "dev", get_variant("flux1-dev")))
    assert dev.layout == "Hugging Face snapshot"
    # A guidance embedder: dev or Krea dev, not schnell.
    assert dev.candidates == ("flux1-dev", "flux1-krea-dev")
    schnell = inspect_folder(write_snapshot(tmp_path / "schnell", get_variant("flux1-schnell")))
    assert schnell.detected == "flux1-schnell"


@pytest.mark.parametrize(
    "variant_id", [v.id for v in BUILTIN_VARIANTS.values() if v.family.folders is not None]
)
def test_every_variants_snapshot_is_told_by_its_familys_folder_rule(
    variant_id: str, tmp_path: Path
) -> None:
    """A Hugging Face snapshot of each built-in variant, its transformer holding its family's
    folder sample (``FolderDetection.sample``), is that family's and fits that variant."""
    variant = get_variant(variant_id)
    info = inspect_folder(write_snapshot(tmp_path / "snapshot", variant))
    assert info.family is variant.family
    assert variant_id in info.candidates
    assert info.detected in (variant_id, None)


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def test_a_folder_of_another_family_is_one_clear_line(saved: dict[str, Path]) -> None:
    with pytest.raises(ModelFolderError) as refused:
        check_folder(saved["qwen"], KLEIN)
    assert _one_line(refused.value) == (
        f"{saved['qwen']} holds a Qwen-Image model, not FLUX.2 Klein 4B (FLUX.2 Klein)"
    )
    with pytest.raises(ModelFolderError, match=r"different FLUX\.2 Klein model"):
        check_folder(saved["klein-q4"], get_variant("flux2-klein-9b"))


def test_an_incomplete_or_damaged_folder_is_one_clear_line(
    saved: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    incomplete = Path(shutil.copytree(saved["klein-q4"], tmp_path / "incomplete"))
    (incomplete / "vae" / "0.safetensors").unlink()
    with pytest.raises(weights.IncompleteSnapshotError) as refused:
        check_folder(incomplete, KLEIN)
    assert "vae/ has no weights" in _one_line(refused.value)
    damaged = Path(shutil.copytree(saved["klein-q4"], tmp_path / "damaged"))
    shard = damaged / "transformer" / "0.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(weights.IncompleteSnapshotError) as refused:
        check_folder(damaged, KLEIN)
    assert "transformer/0.safetensors is truncated" in _one_line(refused.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFolderError, match="holds no model"):
        check_folder(tmp_path / "empty", KLEIN)
    with pytest.raises(ModelFolderError, match="does not exist"):
        check_folder(tmp_path / "nowhere", KLEIN)


def test_added_folders_are_variants_remembered_and_removable(saved: dict[str, Path]) -> None:
    ambiguous = "could be any of flux2-klein-4b, flux2-klein-base-4b"
    with pytest.raises(ModelFolderError, match=ambiguous):
        add_model_folder(saved["klein-q4"])
    assert model_folders() == []
    entry = add_model_folder(saved["klein-q4"], "flux2-klein-4b")
    assert entry.variant_id == "flux2-klein-4b@klein-q4" and entry.quantize == 4
    qwen = add_model_folder(saved["qwen"])  # detected from its files
    assert qwen.variant_id == "qwen-image@qwen"
    assert add_model_folder(saved["klein-q4"], "flux2-klein-4b") == entry  # no duplicate
    # Remembered on disk: what a new launch reads.
    stored = json.loads(folders_file().read_text(encoding="utf-8"))
    assert [f["name"] for f in stored["folders"]] == ["klein-q4", "qwen"]
    variant = get_variant(entry.variant_id)
    assert variant.model_path == str(saved["klein-q4"].resolve())
    assert variant.stored_quantize == 4 and variant.family is KLEIN.family
    assert variant.coefficients == KLEIN.coefficients  # the base's gate numbers
    assert "klein-q4" in variant.display_name and "4-bit" in variant.display_name
    assert entry.variant_id in all_variants()
    # A 4-bit folder's estimate is the 4-bit one, whatever is asked.
    assert variant.memory_estimate_gb(None) == KLEIN.memory_estimate_gb(4)
    assert remove_model_folder(entry.variant_id)
    assert not remove_model_folder(entry.variant_id)
    assert entry.variant_id not in all_variants()
    assert [f.variant_id for f in model_folders()] == ["qwen-image@qwen"]


def test_a_request_for_a_folder_carries_its_path_and_stored_quantization(
    saved: dict[str, Path],
) -> None:
    entry = add_model_folder(saved["klein-q4"], "flux2-klein-4b")
    request = make_request(entry.variant_id, "a cat", size=(128, 128))
    assert request.model_path == str(saved["klein-q4"].resolve()) and request.quantize == 4
    base = make_request("flux2-klein-4b", "a cat", size=(128, 128), quantize=4)
    assert request.vanilla_key() != base.vanilla_key()
    # The same folder given as a path (the command line's --model-path) is the same run.
    by_path = make_request("flux2-klein-4b", "a cat", size=(128, 128), model_path=saved["klein-q4"])
    assert by_path.quantize == 4 and by_path.model_path == request.model_path
    with pytest.raises(RequestError, match="holds 4-bit weights"):
        make_request(entry.variant_id, "a cat", size=(128, 128), quantize=8)
    with pytest.raises(RequestError, match="does not exist"):
        make_request("flux2-klein-4b", "a cat", model_path=saved["klein-q4"] / "nope")
    with pytest.raises(RequestError, match="takes no model folder"):
        make_request("demo", "a red circle", model_path=saved["klein-q4"])


def test_an_unreadable_list_reads_as_empty_and_is_rewritten(saved: dict[str, Path]) -> None:
    folders_file().parent.mkdir(parents=True, exist_ok=True)
    folders_file().write_text("{not json", encoding="utf-8")
    assert model_folders() == []
    add_model_folder(saved["qwen"])
    assert [f.name for f in model_folders()] == ["qwen"]


def test_a_folder_whose_base_variant_is_gone_is_skipped_with_a_note_and_kept(
    saved: dict[str, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A remembered entry whose base this version does not know (renamed, removed, or written by
    a newer version): listing variants skips it with one note instead of a KeyError, and adding
    or removing another folder keeps it in the list."""
    from app.cli.main import main

    qwen = add_model_folder(saved["qwen"])
    stored = json.loads(folders_file().read_text(encoding="utf-8"))
    gone = {**stored["folders"][0], "name": "old", "base_variant": "flux9-gone"}
    stored["folders"].insert(0, gone)
    folders_file().write_text(json.dumps(stored), encoding="utf-8")

    with caplog.at_level("WARNING", logger="app.variants.folders"):
        assert [f.variant_id for f in model_folders()] == [qwen.variant_id]
        listed = all_variants()
        assert main(["variants"]) == 0
    assert qwen.variant_id in listed and "flux9-gone@old" not in listed
    assert "flux9-gone@old" not in capsys.readouterr().out
    notes = [r.getMessage() for r in caplog.records if "flux9-gone" in r.getMessage()]
    assert len(notes) == 1 and notes[0].startswith("model folder 'old' (")  # once, not per call
    assert "left out" in notes[0] and "the entry is kept" in notes[0]
    with pytest.raises(UnknownVariantError):
        get_variant("flux9-gone@old")

    # Nothing the user made is lost: the entry survives a remove and an add of others.
    assert remove_model_folder(qwen.variant_id)
    add_model_folder(saved["klein-q4"], "flux2-klein-4b")
    names = [f["name"] for f in json.loads(folders_file().read_text(encoding="utf-8"))["folders"]]
    assert names == ["old", "klein-q4"]


def test_a_folder_without_a_transformer_is_not_sized_file_by_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing "/" in Add Model Folder once added up every file on the disk (#27 item 3): a
    folder with no transformer/ holds no model, so nothing under it is walked."""
    (tmp_path / "photos" / "2026").mkdir(parents=True)
    (tmp_path / "photos" / "2026" / "a.jpg").write_bytes(b"x" * 4096)

    def no_walk(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a folder that is not a model was walked")

    monkeypatch.setattr(Path, "rglob", no_walk)
    monkeypatch.setattr("os.walk", no_walk)
    info = inspect_folder(tmp_path)
    assert (info.family, info.size_bytes, info.has_transformer) == (None, 0, False)


def test_a_folder_that_cannot_be_read_is_one_folder_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PermissionError inside the folder (a /proc entry, another user's files) is the
    folder's problem in one line, not an exception (#27 item 3)."""
    folder = write_snapshot(tmp_path / "klein", KLEIN)

    def denied(*_args: object) -> list[str]:
        raise PermissionError(13, "Permission denied", str(folder / "vae"))

    monkeypatch.setattr(weights, "snapshot_problems", denied)
    with pytest.raises(ModelFolderError) as caught:
        check_folder(folder, KLEIN)
    assert str(caught.value) == f"{folder} cannot be read: Permission denied ({folder / 'vae'})"
    # Sizing leaves out what it may not read instead of failing.
    monkeypatch.undo()
    readable = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    configs = sum(p.stat().st_size for p in folder.rglob("config.json"))
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith("config.json"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    info = inspect_folder(folder)
    assert info.family is KLEIN.family and info.size_bytes == readable - configs > 0


# -- this year's families ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def this_years(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """mflux-save folders of the tiny FLUX.3 (distilled and base), Qwen-Image 2.1 and Krea 2
    shells (Krea 2's transformer shards land at the folder's root, as mflux saves them)."""
    root = tmp_path_factory.mktemp("this-years")
    with common.use_precision(mx.float32):
        return {
            variant.id: save_shell(
                random_weight_shell(variant.family, variant.mflux_name),
                variant,
                root / variant.id,
                None,
            )
            for variant in map(
                get_variant,
                ("flux3-image-klein", "flux3-image-klein-base", "qwen-image-2.1", "krea-2"),
            )
        }


def test_this_years_mflux_saves_tell_their_family_and_checkpoint(
    this_years: dict[str, Path],
) -> None:
    assert inspect_folder(this_years["flux3-image-klein"]).detected == "flux3-image-klein"
    assert inspect_folder(this_years["flux3-image-klein-base"]).detected == (
        "flux3-image-klein-base"
    )  # no target-time embedder: the base
    qwen21 = inspect_folder(this_years["qwen-image-2.1"])
    # img_in./txt_in. are Qwen-Image's names too; the shared modulation is 2.1's
    assert qwen21.family is get_variant("qwen-image-2.1").family
    assert qwen21.candidates == ("qwen-image-2.1", "qwen-image-2.1-turbo")  # one architecture
    krea2 = inspect_folder(this_years["krea-2"])
    assert krea2.layout == "mflux-save" and krea2.detected == "krea-2"
    assert (this_years["krea-2"] / "0.safetensors").exists()  # the shards at the root
    for variant_id, folder in this_years.items():
        assert check_folder(folder, get_variant(variant_id)).family is not None
    with pytest.raises(ModelFolderError, match=r"different FLUX\.3 Image Klein model"):
        check_folder(this_years["flux3-image-klein"], get_variant("flux3-image-klein-base"))
    with pytest.raises(ModelFolderError, match=r"holds a Qwen-Image 2\.1 model, not Qwen-Image"):
        check_folder(this_years["qwen-image-2.1"], QWEN)


def test_krea2s_single_file_snapshot_is_recognised_and_checked(tmp_path: Path) -> None:
    krea2 = get_variant("krea-2")
    snapshot = write_snapshot(tmp_path / "krea", krea2)
    assert (snapshot / "turbo.safetensors").exists() and not (snapshot / "transformer").exists()
    assert inspect_folder(snapshot).detected == "krea-2"
    assert weights.snapshot_problems(snapshot, krea2) == []
    turbo = snapshot / "turbo.safetensors"
    turbo.write_bytes(turbo.read_bytes()[:-10])
    assert weights.snapshot_problems(snapshot, krea2) == [
        f"turbo.safetensors is truncated ({turbo.stat().st_size:,} of "
        f"{turbo.stat().st_size + 10:,} bytes)"
    ]
    turbo.unlink()
    assert weights.snapshot_problems(snapshot, krea2) == ["turbo.safetensors is missing"]
