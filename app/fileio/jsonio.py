"""Strict JSON for every file and line the project writes: no NaN, no Infinity; lenient reading.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which no strict JSON reader accepts
(a browser, ``jq``, another language's parser). Every writer goes through ``dumps_json``, which
turns non-finite floats into ``null`` first and then dumps with ``allow_nan=False``, so a value that
slips past the conversion raises instead of writing an unreadable file.

Reading a file the app wrote (perhaps an older build, perhaps edited by hand) is lenient: the
``json_float``/``json_int``/``json_str``/``json_time`` readers take one value as parsed and give
it typed, or None where it is missing or of another type, never raising.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from app.fileio.atomic import atomic_write_text


def finite(data: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """``data`` with every NaN or infinity replaced by None (strict JSON has neither).

    Walks dicts, lists and tuples; numpy scalars count as the numbers they hold. ``default``
    converts what JSON cannot hold (as ``json.dumps``'s ``default`` does), before the check.
    """
    if isinstance(data, bool | int | str) or data is None:
        return data
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, numbers.Integral):  # numpy integers
        return int(data)
    if isinstance(data, numbers.Real):  # numpy floats
        value = float(data)
        return value if math.isfinite(value) else None
    if isinstance(data, Mapping):
        return {key: finite(value, default) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite(value, default) for value in data]
    if default is not None:
        return finite(default(data), default)
    return data


def dumps_json(
    data: Any,
    *,
    indent: int | None = None,
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``data`` as strict JSON text: non-finite floats become null; anything else that strict
    JSON cannot hold raises ``ValueError``/``TypeError``."""
    return json.dumps(finite(data, default), indent=indent, sort_keys=sort_keys, allow_nan=False)


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 2, **kwargs: Any) -> None:
    """``data`` as strict JSON (NaN and infinity become null), written crash-safely."""
    atomic_write_text(path, dumps_json(data, indent=indent, **kwargs) + "\n")


def loads_strict(text: str) -> Any:
    """Parse ``text`` as strict JSON: ``NaN``/``Infinity`` raise ``ValueError`` (for checks)."""

    def reject(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=reject)


def json_float(value: object) -> float | None:
    """A JSON number as a float; None for anything else (a bool is not a number here, and NaN
    or an infinity is not a figure)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def json_int(value: object) -> int | None:
    """A JSON integer; None for anything else (a bool or a float included)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def json_time(value: object) -> datetime | None:
    """An ISO 8601 time as written by ``datetime.isoformat``; None where it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
