"""User calibrations: gate calibrations measured by ``teacache-studio calibrate`` or the window's
Calibrate This Model… (``app.engine.calibration``).

Each one is a JSON file in ``app.paths.data_dir()/calibrations/`` named after the variant it
creates: ``<base>+<name>.json`` (for example ``demo+mycal.json``), where ``<base>`` is a built-in
variant or a model folder's (``flux1-dev@myfinetune``: the calibration then runs on the folder's
weights). The registry offers it as its own variant id, ``demo+mycal``: the base variant with the
user's coefficients, calibrated range, MagCache table, provenance and what it was measured under
(``CalibrationScope``: the model folder, the LoRA set, the quantization;
``with_user_calibration``).
``app.variants.get_variant`` falls back here for ids it does not know, so every part of the app
(engine, command line, window) can select one.

Data only, like the registry: importing this module loads neither MLX nor mflux.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from app import paths
from app.errors import UserFacingError
from app.fileio.atomic import atomic_write_text
from app.fileio.jsonio import dumps_json
from app.gate.decision import GateConfigError
from app.gate.kinds import TeaCacheCalibration, gate_kind
from app.variants.builtin import BUILTIN_VARIANTS
from app.variants.catalog import (
    CalibrationScope,
    Provenance,
    UnknownVariantError,
    Variant,
    calibrated_range_from_json,
    magcache_from_document,
)
from app.variants.folders import is_folder_variant_id, user_folder_variant

log = logging.getLogger(__name__)

SEPARATOR = "+"
SCHEMA = 1
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


class CalibrationFileError(UnknownVariantError):
    """A calibration file exists but cannot be used; the message says which file and why.

    An ``UnknownVariantError`` so that every caller of ``get_variant`` reports it as one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class CalibrationExistsError(UserFacingError):
    """A calibration of that name already exists for the variant; the message names it."""


def calibrations_dir() -> Path:
    return paths.data_dir() / "calibrations"


def validate_name(name: str) -> str:
    """A calibration name becomes part of a variant id and a file name: keep it plain. A name
    refused says why, and the plain name nearest it where there is one (``plain_name``)."""
    if not _NAME.match(name):
        nearest = plain_name(name)
        instead = f"; {nearest!r} would do" if nearest else ""
        raise ValueError(
            f"calibration name {name!r} must be 1–40 characters of lowercase letters, digits, "
            "'-' or '_', starting with a letter or digit (no spaces: it becomes part of the "
            f"model's id and of a file name){instead}"
        )
    return name


def plain_name(name: str) -> str | None:
    """The name ``validate_name`` takes nearest ``name``: lowercase, each run of other characters
    (a space included) one '-'; None where nothing usable is left."""
    plain = re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower()).strip("-_")[:40].strip("-_")
    return plain if _NAME.match(plain) else None


def user_variant_id(base_id: str, name: str) -> str:
    return f"{base_id}{SEPARATOR}{validate_name(name)}"


def split_user_variant_id(variant_id: str) -> tuple[str, str] | None:
    """``"demo+mycal"`` → ``("demo", "mycal")``; None for an id that is not a user calibration."""
    base, sep, name = variant_id.partition(SEPARATOR)
    if not sep or not base or not _NAME.match(name):
        return None
    return base, name


def calibration_path(variant_id: str) -> Path:
    return calibrations_dir() / f"{variant_id}.json"


def calibration_base(variant_id: str) -> str:
    """The variant a calibration of ``variant_id`` is measured on: a user calibration's base (a
    recalibration replaces its numbers, not its weights), else the id itself."""
    parts = split_user_variant_id(variant_id)
    return parts[0] if parts is not None else variant_id


