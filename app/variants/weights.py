"""Model weights on Hugging Face: on disk?, how big, download with progress, verification.

- the snapshot comes from Hugging Face through ``huggingface_hub.snapshot_download`` at mflux's
  pinned revision, with the same file patterns mflux would download, and with progress (bytes
  done / total) reported to a callback that can also cancel;
- ``HF_HUB_OFFLINE`` is honoured (read when called): nothing is fetched, the cache must hold it;
- a snapshot is checked before use: every weight file present, every safetensors file as long as
  its header says, every indexed shard there, JSON readable;
- every failure is one ``LoadError`` whose message is a sentence for the user, never a traceback;
  no network (no route, no name resolution, refused, no answer in time) says so, with the size
  and what to do instead.

Queries for the variant picker: ``snapshot_status`` (is it on disk, complete?) and
``download_size`` (bytes to fetch, exact from the Hub when online, an estimate otherwise).
Building the model from the snapshot is ``app.engine.loader``'s. mflux (its file patterns and
pinned revisions) is imported only when a real variant is asked about, so this module stays cheap
to import for the window.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from huggingface_hub import constants, get_session, set_client_factory, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.errors import IncompleteSnapshotError as HubIncompleteSnapshotError
from tqdm.auto import tqdm

from app.errors import DownloadCancelled, UserFacingError
from app.variants.catalog import Variant

_MAX_HEADER = 100 * 1024 * 1024  # a safetensors JSON header is kilobytes; more means garbage


# -- errors -------------------------------------------------------------------------------------


class LoadError(UserFacingError):
    """A model could not be loaded. ``str(error)`` is one sentence for the user."""


class OfflineNotCachedError(LoadError):
    pass


class GatedModelError(LoadError):
    pass


class ModelNotFoundError(LoadError):
    pass


class NetworkError(LoadError):
    pass


class NotEnoughDiskError(LoadError):
    pass


class IncompleteSnapshotError(LoadError):
    pass


class NoConnectionError(NetworkError):
    """Hugging Face could not be reached at all: no network, no name resolution, refused, or no
    answer in time."""


# Type names of the HTTP clients' transport failures (httpx for huggingface_hub 1.x, requests
# and urllib3 for 0.x), matched by name so that neither client has to be imported here.
_TRANSPORT_MODULES = ("httpx", "httpcore", "requests", "urllib3")
_TIMEOUT_NAMES = {"TimeoutException", "ConnectTimeout", "ReadTimeout", "Timeout", "PoolTimeout"}
_CONNECT_NAMES = {
    "ConnectError",
    "ConnectionError",
    "ProxyError",
    "NetworkError",
    "NewConnectionError",
}
DEFAULT_HUB_TIMEOUT_S = 30.0
NO_ANSWER = "no answer in time"


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def connection_problem(exc: BaseException) -> str | None:
    """Why Hugging Face could not be reached, as a few words, when ``exc`` (or what caused it) is
    a transport failure; None for any other error (HTTP statuses, disk, a bug)."""
    for link in _exception_chain(exc):
        if isinstance(link, socket.gaierror):
            return "the host name could not be resolved"
        if isinstance(link, ConnectionRefusedError):
            return "the connection was refused"
        if isinstance(link, TimeoutError):
            return NO_ANSWER
    for link in _exception_chain(exc):
        kinds = [c for c in type(link).__mro__ if c.__module__.split(".")[0] in _TRANSPORT_MODULES]
        names = {c.__name__ for c in kinds}
        if names & _TIMEOUT_NAMES:
            return NO_ANSWER
        if names & _CONNECT_NAMES:
            return "the connection failed"
        if isinstance(link, ConnectionError):
            return "the connection failed"
    return None


def no_connection_message(variant: Variant, reason: str) -> str:
    headline = "Hugging Face is not answering" if reason == NO_ANSWER else "No internet connection"
    return (
        f"{headline}: cannot download {variant.display_name} "
        f"({_size(estimated_download_bytes(variant))}) from Hugging Face ({reason}); go online "
        "and try again, or pick a variant that is already on disk or the embedded demo"
    )


def hub_timeout_s() -> float:
    """Seconds to wait for Hugging Face to answer: ``HF_HUB_DOWNLOAD_TIMEOUT``, read when called."""
    try:
        value = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or DEFAULT_HUB_TIMEOUT_S)
    except ValueError:
        return DEFAULT_HUB_TIMEOUT_S
    return value if value > 0 else DEFAULT_HUB_TIMEOUT_S


class _TimeLimitTransport(httpx.HTTPTransport):
    """Gives every request that has no time limit one (``hub_timeout_s``, read per request).

    huggingface_hub lists a repository's files with ``timeout=None``, which overrides any client
    default, so a server that accepts and never answers would hang the download forever; limits a
    request does set (file transfers: ``HF_HUB_DOWNLOAD_TIMEOUT``) are kept."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        limits = dict(request.extensions.get("timeout") or {})
        floor = hub_timeout_s()
        request.extensions["timeout"] = {
            phase: floor if limits.get(phase) is None else limits[phase]
            for phase in ("connect", "read", "write", "pool")
        }
        return super().handle_request(request)


