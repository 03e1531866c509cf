"""Strict JSON for every file and line the project writes: no NaN, no Infinity.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which no strict JSON reader accepts
(a browser, ``jq``, another language's parser). Every writer goes through ``dumps_json``, which
turns non-finite floats into ``null`` first and then dumps with ``allow_nan=False``, so a value that
slips past the conversion raises instead of writing an unreadable file.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Mapping
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
