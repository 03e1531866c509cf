"""Strict JSON: every writer turns NaN and infinity into null; anything else that slips raises."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from app.fileio.jsonio import (
    dumps_json,
    finite,
    json_float,
    json_int,
    json_str,
    json_time,
    loads_strict,
    write_json_atomic,
)


def test_non_finite_numbers_become_null_at_any_depth() -> None:
    data = {
        "a": math.nan,
        "b": [1.0, math.inf, {"c": -math.inf}],
        "d": (np.float32("nan"), np.float64(2.5), np.int64(3)),
        "e": True,
        "f": None,
        "g": "NaN",
    }
    assert loads_strict(dumps_json(data)) == {
        "a": None,
        "b": [1.0, None, {"c": None}],
        "d": [None, 2.5, 3],
        "e": True,
        "f": None,
        "g": "NaN",
    }
    assert finite(np.float32(1.5)) == 1.5 and type(finite(np.float32(1.5))) is float


def test_default_output_is_checked_too() -> None:
    class Odd:
        pass

    assert dumps_json({"x": Odd()}, default=lambda _: math.nan) == '{"x": null}'
    with pytest.raises(TypeError):
        dumps_json({"x": Odd()})


def test_write_json_atomic_writes_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_json_atomic(path, {"speedup": math.inf, "ssim": math.nan, "n": 1})
    text = path.read_text()
    assert text.endswith("\n") and "NaN" not in text and "Infinity" not in text
    assert loads_strict(text) == {"speedup": None, "ssim": None, "n": 1}
    with pytest.raises(ValueError):
        loads_strict(json.dumps([math.nan]))


def test_no_module_writes_json_without_the_strict_helper() -> None:
    # A regression guard: json.dump/json.dumps anywhere in app/ or lab/ but the helper itself
    # would bypass the NaN conversion.
    root = Path(__file__).resolve().parents[2]
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for package in ("app", "lab")
        for path in (root / package).rglob("*.py")
        if path != root / "app" / "fileio" / "jsonio.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "json.dump(" in line or "json.dumps(" in line
    ]
    assert offenders == []


def test_the_lenient_readers_type_a_value_or_give_none() -> None:
    assert (json_float(2), json_float(2.5), json_float(True), json_float("2")) == (
        2.0,
        2.5,
        None,
        None,
    )
    assert json_float(math.nan) is None and json_float(-math.inf) is None  # not figures
    assert (json_int(3), json_int(3.0), json_int(False), json_int(None)) == (3, None, None, None)
    assert (json_str("a"), json_str(1)) == ("a", None)
    when = json_time("2026-03-01T14:02:31+01:00")
    assert when is not None and (when.hour, when.utcoffset()) == (14, timedelta(hours=1))
    assert json_time("yesterday") is None and json_time(0) is None