_hub_client_bounded = False
_hub_client_lock = threading.Lock()


def _bound_hub_waits() -> None:
    """Make huggingface_hub's shared client (once per process) one whose requests cannot wait
    forever; it keeps the hub's own request hooks and redirect rule."""
    global _hub_client_bounded
    with _hub_client_lock:
        if _hub_client_bounded:
            return
        template = get_session()
        hooks, follow = template.event_hooks, template.follow_redirects

        def bounded_client() -> httpx.Client:
            return httpx.Client(
                transport=_TimeLimitTransport(), event_hooks=hooks, follow_redirects=follow
            )

        set_client_factory(bounded_client)
        _hub_client_bounded = True


# -- what to download -------------------------------------------------------------------------


def offline_mode() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as set now, not at import."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _hub_offline() -> bool:
    """huggingface_hub reads HF_HUB_OFFLINE once, at import; it refuses the network then too."""
    return bool(constants.HF_HUB_OFFLINE)


def require_real(variant: Variant) -> None:
    if variant.family.weights_shipped or not variant.hf_repo or not variant.mflux_name:
        raise ModelNotFoundError(f"{variant.display_name} ships with the app; nothing to load")


def _weight_definition(variant: Variant) -> Any:
    """mflux's weight definition of the variant's family (``FamilyError`` where it has none)."""
    return variant.family.require_mflux().weight_definition()


def _hub_files(variant: Variant) -> tuple[str, ...] | None:
    """The files mflux reads by name from the variant's Hub repo (``Mflux.hub_files``), or None
    where it downloads its weight definition's patterns."""
    files = variant.family.require_mflux().hub_files
    return None if files is None else files[variant.mflux_name or ""]


def download_patterns(variant: Variant) -> list[str]:
    """mflux's own file patterns for this family: weights, configs and tokenizers (or the files
    its loader reads by name, where it names them)."""
    require_real(variant)
    named = _hub_files(variant)
    if named is not None:
        return list(named)
    definition = _weight_definition(variant)
    patterns = list(definition.get_download_patterns())
    for tokenizer in definition.get_tokenizers():
        patterns += tokenizer.download_patterns or [f"{tokenizer.hf_subdir}/**"]
    return list(dict.fromkeys(patterns))


def _tokenizer_dirs(variant: Variant) -> list[str]:
    return [t.hf_subdir for t in _weight_definition(variant).get_tokenizers() if t.hf_subdir]


def pinned_revision(repo_id: str) -> str | None:
    from mflux.models.common.resolution.model_revisions import ModelRevisions

    return ModelRevisions.get(repo_id)


# -- snapshot checks ----------------------------------------------------------------------------


