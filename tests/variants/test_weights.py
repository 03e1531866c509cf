"""Model weights (app/variants/weights.py), every path exercised with tiny files: on disk?, size,
download with progress and cancel, verification, offline, no network. The Hugging Face client is
the real one where it can run offline (the test session sets HF_HUB_OFFLINE=1) or against
unreachable loopback endpoints (refused, unresolvable, silent), and a fake ``snapshot_download``
that behaves like hub 1.x (byte progress bars from ``tqdm_class``, a dry-run file list)
elsewhere."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError

from app.errors import Cancelled
from app.variants import VARIANTS, get_variant, weights
from app.variants.weights import NO_ANSWER
from tests.fakes.hub import KLEIN, FakeHub, cache_snapshot, damage, http_error, write_snapshot
from tests.fakes.network import UNREACHABLE_REASONS, unreachable_endpoint

ROOT = Path(__file__).resolve().parents[2]
DEV = get_variant("flux1-dev")
KLEIN_PIN = weights.pinned_revision("black-forest-labs/FLUX.2-klein-4B")


def test_a_complete_snapshot_passes(tmp_path: Path) -> None:
    root = write_snapshot(tmp_path / "snap")
    assert weights.snapshot_problems(root, KLEIN) == []
    weights.verify_snapshot(root, KLEIN)


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
    expected = damage(root, how)
    assert any(p.startswith(expected) for p in weights.snapshot_problems(root, KLEIN))
    with pytest.raises(weights.IncompleteSnapshotError) as failed:
        weights.verify_snapshot(root, KLEIN)
    message = str(failed.value)
    assert "\n" not in message and expected in message
    assert "delete that folder and download again" in message


# -- offline (the real Hugging Face client, HF_HUB_OFFLINE=1) ----------------------------------


def test_offline_and_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(weights.OfflineNotCachedError) as failed:
        weights.ensure_snapshot(KLEIN, cache_dir=tmp_path)
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
    path = weights.ensure_snapshot(
        KLEIN, cache_dir=tmp_path, progress=lambda d, t, m: messages.append(m)
    )
    assert path == snapshot and snapshot.name == KLEIN_PIN
    assert messages == ["checking the files of FLUX.2 Klein 4B"]


def test_offline_and_cached_but_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    damage(cache_snapshot(tmp_path), "truncated")
    with pytest.raises(weights.IncompleteSnapshotError, match="is truncated"):
        weights.ensure_snapshot(KLEIN, cache_dir=tmp_path)


def test_offline_is_read_at_call_time(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights, "_hub_offline", lambda: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    hub.error = LocalEntryNotFoundError("not cached")
    with pytest.raises(weights.OfflineNotCachedError):
        weights.ensure_snapshot(KLEIN)
    assert hub.calls[0]["local_files_only"] is True  # nothing was fetched


def test_snapshot_status_for_the_variant_picker(tmp_path: Path) -> None:
    assert weights.snapshot_status(KLEIN, tmp_path) == weights.DiskStatus(False, None)
    snapshot = cache_snapshot(tmp_path)
    assert weights.snapshot_status(KLEIN, tmp_path) == weights.DiskStatus(True, snapshot)
    damage(snapshot, "missing shard")
    status = weights.snapshot_status(KLEIN, tmp_path)
    assert not status.on_disk and status.problems == ("transformer/model-2.safetensors is missing",)


def test_download_size_offline_is_an_estimate(tmp_path: Path) -> None:
    size = weights.download_size(KLEIN, cache_dir=tmp_path)
    assert size == weights.DownloadSize(16_000_000_000, 16_000_000_000, False)


def test_download_size_on_disk_needs_nothing(tmp_path: Path) -> None:
    cache_snapshot(tmp_path)
    size = weights.download_size(KLEIN, cache_dir=tmp_path)
    assert size.missing_bytes == 0 and size.total_bytes > 0 and size.exact


def test_download_size_online_is_exact(hub: FakeHub, online: None, tmp_path: Path) -> None:
    size = weights.download_size(KLEIN, cache_dir=tmp_path / "empty")
    assert size == weights.DownloadSize(3_000_500, 3_000_500, True)
    assert hub.calls[0]["revision"] == KLEIN_PIN
    hub.error = http_error(RepositoryNotFoundError, 404)
    assert not weights.download_size(KLEIN, cache_dir=tmp_path / "empty").exact


# -- online (a fake hub) ----------------------------------------------------------------------


def test_download_reports_bytes_and_checks_the_result(hub: FakeHub, online: None) -> None:
    reports: list[tuple[int | None, int | None, str]] = []
    path = weights.ensure_snapshot(KLEIN, progress=lambda d, t, m: reports.append((d, t, m)))
    assert path.is_dir()
    call = hub.calls[-1]
    assert call["revision"] == KLEIN_PIN
    assert call["allow_patterns"] == weights.download_patterns(KLEIN)
    byte_reports = [(d, t) for d, t, _ in reports if d is not None]
    assert byte_reports[0] == (0, 3_000_500)  # the total is known before the first byte
    assert byte_reports[-1] == (3_000_500, 3_000_500)
    done = [d for d, _ in byte_reports]
    assert done == sorted(done) and len(done) > 4
    assert reports[-1] == (None, None, "checking the files of FLUX.2 Klein 4B")
    assert reports[-2][2] == "downloading FLUX.2 Klein 4B: 3 MB of 3 MB"


def test_a_gated_model_says_so_before_its_download_starts(hub: FakeHub, online: None) -> None:
    flux3 = get_variant("flux3-image-klein")
    hub.variant = flux3
    reports: list[tuple[int | None, int | None, str]] = []
    weights.ensure_snapshot(flux3, progress=lambda d, t, m: reports.append((d, t, m)))
    note = (
        "FLUX.3 Image Klein is a gated model: accept its licence at "
        "https://huggingface.co/black-forest-labs/flux-3-image-klein and log in with "
        "`hf auth login` (or set HF_TOKEN) before it downloads"
    )
    assert flux3.licence_note == note
    assert reports[0] == (None, None, note)  # before the first byte (and the size query)
    assert [m for _, _, m in reports].count(note) == 1
    assert len(hub.calls) == 2  # then the size, then the download itself
    gated = {v.id for v in VARIANTS.values() if v.gated_repo}
    assert gated >= {"flux3-image-klein", "flux3-image-klein-base", "krea-2", "flux1-dev"}


LICENSED = sorted(v.id for v in VARIANTS.values() if v.gated_repo or v.licence is not None)


def test_no_variant_keeps_its_licence_only_in_its_notes() -> None:
    """Walk #39 item 12: Qwen-Image 2.1's Qwen Research License sat in the row's ``notes``,
    which nothing says before a download: a licence is the row's ``licence``."""
    hidden = {v.id: n for v in VARIANTS.values() for n in v.notes if "licen" in n.lower()}
    assert hidden == {}
    assert {"qwen-image-2.1", "qwen-image-2.1-turbo"} <= set(LICENSED)


