"""A stand-in for ``huggingface_hub.snapshot_download`` (hub 1.x style) and tiny snapshots laid
out as mflux's weight definitions expect, for the weights and loader tests; with the fixtures both
use (``online``, ``hub``), registered for every test by ``tests/conftest.py``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import mlx.core as mx
import pytest

from app.variants import get_variant, weights

KLEIN = get_variant("flux2-klein-4b")


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub counts as reachable (the session runs with ``HF_HUB_OFFLINE=1``)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(weights, "_hub_offline", lambda: False)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
    """``weights.snapshot_download`` replaced by a ``FakeHub`` with its cache in ``tmp_path``."""
    fake = FakeHub(tmp_path / "cache")
    monkeypatch.setattr(weights, "snapshot_download", fake)
    return fake


# -- tiny snapshots -------------------------------------------------------------------------------


def transformer_keys(variant: Any) -> list[str]:
    """Weight names a transformer of ``variant`` holds: its family's folder sample
    (``FolderDetection.sample``), which app.variants.folders recognises it by."""
    return list(variant.family.folders.sample(variant.id))


def write_snapshot(root: Path, variant: Any = KLEIN) -> Path:
    """A structurally complete snapshot of ``variant``: one tiny safetensors file and a config
    per weight folder, one file per tokenizer folder (or one tiny file per name, where the family
    names the files mflux reads: ``Mflux.hub_files``)."""
    root.mkdir(parents=True, exist_ok=True)
    named = variant.family.require_mflux().hub_files
    if named is not None:  # files mflux's loader reads by name (Anima's single files)
        folders = variant.family.folders
        weight_dirs = () if folders is None else folders.weight_dirs
        for name in named[variant.mflux_name]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            in_weight_dir = Path(name).parent.as_posix() in weight_dirs
            keys = transformer_keys(variant) if in_weight_dir else ["w"]
            mx.save_safetensors(str(root / name), {k: mx.zeros((4, 4)) for k in keys})
        return root
    definition = weights._weight_definition(variant)
    for pattern in definition.get_download_patterns():
        if pattern.endswith(".safetensors") and "/" not in pattern and "*" not in pattern:
            # a single file at the root (Krea 2 Turbo's transformer)
            names = transformer_keys(variant)
            mx.save_safetensors(str(root / pattern), {n: mx.zeros((4, 4)) for n in names})
        if pattern.endswith("*.safetensors") and "/" in pattern:
            folder = root / pattern.split("/")[0]
            folder.mkdir(exist_ok=True)
            names = transformer_keys(variant) if folder.name == "transformer" else ["w"]
            mx.save_safetensors(
                str(folder / "model.safetensors"), {n: mx.zeros((4, 4)) for n in names}
            )
            (folder / "config.json").write_text("{}", encoding="utf-8")
    for subdir in weights._tokenizer_dirs(variant):
        (root / subdir).mkdir(exist_ok=True)
        (root / subdir / "tokenizer.json").write_text("{}", encoding="utf-8")
    return root


def cache_snapshot(cache: Path, variant: Any = KLEIN) -> Path:
    """The same, laid out as huggingface_hub's cache at mflux's pinned revision."""
    repo = variant.hf_repo or ""
    revision = weights.pinned_revision(repo) or ""
    storage = cache / f"models--{repo.replace('/', '--')}"
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(revision, encoding="utf-8")
    return write_snapshot(storage / "snapshots" / revision, variant)


def http_error(cls: type, status: int) -> Exception:
    request = httpx.Request("GET", "https://huggingface.co/api/models/x")
    return cls("refused", response=httpx.Response(status, request=request))


class FakeHub:
    """Stands in for ``huggingface_hub.snapshot_download``, hub-1.x style."""

    def __init__(self, cache: Path, files: dict[str, int] | None = None) -> None:
        self.cache = cache
        self.files = files or {"transformer/model.safetensors": 3_000_000, "vae/x.json": 500}
        self.calls: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.on_chunk: Any = None
        self.variant: Any = KLEIN  # whose snapshot a download writes

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        if kwargs.get("dry_run"):
            return [
                SimpleNamespace(filename=n, file_size=s, will_download=True)
                for n, s in self.files.items()
            ]
        tqdm_class = kwargs["tqdm_class"]
        # hub 1.x: a bytes "transfer" bar, a bytes "reconstruct" bar, a file counter.
        transfer = tqdm_class(total=0, initial=0, unit="B", unit_scale=True, desc="Downloading")
        reconstruct = tqdm_class(total=0, initial=0, unit="B", unit_scale=True, desc="Rebuild")
        with tqdm_class(total=len(self.files), desc="Fetching files") as counter:
            for size in self.files.values():
                reconstruct.total += size
                transfer.total += size
                for _ in range(4):
                    if self.on_chunk is not None:
                        self.on_chunk()
                    reconstruct.update(size // 4)
                    transfer.update(size // 4)
                counter.update(1)
        return str(cache_snapshot(self.cache, self.variant))


def damage(root: Path, how: str) -> str:
    weights = root / "transformer" / "model.safetensors"
    if how == "missing folder":
        for f in (root / "vae").iterdir():
            f.unlink()
        (root / "vae").rmdir()
        return "vae/ has no weights"
    if how == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[:-10])
        return "transformer/model.safetensors is truncated"
    if how == "damaged header":
        weights.write_bytes(b"\xff" * 64)
        return "transformer/model.safetensors has a damaged header"
    if how == "empty":
        weights.write_bytes(b"")
        return "transformer/model.safetensors is empty or truncated"
    if how == "too long":
        weights.write_bytes(weights.read_bytes() + b"junk")
        return "transformer/model.safetensors is longer than its header says"
    if how == "missing shard":
        index = {"weight_map": {"a": "model.safetensors", "b": "model-2.safetensors"}}
        (root / "transformer" / "model.safetensors.index.json").write_text(json.dumps(index))
        return "transformer/model-2.safetensors is missing"
    if how == "bad config":
        (root / "vae" / "config.json").write_text('{"half', encoding="utf-8")
        return "vae/config.json is unreadable"
    if how == "no tokenizer":
        for f in (root / "tokenizer").iterdir():
            f.unlink()
        return "tokenizer/ (the tokenizer) is missing"
    if how == "broken link":
        target = root / "elsewhere.safetensors"
        weights.rename(target)
        weights.symlink_to(target)
        target.unlink()
        return "transformer/model.safetensors is missing (a broken link in the cache)"
    raise AssertionError(how)
