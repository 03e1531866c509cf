"""Model folders: local copies of a variant's weights (an ``mflux-save`` output or a Hugging Face
snapshot layout), checked, recognised and remembered.

- ``inspect_folder`` reads a folder's file names and safetensors headers (never the weights): its
  layout, the family and the base variants its transformer's keys fit, its stored quantization
  and its size on disk;
- ``check_folder`` turns "incomplete", "another family" and "damaged" into one ``LoadError``
  sentence, using the snapshot checks of ``app.variants.weights``;
- the user's list lives in ``paths.data_dir()/model_folders.json`` (written atomically); each
  entry becomes a variant ``<base>@<name>``: the base's gate numbers, the folder's weights.
  ``app.variants.get_variant`` resolves those ids, so the picker, history and the engine's caches
  see one id per folder.

Data only: no MLX, no mflux at import.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from app import paths
from app.errors import UserFacingError
from app.families import FAMILIES, Family
from app.fileio.atomic import atomic_write_text
from app.fileio.jsonio import dumps_json
from app.variants.builtin import BUILTIN_VARIANTS
from app.variants.catalog import QUANTIZE_LEVELS, Variant, quantize_label

log = logging.getLogger(__name__)

SEPARATOR = "@"
SCHEMA = 1
_MAX_HEADER = 100 * 1024 * 1024


class ModelFolderError(UserFacingError):
    """A model folder cannot be used; the message is one sentence for the user."""


# -- what a folder holds ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FolderInfo:
    path: Path
    layout: str  # "mflux-save" or "Hugging Face snapshot"
    family: Family | None  # None: no transformer weights recognised
    candidates: tuple[str, ...]  # base variant ids the files fit; one means detected
    quantize: int | None  # stored quantization (mflux-save); None: 16-bit weights
    size_bytes: int  # 0 where the folder has no transformer/ (it is not sized)
    has_transformer: bool = False  # a transformer/ folder: a model's layout, readable or not

    @property
    def detected(self) -> str | None:
        return self.candidates[0] if len(self.candidates) == 1 else None


def _header(path: Path) -> dict[str, object]:
    """A safetensors file's JSON header; raises ``ValueError`` when it is not one."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError("too short")
        (length,) = struct.unpack("<Q", head)
        if not 0 < length <= _MAX_HEADER:
            raise ValueError("bad header length")
        header = json.loads(f.read(length))
    if not isinstance(header, dict):
        raise ValueError("bad header")
    return header


def _weight_dirs() -> tuple[str, ...]:
    """The folders besides transformer/ where a family's Hub repo keeps its transformer's
    weights (``FolderDetection.weight_dirs``: Anima's ComfyUI files)."""
    return tuple(
        d for f in FAMILIES.values() if f.folders is not None for d in f.folders.weight_dirs
    )


def _transformer_files(folder: Path) -> list[Path]:
    """The transformer's safetensors: those in transformer/, or in a family's weight folder of
    its Hub repo (Anima's), or at the root where a family keeps its transformer there (Krea 2
    Turbo's single file, and an mflux-save of it)."""
    for subdir in ("transformer", *_weight_dirs()):
        files = sorted((folder / subdir).glob("*.safetensors"))
        if files:
            return files
    return sorted(folder.glob("*.safetensors"))


def _transformer_keys(folder: Path) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Weight name → shape, and the files' metadata, over the transformer's safetensors
    (``_transformer_files``)."""
    shapes: dict[str, list[int]] = {}
    metadata: dict[str, str] = {}
    try:
        files = _transformer_files(folder)
    except OSError:
        return shapes, metadata
    for file in files:
        try:
            header = _header(file)
        except (OSError, ValueError):
            continue  # the completeness check names damaged files
        for key, value in header.items():
            if key == "__metadata__" and isinstance(value, dict):
                metadata.update({str(k): str(v) for k, v in value.items()})
            elif isinstance(value, dict) and isinstance(value.get("shape"), list):
                shapes[key] = value["shape"]
    return shapes, metadata


def _stored_quantize(metadata: dict[str, str]) -> int | None:
    level = metadata.get("quantization_level")
    if level and level.isdigit() and int(level) in QUANTIZE_LEVELS:
        return int(level)
    return None


def _family(keys: dict[str, list[int]]) -> Family | None:
    """The family whose weight names these are (``Family.folders``), first in the registry's
    order; None where no family's names are there."""
    return next(
        (f for f in FAMILIES.values() if f.folders is not None and f.folders.matches(keys)), None
    )


def _candidates(family: Family, keys: dict[str, list[int]]) -> tuple[str, ...]:
    members = tuple(v.id for v in BUILTIN_VARIANTS.values() if v.family is family)
    return members if family.folders is None else family.folders.fits(members, keys)


