"""Every run.json the history ever wrote, upgraded to this build's format as it is read.

This module is the one place that knows the older formats. It upgrades in memory only: a file is
never rewritten (an older build still reads its own), and one that cannot be upgraded is left on
disk untouched while the history lists it as skipped, in one sentence.

Format 2 (this build) is ``{format, id, created, warnings, versions, report}``: ``report`` is
``RunReport.to_json``, the run once. A threshold comparison adds ``comparison``, whose rows are
their reports (``app.storage.comparisons``).

Format 1 (every build before) held a run four ways: ``request``; ``result``, a flat copy of its
figures; ``steps.{gated,vanilla}``, both passes' steps whole; and ``report``, which grew with the
builds. The committed files under ``tests/storage/old_history/`` are what those builds wrote:

- Before the typed report (27377b5 and earlier): ``report`` was the engine's report dict. The
  window's worker wrote its own figures into ``result`` (it timed a cached vanilla itself), so
  there the result's figures win, and the speedup's label, never written, is derived from them
  (``legacy_speedup_label``).
- From the typed report on (2c44b1f): ``report`` is ``RunReport.to_json`` of its day and the label
  is saved (in ``result`` and ``report``): the report wins, the rest of the file fills what it
  lacks.
- The gate, LoRAs, quantization, model folder, local difference, target search and threshold
  comparisons came with later builds (6553d13 has them all); where a file lacks one, its default
  is read (TeaCache, no LoRA, ...).

The speedup and its label stay as they were saved (made under the rules of the build that saved
them: the History lists and exports that pair); the report read back derives its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.engine.report import replayed_steps
from app.fileio.jsonio import json_int, json_time

CURRENT_FORMAT = 2

# Format 1: what every run.json's request held, with its type.
_REQUIRED_REQUEST_KEYS = {"variant_id": str, "prompt": str, "seed": int, "steps": int}
# Format 1: the request's keys under their report names.
_REQUEST_KEYS = {
    "variant_id": "variant",
    "prompt": "prompt",
    "seed": "seed",
    "steps": "steps",
    "threshold": "threshold",
    "gate": "gate",
    "width": "width",
    "height": "height",
    "guidance": "guidance",
    "quantize": "quantize",
    "loras": "loras",
    "model_path": "model_path",
}
# Format 1: the result's keys that the window's worker once completed itself (the engine's report
# then did not know a cached vanilla's time), under their report names.
_RESULT_KEYS = {
    "gated_seconds": "gated_seconds",
    "vanilla_seconds": "vanilla_seconds",
    "ssim": "ssim",
    "local_diff": "local_diff",
    "resumed_from": "resumed_from_step",
    "vanilla_cached": "vanilla_cached",
    "vanilla_measured_at": "vanilla_measured_at",
}


def upgrade(data: object) -> dict[str, Any]:
    """``data`` (a run.json as parsed) in format ``CURRENT_FORMAT``; ``ValueError`` with one
    sentence where it is no run.json this app wrote."""
    if not isinstance(data, dict):
        raise ValueError("run.json does not hold a JSON object")
    version = json_int(data.get("format"))
    if version is None or not 1 <= version <= CURRENT_FORMAT:
        raise ValueError(f"unknown history format {data.get('format')!r}")
    return data if version == CURRENT_FORMAT else _from_format_1(data)


def _from_format_1(meta: Mapping[str, Any]) -> dict[str, Any]:
    request = meta.get("request")
    if not isinstance(request, dict):
        raise ValueError("the request is missing")
    for key, kind in _REQUIRED_REQUEST_KEYS.items():
        if not isinstance(request.get(key), kind):
            raise ValueError(f"request field {key!r} is missing or malformed")
    result = meta.get("result", {})
    if not isinstance(result, dict):
        raise ValueError("the result is malformed")
    steps = meta.get("steps", {})
    if not isinstance(steps, dict) or not all(isinstance(v, list) for v in steps.values()):
        raise ValueError("the step trace is malformed")
    vanilla_rows = steps.get("vanilla", [])
    report = _report(meta.get("report"), request, result, steps.get("gated"))
    report["vanilla_steps_detail"] = vanilla_rows
    # The speedup as it was saved, with its label: the result's figure (the one the History
    # listed), the label as written, else derived by the rule of the builds before labels.
    report["speedup"] = result.get("speedup")
    report["speedup_label"] = _saved_label(meta.get("report"), result, request)
    upgraded: dict[str, Any] = {
        "format": CURRENT_FORMAT,
        "id": meta.get("id"),
        "created": meta.get("created", ""),
        "warnings": meta.get("warnings") if isinstance(meta.get("warnings"), list) else [],
        "versions": meta.get("versions") if isinstance(meta.get("versions"), dict) else {},
        "report": report,
    }
    comparison = meta.get("comparison")
    if meta.get("kind") == "comparison" and isinstance(comparison, dict):
        upgraded["comparison"] = _comparison(comparison, request, vanilla_rows)
    return upgraded


def _report(
    saved: object,
    request: Mapping[str, Any],
    result: Mapping[str, Any],
    gated_rows: object,
) -> dict[str, Any]:
    """Format 1's report object, completed from the rest of the file where it lacks a key.

    Since the label was saved (the result's ``speedup_label``), the report is the run's own
    record and wins. Before it, the window's worker timed a cached vanilla itself and wrote what
    it found into the result only: there the result's figures win (and a vanilla with no recorded
    time has none)."""
    report = dict(saved) if isinstance(saved, Mapping) else {}
    filled: dict[str, Any] = {
        new: request[old] for old, new in _REQUEST_KEYS.items() if old in request
    }
    if isinstance(gated_rows, list):
        filled["steps_detail"] = gated_rows
    from_result = {new: result[old] for old, new in _RESULT_KEYS.items() if old in result}
    if "speedup_label" in result:
        return {**filled, **{k: v for k, v in from_result.items() if v is not None}, **report}
    return {
        **filled,
        **report,
        **from_result,
        "vanilla_measured_at": from_result.get("vanilla_measured_at"),
    }


def _saved_label(saved: object, result: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The speedup's label as saved: the report's full label where the file has one (files
    saved before the report was copied whole kept a shortened one in ``result``), else the
    result's; for files written before labels, derived from the same fields (a pass resumed at
    step 0 replayed nothing: "measured")."""
    from_report = saved.get("speedup_label") if isinstance(saved, Mapping) else None
    for label in (from_report, result.get("speedup_label")):
        if isinstance(label, str) and label:
            return label
    if result.get("speedup") is None:
        return ""
    steps = json_int(result.get("steps")) or request["steps"]
    return legacy_speedup_label(
        replayed_steps=replayed_steps(json_int(result.get("resumed_from")), steps),
        steps=steps,
        vanilla_cached=result.get("vanilla_cached") is True,
        vanilla_measured_at=json_time(result.get("vanilla_measured_at")),
    )