def _safetensors_problem(path: Path) -> str | None:
    """None if the file is as long as its own header says, else what is wrong."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                return "is empty or truncated"
            (header_len,) = struct.unpack("<Q", raw)
            if header_len <= 0 or header_len > _MAX_HEADER or 8 + header_len > size:
                return "has a damaged header"
            header = json.loads(handle.read(header_len))
    except FileNotFoundError:
        return "is missing (a broken link in the cache)"
    except (OSError, ValueError, UnicodeDecodeError):
        return "has a damaged header"
    if not isinstance(header, dict):
        return "has a damaged header"
    ends = [
        int(entry["data_offsets"][1])
        for key, entry in header.items()
        if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    expected = 8 + header_len + max(ends, default=0)
    if size < expected:
        return f"is truncated ({size:,} of {expected:,} bytes)"
    if size > expected:
        return f"is longer than its header says ({size:,} of {expected:,} bytes)"
    return None


def snapshot_problems(root: Path, variant: Variant) -> list[str]:
    """Everything missing or damaged in a local snapshot of ``variant``; empty means complete."""
    problems: list[str] = []
    if not root.is_dir():
        return [f"{root} is not a folder"]
    named = _hub_files(variant)
    if named is not None:  # files mflux reads by name: each present and whole
        for name in named:
            file = root / name
            problem = _safetensors_problem(file) if file.exists() else "is missing"
            if problem:
                problems.append(f"{name} {problem}")
        return problems
    weight_dirs: list[str] = []
    for pattern in _weight_definition(variant).get_download_patterns():
        if pattern.endswith("*.safetensors") and "/" in pattern:
            weight_dirs.append(pattern.split("/")[0])
    for subdir in dict.fromkeys(weight_dirs):
        folder = root / subdir
        files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
        if not files:
            problems.append(f"{subdir}/ has no weights")
            continue
        for file in files:
            problem = _safetensors_problem(file)
            if problem:
                problems.append(f"{subdir}/{file.name} {problem}")
        for index in folder.glob("*.safetensors.index.json"):
            try:
                shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                problems.append(f"{subdir}/{index.name} is unreadable")
                continue
            problems += [
                f"{subdir}/{s} is missing" for s in sorted(shards) if not (folder / s).exists()
            ]
        for config in folder.glob("*.json"):
            try:
                json.loads(config.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                problems.append(f"{subdir}/{config.name} is unreadable")
    for name in _root_weight_files(variant):
        file = root / name
        if file.exists():
            problem = _safetensors_problem(file)
            if problem:
                problems.append(f"{name} {problem}")
        elif not any(root.glob("*.safetensors")):  # an mflux-save keeps shards there instead
            problems.append(f"{name} is missing")
    for subdir in _tokenizer_dirs(variant):
        folder = root / subdir
        if not folder.is_dir() or not any(p.exists() for p in folder.iterdir()):
            problems.append(f"{subdir}/ (the tokenizer) is missing")
    return problems


def _root_weight_files(variant: Variant) -> list[str]:
    """Weight files mflux downloads to the snapshot's root by name (Krea 2 Turbo's single-file
    transformer, ``turbo.safetensors``): present and whole, or replaced by an mflux-save's shards
    at the root (mflux loads either, ``Krea2WeightDefinition._select_transformer_variant``)."""
    return [
        pattern
        for pattern in _weight_definition(variant).get_download_patterns()
        if pattern.endswith(".safetensors") and "/" not in pattern and "*" not in pattern
    ]


def verify_snapshot(root: Path, variant: Variant) -> None:
    problems = snapshot_problems(root, variant)
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        raise IncompleteSnapshotError(
            f"the download of {variant.display_name} in {root} is incomplete or damaged ({shown}); "
            "delete that folder and download again"
        )


# -- status and size for the variant picker ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiskStatus:
    on_disk: bool  # a complete snapshot is in the cache
    path: Path | None  # the snapshot folder, complete or not
    problems: tuple[str, ...] = ()


def _cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE)


def _cached_snapshot(repo_id: str, cache_dir: Path) -> Path | None:
    storage = cache_dir / f"models--{repo_id.replace('/', '--')}"
    revision = pinned_revision(repo_id)
    if revision is None:
        ref = storage / "refs" / "main"
        if not ref.is_file():
            return None
        revision = ref.read_text(encoding="utf-8").strip()
    snapshot = storage / "snapshots" / revision
    return snapshot if snapshot.is_dir() else None


def snapshot_status(variant: Variant, cache_dir: str | Path | None = None) -> DiskStatus:
    """Is ``variant`` on disk at mflux's pinned revision, complete? No network."""
    if variant.family.weights_shipped:
        return DiskStatus(True, None)
    require_real(variant)
    snapshot = _cached_snapshot(variant.hf_repo or "", _cache_dir(cache_dir))
    if snapshot is None:
        return DiskStatus(False, None)
    problems = tuple(snapshot_problems(snapshot, variant))
    return DiskStatus(not problems, snapshot, problems)