def _size_on_disk(root: Path) -> int:
    """The bytes of every file under ``root``; what cannot be read is left out."""
    total = 0
    for parent, _dirs, files in os.walk(root):  # errors while listing are skipped
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(parent, name)).st_size
    return total


def inspect_folder(folder: str | Path) -> FolderInfo:
    """What the folder holds, from its file names and headers; never raises for its contents
    (what cannot be read counts as absent). Only a folder with a ``transformer/`` folder (or, as
    Krea 2 keeps it, the transformer's weights at the top beside ``vae/``) is sized: any other
    folder holds no model, and adding up a home folder or a disk file by file
    takes minutes."""
    root = Path(folder).expanduser()
    try:
        # a transformer/ folder, or (Krea 2) the transformer's weights at the top beside vae/,
        # or (Anima) a family's weight folder of its Hub repo
        is_model = (
            (root / "transformer").is_dir()
            or ((root / "vae").is_dir() and any(root.glob("*.safetensors")))
            or any((root / subdir).is_dir() for subdir in _weight_dirs())
        )
        mflux_save = is_model and any(root.glob("*/0.safetensors"))
    except OSError:
        is_model = mflux_save = False
    keys, metadata = _transformer_keys(root) if is_model else ({}, {})
    family = _family(keys)
    return FolderInfo(
        path=root,
        layout="mflux-save" if mflux_save else "Hugging Face snapshot",
        family=family,
        candidates=() if family is None else _candidates(family, keys),
        quantize=_stored_quantize(metadata),
        size_bytes=_size_on_disk(root) if is_model else 0,
        has_transformer=is_model,
    )


def check_folder(
    folder: str | Path, variant: Variant, info: FolderInfo | None = None
) -> FolderInfo:
    """The folder's info when it holds a complete, readable copy of ``variant``'s family; one
    sentence otherwise: ``ModelFolderError`` (no model, another family or variant) or
    ``app.variants.weights.IncompleteSnapshotError`` (files missing or damaged); a folder that
    cannot be read is a ``ModelFolderError`` too. ``info``: the folder's ``inspect_folder``,
    where the caller has read it already."""
    root = Path(folder).expanduser()
    try:
        return _check_folder(root, variant, info)
    except OSError as exc:  # a folder (or a file in it) this user may not read
        raise ModelFolderError(unreadable(root, exc)) from None


def unreadable(root: Path, exc: OSError) -> str:
    """One sentence for a folder the system refused to read."""
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(root) else ""
    return f"{root} cannot be read: {exc.strerror or exc}{where}"


def _check_folder(root: Path, variant: Variant, info: FolderInfo | None) -> FolderInfo:
    from app.variants.weights import IncompleteSnapshotError, snapshot_problems

    if not root.is_dir():
        raise ModelFolderError(f"the model folder {root} does not exist or is not a folder")
    if info is None or info.path != root:
        info = inspect_folder(root)
    if info.family is None and not info.has_transformer:
        raise ModelFolderError(
            f"{root} holds no model: a model folder has a transformer/ folder (Krea 2: its "
            "weights at the top) beside vae/ and the text encoder (an mflux-save output or a "
            "Hugging Face snapshot)"
        )
    if info.family is not None and info.family is not variant.family:
        raise ModelFolderError(
            f"{root} holds a {info.family.display_name} model, not {variant.display_name} "
            f"({variant.family.display_name})"
        )
    if info.candidates and variant.id.split(SEPARATOR)[0] not in info.candidates:
        fits = ", ".join(info.candidates)
        raise ModelFolderError(
            f"{root} holds a different {variant.family.display_name} model than "
            f"{variant.display_name} (its weights fit {fits})"
        )
    problems = snapshot_problems(root, variant)
    if info.family is None and not problems:
        problems = ["transformer/ has no weights mflux can read"]
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        raise IncompleteSnapshotError(
            f"the model folder {root} is incomplete or damaged ({shown}); copy or save it again"
        )
    return info


def size_label(size_bytes: int) -> str:
    return f"{size_bytes / 1e9:.1f} GB" if size_bytes >= 1e9 else f"{size_bytes / 1e6:.0f} MB"


# -- the user's list ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelFolder:
    name: str
    path: str
    base_variant: str
    quantize: int | None
    size_bytes: int

    @property
    def variant_id(self) -> str:
        return f"{self.base_variant}{SEPARATOR}{self.name}"


def folders_file() -> Path:
    return paths.data_dir() / "model_folders.json"