def scope_from_json(value: object) -> CalibrationScope | None:
    """A calibration file's ``scope`` (what it was measured under); None where it records none
    (files written before there was one: measured on the base weights, without LoRAs)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("scope must be an object")
    loras = tuple((str(item["path"]), float(item["scale"])) for item in value.get("loras", ()))
    quantize = value.get("quantize")
    model_path = value.get("model_path")
    return CalibrationScope(
        model_path=None if model_path is None else str(model_path),
        loras=loras,
        quantize=None if quantize is None else int(quantize),
    )


def scope_to_json(scope: CalibrationScope) -> dict[str, Any]:
    return {
        "model_path": scope.model_path,
        "loras": [{"path": path, "scale": scale} for path, scale in scope.loras],
        "quantize": scope.quantize,
    }


def with_user_calibration(variant: Variant, calibration: dict) -> Variant:
    """A copy of ``variant`` that uses the numbers of a user calibration file: its coefficients
    (null where the base has no TeaCache numbers), its MagCache section where it has one, and
    what it was measured under (its scope)."""
    coefficients = calibration["coefficients"]
    return replace(
        variant,
        coefficients=(
            None if coefficients is None else tuple(float(c) for c in coefficients)  # type: ignore[arg-type]
        ),
        calibrated_range=calibrated_range_from_json(calibration.get("calibrated_range")),
        default_threshold=calibration.get("default_threshold", variant.default_threshold),
        provenance=Provenance(**calibration["provenance"]),
        magcache=magcache_from_document(calibration) or variant.magcache,
        calibration_scope=scope_from_json(calibration.get("scope")),
    )


def _check(data: dict[str, Any], source: Path) -> None:
    try:
        if data["coefficients"] is not None:  # null: the base has no TeaCache numbers
            calibrated = data.get("calibrated_range")
            teacache = TeaCacheCalibration(
                coefficients=tuple(float(c) for c in data["coefficients"]),
                calibrated_range=None if calibrated is None else tuple(calibrated),  # type: ignore[arg-type]
                default_threshold=None,
                provenance=Provenance(source=""),
            )
            gate_kind(teacache.gate).params(teacache, 0.0)  # validates the numbers
        provenance = data["provenance"]
        allowed = {f.name for f in fields(Provenance)}
        if not isinstance(provenance, dict) or not set(provenance) <= allowed:
            raise ValueError(f"provenance must be an object with keys among {sorted(allowed)}")
        magcache = magcache_from_document(data)
        if magcache is not None:
            magcache.params(0.0)  # validates the table and recipe
        scope_from_json(data.get("scope"))
        threshold = data.get("default_threshold")
        if threshold is not None and not (
            math.isfinite(float(threshold)) and 0.0 <= float(threshold) <= 1.0
        ):
            raise ValueError("default_threshold must lie in [0, 1]")
    except (KeyError, TypeError, ValueError, GateConfigError) as exc:
        raise CalibrationFileError(f"{source}: not a usable calibration ({exc})") from None


def calibration_exists(variant_id: str) -> bool:
    return calibration_path(variant_id).exists()


def clash_message(base_id: str, name: str, advice: str = "choose another name") -> str:
    return (
        f"a calibration named {name!r} already exists for {base_id} "
        f"({user_variant_id(base_id, name)}); {advice}"
    )


def save_calibration(data: dict[str, Any], *, exclusive: bool = False) -> Path:
    """Write ``data`` (which names ``base_variant`` and ``name``) atomically (a temporary file
    renamed into place: a reader sees the old file or the whole new one); return the path.
    ``exclusive``: refuse (``CalibrationExistsError``) where that calibration already exists."""
    base, name = str(data["base_variant"]), str(data["name"])
    variant_id = user_variant_id(base, name)
    path = calibration_path(variant_id)
    payload = {"schema": SCHEMA, "id": variant_id, **data}
    _check(payload, path)
    if exclusive and path.exists():
        raise CalibrationExistsError(clash_message(base, name))
    atomic_write_text(path, dumps_json(payload, indent=2) + "\n")
    return path


def load_calibration(variant_id: str) -> dict[str, Any] | None:
    """The calibration behind ``variant_id``; None when there is no such file."""
    if split_user_variant_id(variant_id) is None:
        return None
    path = calibration_path(variant_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CalibrationFileError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise CalibrationFileError(f"{path}: not a JSON object")
    _check(data, path)
    return data


def _base_variant(base_id: str) -> Variant | None:
    """A calibration's base: a built-in variant or a remembered model folder's."""
    if base_id in BUILTIN_VARIANTS:
        return BUILTIN_VARIANTS[base_id]
    return user_folder_variant(base_id) if is_folder_variant_id(base_id) else None


def user_variant(variant_id: str) -> Variant | None:
    """The variant a user calibration defines, or None when ``variant_id`` names none."""
    parts = split_user_variant_id(variant_id)
    base = None if parts is None else _base_variant(parts[0])
    if parts is None or base is None:
        return None
    data = load_calibration(variant_id)
    if data is None:
        return None
    variant = with_user_calibration(base, data)
    return replace(
        variant,
        id=variant_id,
        display_name=f"{base.display_name} · {parts[1]} (user calibration)",
    )


def user_variants() -> list[Variant]:
    """Every usable user calibration, sorted by id; a corrupt file is skipped with a warning."""
    folder = calibrations_dir()
    if not folder.is_dir():
        return []
    found: list[Variant] = []
    for path in sorted(folder.glob("*.json")):
        try:
            variant = user_variant(path.stem)
        except CalibrationFileError as exc:
            log.warning("skipping user calibration: %s", exc)
            continue
        if variant is not None:
            found.append(variant)
    return found


def delete_calibration(variant_id: str) -> bool:
    if split_user_variant_id(variant_id) is None:
        return False
    path = calibration_path(variant_id)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