@dataclass(frozen=True, slots=True)
class DownloadSize:
    total_bytes: int  # everything the snapshot holds
    missing_bytes: int  # what a download would still fetch
    exact: bool  # from the Hub's file list; False: estimated from the parameter count


def estimated_download_bytes(variant: Variant) -> int:
    """Weights on the Hub are 16-bit: about two bytes per parameter."""
    return int(variant.params_billion * 1e9 * 2)


def download_size(
    variant: Variant, *, token: str | None = None, cache_dir: str | Path | None = None
) -> DownloadSize:
    """Bytes to download: exact from the Hub when it can be asked, an estimate otherwise."""
    if variant.family.weights_shipped:
        return DownloadSize(0, 0, True)
    if snapshot_status(variant, cache_dir).on_disk:
        size = sum(f.stat().st_size for f in _snapshot_files(variant, cache_dir))
        return DownloadSize(size, 0, True)
    estimate = estimated_download_bytes(variant)
    if offline_mode() or _hub_offline():
        return DownloadSize(estimate, estimate, False)
    repo = variant.hf_repo or ""
    _bound_hub_waits()
    try:
        files = snapshot_download(
            repo_id=repo,
            revision=pinned_revision(repo),
            allow_patterns=download_patterns(variant),
            cache_dir=None if cache_dir is None else str(cache_dir),
            token=token,
            dry_run=True,
        )
    except Exception:  # any failure to ask the Hub falls back to the estimate
        return DownloadSize(estimate, estimate, False)
    total = sum(int(f.file_size or 0) for f in files)
    missing = sum(int(f.file_size or 0) for f in files if f.will_download)
    return DownloadSize(total, missing, True)


def _snapshot_files(variant: Variant, cache_dir: str | Path | None) -> list[Path]:
    snapshot = _cached_snapshot(variant.hf_repo or "", _cache_dir(cache_dir))
    if snapshot is None:
        return []
    patterns = download_patterns(variant)
    return [
        p
        for p in snapshot.rglob("*")
        if p.is_file()
        and any(fnmatch.fnmatch(p.relative_to(snapshot).as_posix(), pat) for pat in patterns)
    ]


# -- download -----------------------------------------------------------------------------------

# (bytes done, bytes total, message); the byte counts are None for steps that are not a download.
Progress = Callable[[int | None, int | None, str], None]


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


class _ProgressHub:
    """Aggregates huggingface_hub's byte bars into one (done, total) report; raises
    ``DownloadCancelled`` from inside the download threads once ``cancel`` is set."""

    def __init__(
        self, report: Progress | None, cancel: threading.Event | None, name: str = ""
    ) -> None:
        self.report = report
        self.cancel = cancel
        self.name = name
        self.total = 0
        self.done = 0
        self.lock = threading.Lock()

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise DownloadCancelled("download cancelled")

    def update(self, bar: tqdm) -> None:
        if getattr(bar, "unit", None) != "B":
            return  # the "Fetching N files" counter
        with self.lock:
            self.done = max(self.done, int(bar.n))
            self.total = max(self.total, int(bar.total or 0))
            done, total = self.done, self.total
        self.emit(min(done, total) if total else done, total)

    def emit(self, done: int, total: int) -> None:
        if self.report is None:
            return
        of = f" of {_size(total)}" if total else ""
        self.report(done, total or None, f"downloading {self.name}: {_size(done)}{of}")

    def tqdm_class(self) -> type[tqdm]:
        hub = self

        class _Tqdm(tqdm):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.pop("name", None)
                kwargs["disable"] = False
                kwargs["file"] = _NullWriter()
                super().__init__(*args, **kwargs)

            def update(self, n: float | None = 1) -> bool | None:
                hub.check()
                result = super().update(n)
                hub.update(self)
                return result

            def refresh(self, *args: Any, **kwargs: Any) -> None:
                hub.check()

            def display(self, *args: Any, **kwargs: Any) -> None:
                return None

        return _Tqdm