@pytest.mark.parametrize("variant_id", LICENSED)
def test_every_licensed_variant_says_its_licence_before_its_download_starts(
    hub: FakeHub, online: None, variant_id: str
) -> None:
    """Every variant whose weights come under a licence to accept or one that limits their use
    says so before the first byte (and before the size query), once, naming the licence."""
    variant = get_variant(variant_id)
    note = variant.licence_note
    assert note is not None and variant.display_name in note
    assert f"https://huggingface.co/{variant.hf_repo}" in note
    if variant.licence is not None and not variant.gated_repo:
        assert variant.licence in note
    hub.variant = variant
    reports: list[tuple[int | None, int | None, str]] = []
    weights.ensure_snapshot(variant, progress=lambda d, t, m: reports.append((d, t, m)))
    assert reports[0] == (None, None, note)
    assert [m for _, _, m in reports].count(note) == 1


def test_an_unlicensed_variant_says_no_licence() -> None:
    assert KLEIN.licence is None and not KLEIN.gated_repo and KLEIN.licence_note is None


def test_download_can_be_cancelled_mid_way(hub: FakeHub, online: None) -> None:
    cancel = threading.Event()
    chunks = 0

    def chunk() -> None:
        nonlocal chunks
        chunks += 1
        if chunks == 3:
            cancel.set()

    hub.on_chunk = chunk
    with pytest.raises(weights.DownloadCancelled) as cancelled:
        weights.ensure_snapshot(KLEIN, cancel=cancel)
    assert isinstance(cancelled.value, Cancelled)  # the engine reports a cancel, not a failure
    assert chunks == 3


# -- no network (the real Hugging Face client, unreachable loopback endpoints) --------------------

# huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE once, at import: each case runs in a fresh
# interpreter that inherits this test's environment.
REAL_HUB_SCRIPT = """
from app.variants import VARIANTS, get_variant, weights
variant = get_variant("flux2-klein-4b")
print("exact size:", weights.download_size(variant).exact)
try:
    weights.ensure_snapshot(variant)
except weights.LoadError as exc:
    print(type(exc).__name__)
    print(exc)
"""


def real_hub_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str, cache: Path) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")  # the silent server: give up after 1 s
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")


@pytest.mark.parametrize("kind", sorted(UNREACHABLE_REASONS))
def test_no_network_through_the_real_client_is_one_sentence(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What the window's download (``ensure_snapshot``) and its size query meet offline."""
    with unreachable_endpoint(kind) as endpoint:
        real_hub_environment(monkeypatch, endpoint, tmp_path / "cache")
        done = subprocess.run(
            [sys.executable, "-c", REAL_HUB_SCRIPT],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    size_line, kind_line, message = done.stdout.strip().splitlines()
    assert size_line == "exact size: False"  # the picker falls back to the estimate
    assert kind_line == "NoConnectionError"
    headline = "Hugging Face is not answering" if kind == "silent" else "No internet connection"
    assert message == (
        f"{headline}: cannot download FLUX.2 Klein 4B (16.0 GB) from Hugging Face "
        f"({UNREACHABLE_REASONS[kind]}); go online and try again, or pick a variant that is "
        "already on disk or the embedded demo"
    )
    assert "Traceback" not in done.stderr


def test_connection_problem_reads_the_cause_chain() -> None:
    """The hub wraps a transport failure (``LocalEntryNotFoundError`` from a ``ConnectError``);
    the reason is found underneath, and other errors are not mistaken for one."""
    request = httpx.Request("GET", "http://127.0.0.1:9/api")
    try:
        try:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        except httpx.ConnectError as exc:
            raise LocalEntryNotFoundError("cannot find the snapshot") from exc
    except LocalEntryNotFoundError as wrapped:
        assert weights.connection_problem(wrapped) == "the connection failed"
    assert weights.connection_problem(httpx.ReadTimeout("slow", request=request)) == NO_ANSWER
    assert weights.connection_problem(ValueError("a bug")) is None
    assert weights.connection_problem(LocalEntryNotFoundError("not cached")) is None


def test_hub_timeout_is_read_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2.5")
    assert weights.hub_timeout_s() == 2.5
    for unusable in ("", "soon", "0", "-3"):
        monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", unusable)
        assert weights.hub_timeout_s() == weights.DEFAULT_HUB_TIMEOUT_S
