"""Every run.json format the app ever wrote reads back with nothing lost (``app.storage.migrate``).

The folders under ``old_history/`` are what older builds wrote (see its README): each is read by
this build as the History reads it, and what it shows is checked against the file itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.engine.report import steps_from_json
from app.gate import StepEvent
from app.storage.comparisons import is_comparison, load_comparison
from app.storage.export import entry_captions, entry_metadata
from app.storage.history import GATED_FILE, META_FILE, HistoryEntry, HistoryStore
from app.storage.migrate import CURRENT_FORMAT, legacy_speedup_label, upgrade, upgrade_report

OLD = Path(__file__).parent / "old_history"
BUILDS = ("27377b5", "2c44b1f", "6553d13", "fbb3f59")


def _copy(build: str, tmp_path: Path) -> Path:
    root = tmp_path / build
    shutil.copytree(OLD / build, root)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _raw(entry: HistoryEntry) -> dict[str, Any]:
    return json.loads((entry.folder / META_FILE).read_text())


def _rows(rows: list[dict[str, Any]], *, vanilla: bool) -> tuple[StepEvent, ...]:
    """A format-1 file's step rows as this build reads them (each kind's figures in its
    section), and checked against the flat keys they came from: TeaCache's change, prediction
    and output change, MagCache's magnitude ratio and the probe's changes."""
    key = "vanilla_steps_detail" if vanilla else "steps_detail"
    steps = steps_from_json(upgrade_report({key: rows}), key)
    for step, row in zip(steps, rows, strict=True):
        assert (step.index, step.decision.value, step.accumulated) == (
            row["index"],
            row["decision"],
            row["accumulated"],
        )
        tea = step.figures("teacache")
        assert (tea["rel_l1"], tea["predicted"]) == (row["rel_l1"], row["predicted"])
        if vanilla:
            assert step.gate == "vanilla"
            assert tea.get("output_rel_l1") == row.get("output_rel_l1")
            assert step.figures("magcache")["ratio"] == row.get("mag_ratio")
            changes = row.get("block_changes")
            assert step.figures("firstblock")["changes"] == (
                None if changes is None else tuple(changes)
            )
        else:
            assert step.gate == row.get("gate", "teacache") and set(step.signals) == {"teacache"}
    return steps


def _entries(build: str, tmp_path: Path) -> list[HistoryEntry]:
    store = HistoryStore(_copy(build, tmp_path))
    entries = store.entries()
    assert store.warnings == []
    return entries


@pytest.mark.parametrize("build", BUILDS)
def test_every_old_entry_reads_back_whole_and_its_files_stay_as_they_were(
    build: str, tmp_path: Path
) -> None:
    root = _copy(build, tmp_path)
    before = _files(root)
    store = HistoryStore(root)
    entries = store.entries()
    assert len(entries) == 2 and store.warnings == []
    for entry in entries:
        raw = _raw(entry)
        assert raw["format"] == 1 < CURRENT_FORMAT
        report = entry.report
        # The run as the file recorded it: request, both passes, every step whole.
        request = raw["request"]
        assert (entry.request.variant_id, entry.request.prompt, entry.request.seed) == (
            request["variant_id"],
            request["prompt"],
            request["seed"],
        )
        assert entry.request.threshold == request["threshold"]
        assert entry.request.gate == request.get("gate", "teacache")
        assert report.gated.steps == _rows(raw["steps"]["gated"], vanilla=False)
        assert report.vanilla is not None
        assert report.vanilla.steps == _rows(raw["steps"]["vanilla"], vanilla=True)
        # not rebuilt columns
        assert any(s.figures("teacache")["predicted"] is not None for s in report.vanilla.steps)
        assert report.gated.pattern == raw["result"]["pattern"]
        assert report.ssim == pytest.approx(raw["result"]["ssim"])
        assert report.gated.loop_seconds == raw["result"]["gated_seconds"]
        assert report.vanilla.loop_seconds == raw["result"]["vanilla_seconds"]
        assert report.vanilla_cached is raw["result"]["vanilla_cached"]
        with Image.open(entry.folder / GATED_FILE) as image:
            assert np.array_equal(report.gated.image, np.asarray(image.convert("RGB")))
        # The speedup as the History listed it: the file's own figure.
        assert entry.speedup == raw["result"]["speedup"]
        assert entry.created == raw["created"] and entry.id == raw["id"]
        assert entry.versions == raw["versions"]
        assert entry_metadata(entry)["speedup"] == str(raw["result"]["speedup"])
        assert f"seed {request['seed']}" in entry_captions(entry)["footer"]
    # Read, never rewritten.
    assert _files(root) == before


def test_before_the_typed_report_the_result_and_a_derived_label_speak(tmp_path: Path) -> None:
    """27377b5 wrote no label: the label is derived from the result (the rule of its day)."""
    cached, fresh = _entries("27377b5", tmp_path)
    assert "speedup_label" not in _raw(fresh)["result"]
    assert (fresh.speedup_label, fresh.speedup_estimated) == ("measured", False)
    assert cached.report.vanilla_cached
    assert (cached.speedup_label, cached.speedup_estimated) == ("vanilla cached", False)
    assert cached.speedup == pytest.approx(12.114620042000013 / 3.8522300570000425)  # plain ratio
    # The report read back derives this build's figure and label, as a live run would.
    assert cached.report.speedup_label.startswith("re-timed estimate, vanilla cached")


def test_a_saved_label_stays_as_it_was_saved(tmp_path: Path) -> None:
    """2c44b1f saved its label: the History keeps that pair, the reopened report derives its own."""
    cached, fresh = _entries("2c44b1f", tmp_path)
    assert fresh.speedup_label == "measured"
    assert cached.speedup_label == "vanilla cached, measured 05:44"
    assert cached.speedup_label == _raw(cached)["result"]["speedup_label"]
    assert not cached.speedup_estimated
    assert cached.report.speedup_label != cached.speedup_label  # this build's rules differ
    # Files from before the gate and LoRA keys read with their defaults.
    assert "gate" not in _raw(cached)["request"]
    assert (cached.request.gate, cached.request.loras, cached.request.model_path) == (
        "teacache",
        (),
        None,
    )
    # 64 × 64 was the demo's size then; this build draws 128² only, so it does not reproduce.
    assert cached.to_request() is None


@pytest.mark.parametrize("build", ["6553d13", "fbb3f59"])
def test_an_old_comparison_reopens_with_every_row(build: str, tmp_path: Path) -> None:
    comparison, run = _entries(build, tmp_path)
    assert not is_comparison(run) and is_comparison(comparison)
    raw = _raw(comparison)["comparison"]
    saved = load_comparison(comparison)
    assert saved.thresholds == (0.05, 0.1, 0.2, 0.3) == tuple(raw["thresholds"])
    assert (saved.cancelled, saved.failure, saved.hardware) == (False, None, raw["hardware"])
    assert len(saved.rows) == 4
    shared = comparison.report.vanilla
    assert shared is not None
    for row, kept in zip(saved.rows, raw["entries"], strict=True):
        assert (row.threshold, row.skips, row.steps, row.pattern) == (
            kept["threshold"],
            kept["skips"],
            kept["steps"],
            kept["pattern"],
        )
        assert row.ssim == pytest.approx(kept["ssim"])
        assert row.gated_seconds == kept["gated_seconds"]
        assert row.report is not None and row.report.vanilla is not None
        assert row.report.vanilla.steps == shared.steps  # the file kept them once, for all
        with Image.open(comparison.folder / kept["image"]) as image:
            assert row.image is not None
            assert np.array_equal(row.image, np.asarray(image.convert("RGB")))
    # Read as one run: the user's threshold, its speedup as saved, with the report's full
    # label (the result kept a shortened one in 6553d13's day).
    assert comparison.request.threshold == raw["base_threshold"] == 0.1
    assert comparison.speedup == _raw(comparison)["result"]["speedup"]
    assert comparison.speedup_label == _raw(comparison)["report"]["speedup_label"]
    assert comparison.speedup_estimated
    assert comparison.to_request() is not None  # 128², a variant that still exists


def test_the_last_format_1_report_is_kept_as_it_was_written(tmp_path: Path) -> None:
    for entry in _entries("fbb3f59", tmp_path):
        raw = _raw(entry)
        two = upgrade(raw, to=2)
        assert set(two) >= {"format", "id", "created", "warnings", "versions", "report"}
        assert two["format"] == 2
        report = dict(two["report"])
        assert report.pop("vanilla_steps_detail") == raw["steps"]["vanilla"]
        assert report == raw["report"]  # the report wins, and it lacked nothing
        # Then each kind's flat keys into its sections, and nothing else.
        upgraded = upgrade(raw)
        assert upgraded["format"] == CURRENT_FORMAT
        kept = {k: v for k, v in two.items() if k not in ("format", "report", "comparison")}
        assert {k: v for k, v in upgraded.items() if k in kept} == kept
        assert upgraded["report"] == upgrade_report(two["report"])
        if "comparison" in two:  # each row's report alike
            rows = [row["report"] for row in upgraded["comparison"]["entries"]]
            assert rows == [upgrade_report(row["report"]) for row in two["comparison"]["entries"]]
        assert entry.report.to_json()["speedup_label"] == entry.speedup_label


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda meta: meta["request"].pop("prompt"), "request field 'prompt'"),
        (lambda meta: meta.update(result=[]), "result is malformed"),
        (lambda meta: meta.update(steps={"gated": "none"}), "step trace is malformed"),
        (lambda meta: meta["steps"]["vanilla"][0].update(decision="teleported"), "step record"),
        (lambda meta: meta.update(format=0), "unknown history format 0"),
    ],
)
def test_an_old_file_that_cannot_be_read_is_named_in_one_sentence_and_left_alone(
    tmp_path: Path, damage: Any, words: str
) -> None:
    root = _copy("2c44b1f", tmp_path)
    folder = sorted(root.iterdir())[0]
    meta = json.loads((folder / META_FILE).read_text())
    damage(meta)
    (folder / META_FILE).write_text(json.dumps(meta))
    before = _files(root)
    store = HistoryStore(root)
    assert [e.id for e in store.entries()] != [] and len(store.warnings) == 1
    [warning] = store.warnings
    assert warning.startswith(f"history entry {folder.name} skipped: ") and words in warning
    assert "\n" not in warning
    assert _files(root) == before


def test_a_label_from_before_labels_is_derived_by_the_rule_of_its_day(tmp_path: Path) -> None:
    """Builds before the label marked a speedup "estimated" whenever the pass had resumed at
    all; the label derived for such a file says what was replayed (nothing, resumed at step 0)."""
    root = _copy("27377b5", tmp_path)
    folder = root / "20261206-054434-330550-demo-s5"  # the fresh run
    meta = json.loads((folder / META_FILE).read_text())
    meta["result"].update(resumed_from=0, speedup_estimated=True)
    (folder / META_FILE).write_text(json.dumps(meta))
    old = HistoryStore(root).get(folder.name)
    assert old is not None
    assert old.speedup_label == "measured"  # resumed at step 0: nothing was replayed
    assert not old.speedup_estimated
    meta["result"].update(resumed_from=2, vanilla_cached=True)
    (folder / META_FILE).write_text(json.dumps(meta))
    older = HistoryStore(root).get(folder.name)
    assert older is not None
    assert older.speedup_label == "estimate (2 of 8 steps replayed), vanilla cached"
    assert older.speedup_estimated


def test_the_legacy_label_function_alone() -> None:
    assert legacy_speedup_label(replayed_steps=0, steps=28, vanilla_cached=False) == "measured"
    assert legacy_speedup_label(replayed_steps=5, steps=28, vanilla_cached=False) == (
        "estimate (5 of 28 steps replayed)"
    )
    assert legacy_speedup_label(replayed_steps=0, steps=28, vanilla_cached=True) == (
        "vanilla cached"
    )


def _flat_row(index: int, gate: str, **figures: object) -> dict[str, object]:
    """A step row as ``StepEvent.as_dict`` wrote it before the kinds had sections (fbb3f59)."""
    row: dict[str, object] = {
        "index": index,
        "num_steps": 4,
        "decision": "skipped",
        "rel_l1": None,
        "predicted": None,
        "accumulated": 0.03,
        "threshold": 0.05,
        "seconds": 0.1,
        "output_rel_l1": None,
        "gate": gate,
        "mag_ratio": None,
        "block_change": None,
        "block_changes": None,
    }
    return {**row, **figures}


def test_each_kind_reads_its_own_flat_keys_of_an_older_row() -> None:
    """MagCache's and the probe's gated rows (the committed folders ran TeaCache only): the
    deciding kind's figures move to its section, the others' (all None there) stay out."""
    rows = [
        _flat_row(1, "magcache", predicted=0.97),
        _flat_row(2, "firstblock", block_change=0.03),
        _flat_row(3, "teacache", rel_l1=0.02, predicted=0.01),
    ]
    magcache, probe, teacache = steps_from_json(upgrade_report({"steps_detail": rows}))
    assert (magcache.gate, dict(magcache.signals)) == (
        "magcache",
        {"magcache": {"table_ratio": 0.97}},
    )
    assert (probe.gate, dict(probe.signals)) == ("firstblock", {"firstblock": {"change": 0.03}})
    assert dict(teacache.signals) == {"teacache": {"rel_l1": 0.02, "predicted": 0.01}}
    assert {s.accumulated for s in (magcache, probe, teacache)} == {0.03}


def test_teacaches_polynomial_moves_into_its_section_of_the_report() -> None:
    old = {"coefficients": [1.0, -2.0, 0.5, 0.0, 0.1], "calibrated_range": [0.01, 0.4]}
    assert upgrade_report(old)["gate_fields"] == {"teacache": old}
    # A report whose gate had no polynomial (MagCache's, the probe's) kept an empty one.
    assert upgrade_report({"coefficients": [], "calibrated_range": None})["gate_fields"] == {}
    ours = {"gate_fields": {"magcache": {}}, "steps_detail": []}
    assert upgrade_report(ours) == ours  # this build's report, as it is
