"""Typed user settings as JSON at ``app.paths.settings_file()``.

Loading is tolerant per key: a value of the wrong type or out of range falls back to that key's
default with a warning, and an unreadable file falls back to all defaults with a warning. Window
geometry is not kept here (QSettings holds it); this module never imports Qt.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from app import paths
from app.engine.request import LORA_SCALE_RANGE, SEED_RANGE
from app.fileio.atomic import atomic_write_text
from app.fileio.jsonio import dumps_json
from app.gate.fill import UnknownFillError, check_fill
from app.gate.kinds import DEFAULT_GATE, UnknownGateError, check_gate
from app.variants import DEFAULT_VARIANT, QUANTIZE_LEVELS
from app.variants.builtin import FORMAT1_DEFAULTS

log = logging.getLogger(__name__)

# 2: per-variant threshold, steps and guidance hold only values the user chose (format 1 files
# written before that stored every value, the defaults of the day included).
SETTINGS_FORMAT = 2
PROMPT_HISTORY_LIMIT = 20


@dataclass
class Settings:
    last_variant: str = DEFAULT_VARIANT
    # The gate picked last; a variant without its calibration opens on its own first gate.
    last_gate: str = DEFAULT_GATE
    last_prompt: str = ""  # empty: the window shows its default prompt
    prompt_history: list[str] = field(default_factory=list)  # newest first
    # Per variant id (TeaCache) or "<variant>@<gate>" (``GateKind.threshold_key``).
    thresholds: dict[str, float] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)  # per variant id
    sizes: dict[str, list[int]] = field(default_factory=dict)  # per variant id: [width, height]
    guidance: dict[str, float] = field(default_factory=dict)  # per variant id
    loras: dict[str, list[list[object]]] = field(default_factory=dict)  # per variant: [path, scale]
    # Per variant id: the quantization chosen in the window (0: full precision), kept only where
    # it differs from the default that fits this machine.
    quantize: dict[str, int] = field(default_factory=dict)
    # Per variant id: what a skipped step adds (``app.gate.fill``), kept only where it is not
    # the default (reuse).
    fills: dict[str, str] = field(default_factory=dict)
    seed: int = 42
    rerun_on_threshold_change: bool = False
    details_expanded: bool = False  # the window's "Details" disclosure under the images

    def remember_prompt(self, prompt: str, limit: int = PROMPT_HISTORY_LIMIT) -> None:
        prompt = prompt.strip()
        if not prompt:
            return
        self.prompt_history = [prompt, *(p for p in self.prompt_history if p != prompt)][:limit]
        self.last_prompt = prompt

    def to_json(self) -> dict[str, object]:
        return {"format": SETTINGS_FORMAT, **asdict(self)}


Validator = Callable[[object], object]


class _Invalid(ValueError):
    pass


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid("expected text")
    return value


def _int(lo: int, hi: int) -> Validator:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _Invalid(f"expected a whole number in [{lo}, {hi}]")
        return value

    return check


def _float(lo: float, hi: float) -> Validator:
    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid("expected a number")
        number = float(value)
        if not (math.isfinite(number) and lo <= number <= hi):
            raise _Invalid(f"expected a number in [{lo}, {hi}]")
        return number

    return check


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("expected true or false")
    return value


def _list_of(item: Validator) -> Validator:
    def check(value: object) -> list[object]:
        if not isinstance(value, list):
            raise _Invalid("expected a list")
        return [item(v) for v in value]

    return check


def _dict_of(item: Validator) -> Validator:
    def check(value: object) -> dict[str, object]:
        if not isinstance(value, dict):
            raise _Invalid("expected an object")
        return {_str(k): item(v) for k, v in value.items()}

    return check


def _size(value: object) -> list[int]:
    pair: list[int] = _list_of(_int(16, 4096))(value)  # type: ignore[assignment]
    if len(pair) != 2:
        raise _Invalid("expected [width, height]")
    return pair


def _lora(value: object) -> list[object]:
    if not (isinstance(value, list) and len(value) == 2):
        raise _Invalid("expected [path, scale]")
    # A file that has gone since is kept and reported at Generate, in the request check's words.
    return [_str(value[0]), _float(*LORA_SCALE_RANGE)(value[1])]


def _gate(value: object) -> str:
    try:
        return check_gate(value)
    except UnknownGateError as exc:
        raise _Invalid(str(exc)) from None


def _fill(value: object) -> str:
    try:
        return check_fill(value)
    except UnknownFillError as exc:
        raise _Invalid(str(exc)) from None


def _quantize(value: object) -> int:
    bits = _int(0, 8)(value)
    if bits not in (0, *QUANTIZE_LEVELS):
        raise _Invalid(f"expected 0 or one of {', '.join(map(str, QUANTIZE_LEVELS))}")
    return bits  # type: ignore[return-value]


_VALIDATORS: dict[str, Validator] = {
    "last_variant": _str,
    "last_gate": _gate,
    "last_prompt": _str,
    "prompt_history": _list_of(_str),
    "thresholds": _dict_of(_float(0.0, 1.0)),
    "steps": _dict_of(_int(1, 1000)),
    "sizes": _dict_of(_size),
    "guidance": _dict_of(_float(0.0, 100.0)),
    "loras": _dict_of(_list_of(_lora)),
    "quantize": _dict_of(_quantize),
    "fills": _dict_of(_fill),
    "seed": _int(*SEED_RANGE),
    "rerun_on_threshold_change": _bool,
    "details_expanded": _bool,
}
assert set(_VALIDATORS) == {f.name for f in fields(Settings)}


def settings_from_json(data: object) -> tuple[Settings, list[str]]:
    """Build settings from parsed JSON, keeping every valid key; returns the warnings too."""
    settings = Settings()
    warnings: list[str] = []
    if not isinstance(data, dict):
        return settings, ["settings file does not hold a JSON object; using defaults"]
    for name, validate in _VALIDATORS.items():
        if name not in data:
            continue
        try:
            setattr(settings, name, validate(data[name]))
        except _Invalid as exc:
            warnings.append(f"setting {name!r} ignored ({exc}); using the default")
    settings.prompt_history = settings.prompt_history[:PROMPT_HISTORY_LIMIT]
    if data.get("format", 1) == 1:
        _drop_former_defaults(settings)
    return settings, warnings


def _drop_former_defaults(settings: Settings) -> None:
    """A format-1 file stored every value, the defaults of the day included (the registry's
    ``FORMAT1_DEFAULTS``): one of those almost surely is a default nobody chose, so it is dropped
    and the current default applies."""
    for table_name, former in FORMAT1_DEFAULTS.items():
        table: dict[str, float] = getattr(settings, table_name)
        for variant_id, values in former.items():
            if variant_id in table and table[variant_id] in values:
                log.info(
                    "settings from an earlier version: %s for %s was a default of the day (%s); "
                    "the current default applies",
                    table_name,
                    variant_id,
                    table[variant_id],
                )
                del table[variant_id]


class SettingsStore:
    """Loads and saves ``Settings``; ``warnings`` holds what the last load had to ignore."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.settings_file()
        self.warnings: list[str] = []

    def load(self) -> Settings:
        self.warnings = []
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Settings()
        except (OSError, UnicodeDecodeError) as exc:
            return self._defaults(f"could not read {self.path} ({exc}); using defaults")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return self._defaults(f"{self.path} is not valid JSON ({exc}); using defaults")
        settings, warnings = settings_from_json(data)
        for warning in warnings:
            log.warning("%s", warning)
        self.warnings = warnings
        return settings

    def save(self, settings: Settings) -> None:
        atomic_write_text(self.path, dumps_json(settings.to_json(), indent=2, sort_keys=True))

    def _defaults(self, warning: str) -> Settings:
        log.warning("%s", warning)
        self.warnings = [warning]
        return Settings()