def _comparison(
    table: Mapping[str, Any], request: Mapping[str, Any], vanilla_rows: list[Any]
) -> dict[str, Any]:
    """Format 1's comparison table: each row held its figures beside its report; now a row is
    its image and its report (completed from the run's request where it lacks a key, with the
    vanilla steps the file kept once)."""
    rows = table.get("entries")
    upgraded = {key: value for key, value in table.items() if key != "entries"}
    upgraded["entries"] = [
        _comparison_row(row, request, vanilla_rows) if isinstance(row, Mapping) else row
        for row in (rows if isinstance(rows, list) else [])
    ]
    return upgraded


def _comparison_row(
    row: Mapping[str, Any], request: Mapping[str, Any], vanilla_rows: list[Any]
) -> dict[str, Any]:
    filled = {new: request[old] for old, new in _REQUEST_KEYS.items() if old in request}
    saved = row.get("report")
    report = {
        **filled,
        "threshold": row.get("threshold"),
        **(saved if isinstance(saved, Mapping) else {}),
    }
    report.setdefault("vanilla_steps_detail", vanilla_rows)
    return {"image": row.get("image"), "report": report}


def legacy_speedup_label(
    *,
    replayed_steps: int,
    steps: int,
    vanilla_cached: bool,
    vanilla_measured_at: datetime | None = None,
) -> str:
    """The label of a run saved before labels were written (its speedup was the plain ratio of
    the two loop times), by the rule of the build that then showed it."""
    if replayed_steps > 0:
        label = f"estimate ({replayed_steps} of {steps} steps replayed)"
    elif not vanilla_cached:
        return "measured"
    else:
        label = ""
    if vanilla_cached:
        cached = "vanilla cached"
        if vanilla_measured_at is not None:
            cached += f", measured {vanilla_measured_at:%H:%M}"
        label = f"{label}, {cached}" if label else cached
    return label