def _remembered() -> list[ModelFolder]:
    """Every entry of the list as written, usable here or not; an unreadable list reads as empty
    (it is rewritten on the next add)."""
    try:
        data = json.loads(folders_file().read_text(encoding="utf-8"))
        rows = data["folders"] if isinstance(data, dict) else []
        return [
            ModelFolder(
                name=str(r["name"]),
                path=str(r["path"]),
                base_variant=str(r["base_variant"]),
                quantize=None if r.get("quantize") is None else int(r["quantize"]),
                size_bytes=int(r.get("size_bytes", 0)),
            )
            for r in rows
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


_noted: set[ModelFolder] = set()  # stale entries already logged by this process


def model_folders() -> list[ModelFolder]:
    """The remembered folders this version can offer. An entry whose base variant it does not
    know (renamed, removed, or from a newer version) is skipped with a note in the log, once per
    process, and kept in the list, so a version that knows it offers it again."""
    usable = []
    for folder in _remembered():
        if folder.base_variant in BUILTIN_VARIANTS:
            usable.append(folder)
        elif folder not in _noted:
            _noted.add(folder)
            log.warning(
                "model folder %r (%s) is left out: it holds %r, which this version does not "
                "know; the entry is kept",
                folder.name,
                folder.path,
                folder.base_variant,
            )
    return usable


def _save(folders: list[ModelFolder]) -> None:
    rows = [
        {
            "name": f.name,
            "path": f.path,
            "base_variant": f.base_variant,
            "quantize": f.quantize,
            "size_bytes": f.size_bytes,
        }
        for f in folders
    ]
    atomic_write_text(folders_file(), dumps_json({"schema": SCHEMA, "folders": rows}, indent=2))


def folder_name(path: Path, taken: set[str]) -> str:
    """A short id-safe name from the folder's own name, unique among ``taken``."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", path.name.lower()).strip("-_")[:32] or "folder"
    if not stem[0].isalnum():
        stem = "m" + stem
    name, n = stem, 2
    while name in taken:
        name, n = f"{stem}-{n}", n + 1
    return name


def any_folder_base() -> Variant:
    """A built-in variant a model folder can hold, to check a folder whose files show no variant
    against: the check's sentence says what is wrong whichever variant it is."""
    return next(v for v in BUILTIN_VARIANTS.values() if v.family.folders is not None)


def add_model_folder(folder: str | Path, base_variant: str | None = None) -> ModelFolder:
    """Check ``folder`` and remember it. ``base_variant`` where the files cannot tell (several
    variants share one architecture); ``ModelFolderError`` when it is unusable or ambiguous."""
    root = Path(folder).expanduser().resolve()
    info = inspect_folder(root)
    if base_variant is None:
        base_variant = info.detected
        if base_variant is None:
            if not info.candidates:
                check_folder(root, any_folder_base())  # says what is wrong
            raise ModelFolderError(
                f"{root} could be any of {', '.join(info.candidates)}: choose which one it is"
            )
    base = BUILTIN_VARIANTS.get(base_variant)
    if base is None or base.family.folders is None:
        raise ModelFolderError(f"{base_variant!r} is not a model variant a folder can hold")
    info = check_folder(root, base)
    existing = _remembered()
    for f in existing:
        if Path(f.path) == root and f.base_variant == base_variant:
            return f
    entry = ModelFolder(
        name=folder_name(root, {f.name for f in existing}),
        path=str(root),
        base_variant=base_variant,
        quantize=info.quantize,
        size_bytes=info.size_bytes,
    )
    _save([*existing, entry])
    return entry


def remove_model_folder(variant_id: str) -> bool:
    """Forget a folder (its files stay where they are); False when it was not listed."""
    existing = _remembered()
    kept = [f for f in existing if f.variant_id != variant_id]
    if len(kept) == len(existing):
        return False
    _save(kept)
    return True


def folder_variant(folder: ModelFolder) -> Variant:
    base = BUILTIN_VARIANTS[folder.base_variant]
    stored = f", {quantize_label(folder.quantize)}" if folder.quantize is not None else ""
    return replace(
        base,
        id=folder.variant_id,
        display_name=f"{base.display_name} · {folder.name} ({size_label(folder.size_bytes)}"
        f"{stored})",
        model_path=folder.path,
        stored_quantize=folder.quantize,
    )


def folder_variants() -> list[Variant]:
    return [folder_variant(f) for f in model_folders()]


def user_folder_variant(variant_id: str) -> Variant | None:
    for folder in model_folders():
        if folder.variant_id == variant_id:
            return folder_variant(folder)
    return None


def is_folder_variant_id(variant_id: str) -> bool:
    return SEPARATOR in variant_id
