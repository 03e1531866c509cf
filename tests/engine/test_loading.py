"""Loading real models (app/loading.py), every path exercised with tiny files and fakes: there
is no network here. The Hugging Face client is the real one where it can run offline (the test
session sets HF_HUB_OFFLINE=1), and a fake ``snapshot_download`` that behaves like hub 1.x
(byte progress bars from ``tqdm_class``, a dry-run file list, its exception types) elsewhere."""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import mlx.core as mx
import pytest
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
)

from app import loading
from app.engine.protocol import Cancelled
from app.variants import VARIANTS, Family, get_variant

REAL = [v for v in VARIANTS.values() if not v.embedded]
KLEIN = get_variant("flux2-klein-4b")
DEV = get_variant("flux1-dev")
GB = 1024**3
KLEIN_PIN = loading.pinned_revision("black-forest-labs/FLUX.2-klein-4B")


# -- tiny snapshots -------------------------------------------------------------------------------


def write_snapshot(root: Path, variant: Any = KLEIN) -> Path:
    """A structurally complete snapshot of ``variant``: one tiny safetensors file and a config
    per weight folder, one file per tokenizer folder."""
    root.mkdir(parents=True, exist_ok=True)
    definition = loading._weight_definition(variant)
    for pattern in definition.get_download_patterns():
        if pattern.endswith("*.safetensors") and "/" in pattern:
            folder = root / pattern.split("/")[0]
            folder.mkdir(exist_ok=True)
            mx.save_safetensors(str(folder / "model.safetensors"), {"w": mx.zeros((4, 4))})
            (folder / "config.json").write_text("{}", encoding="utf-8")
    for subdir in loading._tokenizer_dirs(variant):
        (root / subdir).mkdir(exist_ok=True)
        (root / subdir / "tokenizer.json").write_text("{}", encoding="utf-8")
    return root


def cache_snapshot(cache: Path, variant: Any = KLEIN) -> Path:
    """The same, laid out as huggingface_hub's cache at mflux's pinned revision."""
    repo = variant.hf_repo or ""
    revision = loading.pinned_revision(repo) or ""
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
        return str(cache_snapshot(self.cache))


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "_hub_offline", lambda: False)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
    fake = FakeHub(tmp_path / "cache")
    monkeypatch.setattr(loading, "snapshot_download", fake)
    return fake


# -- what to download ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", REAL, ids=lambda v: v.id)
def test_each_real_variant_maps_to_mflux_config_repo_pin_and_patterns(variant: Any) -> None:
    config = loading.model_config(variant)
    assert config.model_name == variant.hf_repo  # the registry's repo is the one mflux loads
    assert loading.pinned_revision(variant.hf_repo or "")  # and mflux pins a revision of it
    patterns = loading.download_patterns(variant)
    assert "transformer/*.safetensors" in patterns and "vae/*.safetensors" in patterns
    assert any(p.startswith("tokenizer") for p in patterns)
    assert (
        loading.pipeline_class(variant).__name__
        == {
            Family.flux1: "Flux1",
            Family.flux2: "Flux2Klein",
            Family.z_image: "ZImage",
            Family.qwen_image: "QwenImage",
        }[variant.family]
    )


def test_embedded_variants_are_not_loaded_here() -> None:
    with pytest.raises(loading.ModelNotFoundError, match="ships with the app"):
        loading.load_pipeline(get_variant("demo"))
    assert loading.snapshot_status(get_variant("demo")).on_disk


# -- memory -------------------------------------------------------------------------------------


def test_physical_memory_is_known_here() -> None:
    memory = loading.physical_memory_bytes()
    assert memory is not None and memory > 1 * GB


