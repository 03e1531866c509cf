"""Every run.json the history ever wrote, upgraded to this build's format as it is read.

This module is the one place that knows the older formats. It upgrades in memory only: a file is
never rewritten (an older build still reads its own), and one that cannot be upgraded is left on
disk untouched while the history lists it as skipped, in one sentence.

Format 3 (this build) is ``{format, id, created, warnings, versions, report}``: ``report`` is
``RunReport.to_json``, the run once. A threshold comparison adds ``comparison``, whose rows are
their reports (``app.storage.comparisons``). Each gate kind keeps its own figures in a section of
its own: a step's under ``signals`` (``StepEvent.as_dict``), the report's under ``gate_fields``.

Format 2 had the same shape, but each kind's figures were flat keys of a step row (``rel_l1``,
``predicted``, ``output_rel_l1``, ``mag_ratio``, ``block_change``, ``block_changes``) and of the
report (TeaCache's ``coefficients`` and ``calibrated_range``): each kind reads its own back
(``GateKind.legacy_figures``, ``GateKind.legacy_report_fields``; ``upgrade_report``, which also
serves a report.json of those builds). A vanilla row was its observer's (TeaCache's), whose
figures are every kind's.

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
from app.gate.events import VANILLA, figure_to_json
from app.gate.kinds import gate_fields_to_json, legacy_gate_fields, legacy_signals

CURRENT_FORMAT = 3
# A step row's keys every build wrote whatever gate ran (the rest were the kinds' own).
_STEP_KEYS = ("index", "num_steps", "decision", "accumulated", "threshold", "seconds")

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


def upgrade(data: object, *, to: int = CURRENT_FORMAT) -> dict[str, Any]:
    """``data`` (a run.json as parsed) in format ``to`` (this build's unless a test asks for a
    step on the way); ``ValueError`` with one sentence where it is no run.json this app wrote."""
    if not isinstance(data, dict):
        raise ValueError("run.json does not hold a JSON object")
    version = json_int(data.get("format"))
    if version is None or not 1 <= version <= CURRENT_FORMAT:
        raise ValueError(f"unknown history format {data.get('format')!r}")
    if version == 1 and to > 1:
        data, version = _from_format_1(data), 2
    if version == 2 and to > 2:
        data, version = _from_format_2(data), 3
    return data


def _from_format_2(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Each kind's flat keys into its sections, in the run's report and a comparison's rows."""
    upgraded = {**meta, "format": CURRENT_FORMAT}
    if isinstance(meta.get("report"), Mapping):
        upgraded["report"] = upgrade_report(meta["report"])
    comparison = meta.get("comparison")
    if isinstance(comparison, Mapping) and isinstance(comparison.get("entries"), list):
        upgraded["comparison"] = {
            **comparison,
            "entries": [
                {**row, "report": upgrade_report(row["report"])}
                if isinstance(row, Mapping) and isinstance(row.get("report"), Mapping)
                else row
                for row in comparison["entries"]
            ],
        }
    return upgraded


def upgrade_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """A report's JSON (run.json's, or a report.json) from a build before the kinds had sections,
    in this build's shape: each step row's figures under ``signals``, the kinds' report fields
    under ``gate_fields``. A report already in this shape is returned as it is."""
    upgraded = dict(report)
    for key, vanilla in (("steps_detail", False), ("vanilla_steps_detail", True)):
        rows = report.get(key)
        if isinstance(rows, list):
            upgraded[key] = [_step_row(row, vanilla=vanilla) for row in rows]
    if "gate_fields" not in report:
        upgraded["gate_fields"] = gate_fields_to_json(legacy_gate_fields(report))
    return upgraded


def _step_row(row: object, *, vanilla: bool) -> object:
    if not isinstance(row, Mapping) or "signals" in row:
        return row  # this build's (or nothing a reader takes: it says so)
    upgraded: dict[str, Any] = {key: row[key] for key in _STEP_KEYS if key in row}
    if vanilla:
        upgraded["gate"] = VANILLA
    elif "gate" in row:
        upgraded["gate"] = row["gate"]
    upgraded["signals"] = {
        kind: {key: figure_to_json(value) for key, value in figures.items()}
        for kind, figures in legacy_signals(row, vanilla=vanilla).items()
    }
    return upgraded


def _from_format_1(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Format 1 as format 2 (``_from_format_2`` takes it on from there)."""
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
        "format": 2,
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