class _NullWriter:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def ensure_snapshot(
    variant: Variant,
    *,
    repo_id: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    token: str | None = None,
    cache_dir: str | Path | None = None,
) -> Path:
    """The local snapshot folder of ``repo_id`` (default: the variant's repo) at mflux's pinned
    revision, downloaded if needed (never when offline), then checked."""
    require_real(variant)
    repo = repo_id or variant.hf_repo or ""
    revision = pinned_revision(repo)
    name = variant.display_name
    offline = offline_mode() or _hub_offline()
    hub = _ProgressHub(progress, cancel, name)
    hub.check()
    kwargs: dict[str, Any] = {
        "repo_id": repo,
        "revision": revision,
        "allow_patterns": download_patterns(variant),
        "cache_dir": None if cache_dir is None else str(cache_dir),
        "token": token,
    }
    try:
        if offline:
            path = snapshot_download(**kwargs, local_files_only=True)
        else:
            note = variant.licence_note if repo == variant.hf_repo else None
            if note is not None:
                say_progress(progress, note)  # before any byte: a gated download may refuse
            _bound_hub_waits()
            try:  # the exact total first, so progress has a denominator from the start
                files = snapshot_download(**kwargs, dry_run=True)
                hub.total = sum(int(f.file_size or 0) for f in files if f.will_download)
                hub.emit(0, hub.total)
            except (GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError):
                raise
            except Exception as exc:  # the real call below reports any other problem
                if connection_problem(exc):
                    raise  # unreachable now: do not wait for the same answer twice
            path = snapshot_download(**kwargs, tqdm_class=hub.tqdm_class())
    except DownloadCancelled:
        raise
    except Exception as exc:
        error = _load_error(exc, variant, repo, revision, offline)
        if error is exc:
            raise
        raise error from None
    root = Path(path)
    if hub.total:
        hub.emit(hub.total, hub.total)
    say_progress(progress, f"checking the files of {name}")
    verify_snapshot(root, variant)
    return root


def _load_error(
    exc: Exception, variant: Variant, repo: str, revision: str | None, offline: bool
) -> Exception:
    """The ``LoadError`` that says in one sentence what went wrong; ``exc`` itself when unknown."""
    name = variant.display_name
    if isinstance(exc, HubIncompleteSnapshotError):
        return IncompleteSnapshotError(
            f"the cached download of {name} is incomplete and the Hub cannot be reached to "
            "finish it; go online and load it again"
        )
    reason = connection_problem(exc)
    if reason is not None:
        return NoConnectionError(no_connection_message(variant, reason))
    if isinstance(exc, GatedRepoError):
        return GatedModelError(
            f"{name} is a gated model: accept its licence at https://huggingface.co/{repo}, "
            "then log in with `hf auth login` (or set HF_TOKEN) and try again"
        )
    if isinstance(exc, RevisionNotFoundError):
        return ModelNotFoundError(
            f"the revision of {repo} that mflux pins ({revision}) is not on Hugging Face any more"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return ModelNotFoundError(
            f"{repo} was not found on Hugging Face (or is private and needs a token)"
        )
    if isinstance(exc, LocalEntryNotFoundError):
        if offline:
            return OfflineNotCachedError(
                f"{name} is not downloaded and HF_HUB_OFFLINE is set; unset it (or go online) "
                "to download it, or pick a variant that is on disk"
            )
        return NetworkError(
            f"{name} is not downloaded and Hugging Face cannot be reached; check the network "
            "and try again"
        )
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return GatedModelError(
                f"Hugging Face refused access to {repo} (HTTP {status}); log in with "
                "`hf auth login` (or set HF_TOKEN) with an account that accepted its licence"
            )
        return NetworkError(f"downloading {name} failed: HTTP {status or 'error'}")
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return NotEnoughDiskError(
                f"the disk is full while downloading {name} (about "
                f"{estimated_download_bytes(variant) / 1e9:.0f} GB needed); free space and retry"
            )
        return NetworkError(f"downloading {name} failed: {exc.strerror or exc}")
    return exc


def say_progress(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(None, None, message)