def test_memory_check_refuses_with_what_would_fit() -> None:
    loading.check_memory(DEV, 4, memory_bytes=64 * GB)  # fits: silent
    with pytest.raises(loading.NotEnoughMemoryError) as refused:
        loading.check_memory(DEV, None, memory_bytes=24 * GB)
    message = str(refused.value)
    assert "FLUX.1 dev at full precision needs about 36 GB" in message
    assert "this machine has 24 GB" in message and "choose 8-bit quantization" in message
    with pytest.raises(loading.NotEnoughMemoryError, match="no quantization fits"):
        loading.check_memory(DEV, 4, memory_bytes=8 * GB)


def test_not_enough_memory_is_refused_before_any_download(hub: FakeHub, online: None) -> None:
    with pytest.raises(loading.NotEnoughMemoryError):
        loading.load_pipeline(DEV, memory_bytes=16 * GB)
    assert hub.calls == []


# -- snapshot checks ----------------------------------------------------------------------------


def test_a_complete_snapshot_passes(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snap")
    assert loading.snapshot_problems(root, KLEIN) == []
    loading.verify_snapshot(root, KLEIN)


def _damage(root: Path, how: str) -> str:
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


DAMAGES = [
    "missing folder",
    "truncated",
    "damaged header",
    "empty",
    "too long",
    "missing shard",
    "bad config",
    "no tokenizer",
    "broken link",
]


@pytest.mark.parametrize("how", DAMAGES)
def test_partial_or_corrupt_snapshots_fail_with_one_message(tmp_path: Path, how: str) -> None:
    root = write_snapshot(tmp_path / "snap")
    expected = _damage(root, how)
    assert any(p.startswith(expected) for p in loading.snapshot_problems(root, KLEIN))
    with pytest.raises(loading.IncompleteSnapshotError) as failed:
        loading.verify_snapshot(root, KLEIN)
    message = str(failed.value)
    assert "\n" not in message and expected in message
    assert "delete that folder and download again" in message


def test_a_local_model_path_is_checked_before_mflux_sees_it(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snap")
    _damage(root, "truncated")
    with pytest.raises(loading.IncompleteSnapshotError):
        loading.load_pipeline(KLEIN, model_path=str(root), memory_bytes=64 * GB)


# -- offline (the real Hugging Face client, HF_HUB_OFFLINE=1) ----------------------------------


def test_offline_and_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(loading.OfflineNotCachedError) as failed:
        loading.ensure_snapshot(KLEIN, cache_dir=tmp_path)
    assert str(failed.value) == (
        "FLUX.2 Klein 4B is not downloaded and HF_HUB_OFFLINE is set; unset it (or go online) "
        "to download it, or pick a variant that is on disk"
    )


def test_offline_and_cached_uses_the_pinned_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snapshot = cache_snapshot(tmp_path)
    messages: list[str] = []
    path = loading.ensure_snapshot(
        KLEIN, cache_dir=tmp_path, progress=lambda d, t, m: messages.append(m)
    )
    assert path == snapshot and snapshot.name == KLEIN_PIN
    assert messages == ["checking the files of FLUX.2 Klein 4B"]


def test_offline_and_cached_but_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _damage(cache_snapshot(tmp_path), "truncated")
    with pytest.raises(loading.IncompleteSnapshotError, match="is truncated"):
        loading.ensure_snapshot(KLEIN, cache_dir=tmp_path)


def test_offline_is_read_at_call_time(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "_hub_offline", lambda: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    hub.error = LocalEntryNotFoundError("not cached")
    with pytest.raises(loading.OfflineNotCachedError):
        loading.ensure_snapshot(KLEIN)
    assert hub.calls[0]["local_files_only"] is True  # nothing was fetched


def test_snapshot_status_for_the_variant_picker(tmp_path: Path) -> None:
    assert loading.snapshot_status(KLEIN, tmp_path) == loading.DiskStatus(False, None)
    snapshot = cache_snapshot(tmp_path)
    assert loading.snapshot_status(KLEIN, tmp_path) == loading.DiskStatus(True, snapshot)
    _damage(snapshot, "missing shard")
    status = loading.snapshot_status(KLEIN, tmp_path)
    assert not status.on_disk and status.problems == ("transformer/model-2.safetensors is missing",)


def test_download_size_offline_is_an_estimate(tmp_path: Path) -> None:
    size = loading.download_size(KLEIN, cache_dir=tmp_path)
    assert size == loading.DownloadSize(16_000_000_000, 16_000_000_000, False)


def test_download_size_on_disk_needs_nothing(tmp_path: Path) -> None:
    cache_snapshot(tmp_path)
    size = loading.download_size(KLEIN, cache_dir=tmp_path)
    assert size.missing_bytes == 0 and size.total_bytes > 0 and size.exact


def test_download_size_online_is_exact(hub: FakeHub, online: None, tmp_path: Path) -> None:
    size = loading.download_size(KLEIN, cache_dir=tmp_path / "empty")
    assert size == loading.DownloadSize(3_000_500, 3_000_500, True)
    assert hub.calls[0]["revision"] == KLEIN_PIN
    hub.error = http_error(RepositoryNotFoundError, 404)
    assert not loading.download_size(KLEIN, cache_dir=tmp_path / "empty").exact


# -- online (a fake hub) ----------------------------------------------------------------------


def test_download_reports_bytes_and_checks_the_result(hub: FakeHub, online: None) -> None:
    reports: list[tuple[int | None, int | None, str]] = []
    path = loading.ensure_snapshot(KLEIN, progress=lambda d, t, m: reports.append((d, t, m)))
    assert path.is_dir()
    call = hub.calls[-1]
    assert call["revision"] == KLEIN_PIN
    assert call["allow_patterns"] == loading.download_patterns(KLEIN)
    byte_reports = [(d, t) for d, t, _ in reports if d is not None]
    assert byte_reports[0] == (0, 3_000_500)  # the total is known before the first byte
    assert byte_reports[-1] == (3_000_500, 3_000_500)
    done = [d for d, _ in byte_reports]
    assert done == sorted(done) and len(done) > 4
    assert reports[-1] == (None, None, "checking the files of FLUX.2 Klein 4B")
    assert reports[-2][2] == "downloading FLUX.2 Klein 4B: 3 MB of 3 MB"


def test_download_can_be_cancelled_mid_way(hub: FakeHub, online: None) -> None:
    cancel = threading.Event()
    chunks = 0

    def chunk() -> None:
        nonlocal chunks
        chunks += 1
        if chunks == 3:
            cancel.set()

    hub.on_chunk = chunk
    with pytest.raises(loading.DownloadCancelled) as cancelled:
        loading.ensure_snapshot(KLEIN, cancel=cancel)
    assert isinstance(cancelled.value, Cancelled)  # the engine reports a cancel, not a failure
    assert chunks == 3


def test_a_cancel_before_starting_fetches_nothing(hub: FakeHub, online: None) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(loading.DownloadCancelled):
        loading.load_pipeline(KLEIN, cancel=cancel, memory_bytes=64 * GB)
    assert hub.calls == []


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        (
            http_error(GatedRepoError, 403),
            loading.GatedModelError,
            "FLUX.1 dev is a gated model: accept its licence at "
            "https://huggingface.co/black-forest-labs/FLUX.1-dev, then log in with "
            "`hf auth login` (or set HF_TOKEN) and try again",
        ),
        (
            http_error(HfHubHTTPError, 401),
            loading.GatedModelError,
            "Hugging Face refused access to black-forest-labs/FLUX.1-dev (HTTP 401)",
        ),
        (
            http_error(RepositoryNotFoundError, 404),
            loading.ModelNotFoundError,
            "black-forest-labs/FLUX.1-dev was not found on Hugging Face",
        ),
        (
            LocalEntryNotFoundError("connection refused"),
            loading.NetworkError,
            "FLUX.1 dev is not downloaded and Hugging Face cannot be reached",
        ),
        (
            IncompleteSnapshotError("3 files missing", snapshot_path="/cache/x"),
            loading.IncompleteSnapshotError,
            "the cached download of FLUX.1 dev is incomplete",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device"),
            loading.NotEnoughDiskError,
            "the disk is full while downloading FLUX.1 dev",
        ),
        (http_error(HfHubHTTPError, 500), loading.NetworkError, "HTTP 500"),
    ],
    ids=["gated", "token", "not-found", "network", "incomplete", "disk-full", "server"],
)
def test_hub_failures_become_one_clear_message(
    hub: FakeHub, online: None, error: Exception, kind: type, text: str
) -> None:
    hub.error = error
    with pytest.raises(kind) as failed:
        loading.load_pipeline(DEV, quantize=4, memory_bytes=64 * GB)
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
    monkeypatch.setattr(loading, "pipeline_class", lambda variant: FakePipeline)
    return FakePipeline


@pytest.mark.parametrize("quantize", [None, 8, 4])
def test_load_builds_with_mflux_constructor_arguments(
    hub: FakeHub, online: None, fake_mflux: type[FakePipeline], quantize: int | None
) -> None:
    messages: list[str] = []
    pipeline = loading.load_pipeline(
        KLEIN, quantize=quantize, memory_bytes=64 * GB, progress=lambda d, t, m: messages.append(m)
    )
    assert isinstance(pipeline, FakePipeline)
    (made,) = fake_mflux.made
    assert made["quantize"] == quantize
    assert made["model_config"] is loading.model_config(KLEIN)
    assert Path(made["model_path"]).name == KLEIN_PIN
    assert messages[-1].startswith("loading FLUX.2 Klein 4B")


def test_load_from_a_local_folder_or_another_repo(
    hub: FakeHub, online: None, fake_mflux: type[FakePipeline], tmp_path: Path
) -> None:
    local = write_snapshot(tmp_path / "my-klein")
    loading.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert fake_mflux.made[-1]["model_path"] == str(local) and hub.calls == []
    loading.load_pipeline(KLEIN, model_path="someone/klein-finetune", memory_bytes=64 * GB)
    assert hub.calls[-1]["repo_id"] == "someone/klein-finetune"
    assert hub.calls[-1]["revision"] is None  # mflux pins only its own repos
    with pytest.raises(loading.ModelNotFoundError, match="neither a folder nor"):
        loading.load_pipeline(KLEIN, model_path="no/such/folder", memory_bytes=64 * GB)


def test_mflux_failures_become_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, online: None
) -> None:
    local = write_snapshot(tmp_path / "snap")

    class Exploding:
        def __init__(self, **kwargs: Any) -> None:
            raise KeyError("transformer.blocks.0.weight\n(and a long story)")

    monkeypatch.setattr(loading, "pipeline_class", lambda v: Exploding)
    with pytest.raises(loading.ModelLoadError) as failed:
        loading.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith(f"mflux could not load FLUX.2 Klein 4B from {local}: ")

    class Oom:
        def __init__(self, **kwargs: Any) -> None:
            raise MemoryError

    monkeypatch.setattr(loading, "pipeline_class", lambda v: Oom)
    with pytest.raises(loading.NotEnoughMemoryError, match="ran out of memory"):
        loading.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)


def test_real_mflux_constructor_on_unusable_files_fails_with_one_line(tmp_path: Path) -> None:
    """mflux's own Flux2Klein constructor, on a folder that passes our checks but holds no real
    weights or tokenizer: whatever mflux raises reaches the user as one sentence."""
    local = write_snapshot(tmp_path / "snap")
    with pytest.raises(loading.ModelLoadError) as failed:
        loading.load_pipeline(KLEIN, model_path=str(local), memory_bytes=64 * GB)
    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith("mflux could not load FLUX.2 Klein 4B")


def test_flux1_dev_here_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `generate --variant flux1-dev` meets on this box: no weights, no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(loading.OfflineNotCachedError, match=r"FLUX\.1 dev is not downloaded"):
        loading.load_pipeline(DEV, quantize=4, cache_dir=tmp_path, memory_bytes=64 * GB)
