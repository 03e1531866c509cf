"""A threshold comparison in the history: one entry, read back with every row, older entries
unaffected, and written in one rename (no half entry on failure)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from app.engine.comparison import ComparisonResult, ThresholdComparison
from app.engine.jobs import run_job
from app.engine.request import make_request
from app.storage.comparisons import (
    ComparisonRow,
    image_name,
    is_comparison,
    load_comparison,
    same_skips,
    save_comparison,
)
from app.storage.export import export_entry
from app.storage.history import META_FILE, HistoryStore
from tests.fakes.engine import FakeEngine

THRESHOLDS = (0.05, 0.1, 0.2, 0.3)


def _result(cancel_after: int | None = None) -> ComparisonResult:
    base = make_request("demo", "a red circle on a blue background", steps=10, threshold=0.1)
    cancel = threading.Event()

    def emit(event: object) -> None:
        if cancel_after is not None and getattr(event, "index", -1) == cancel_after - 1:
            cancel.set()

    result = run_job(FakeEngine(), 1, ThresholdComparison(base, THRESHOLDS), emit, cancel)
    assert result is not None
    return result


def test_a_comparison_round_trips_as_one_entry(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    result = _result()
    entry = save_comparison(store, result, hardware="Test CPU, 2 cores, MLX cpu")

    listed = store.entries()
    assert [e.id for e in listed] == [entry.id] and is_comparison(listed[0])
    saved = load_comparison(listed[0])
    assert saved.thresholds == THRESHOLDS and not saved.cancelled and saved.failure is None
    assert saved.hardware == "Test CPU, 2 cores, MLX cpu"
    assert len(saved.rows) == 4
    for row, report in zip(saved.rows, result.reports, strict=True):
        assert row.threshold == report.request.threshold
        assert row.skips == report.gated.skipped and row.steps == 10
        assert row.ssim == report.ssim and row.speedup == report.speedup
        assert row.speedup_label == report.speedup_label
        assert row.gated_seconds == report.gated.loop_seconds
        assert row.image is not None and np.array_equal(row.image, report.gated.image)
        # The rebuilt report says the same as the one that was saved.
        assert row.report is not None
        assert row.report.speedup_label == report.speedup_label
        assert row.report.gated.pattern == report.gated.pattern
    vanilla = result.reports[0].vanilla
    assert vanilla is not None and saved.vanilla is not None
    assert np.array_equal(saved.vanilla, vanilla.image)
    # Read as a single run (the list, the side-by-side export): the user's threshold.
    assert listed[0].request.threshold == 0.1
    assert np.array_equal(listed[0].load_images()[0], result.reports[1].gated.image)
    assert export_entry(listed[0], tmp_path / "out").is_file()


def test_a_comparison_entry_has_the_shape_of_a_run_and_each_row_is_its_report(
    tmp_path: Path,
) -> None:
    result = _result()
    entry = save_comparison(HistoryStore(tmp_path), result, hardware="Test CPU")
    meta = json.loads((entry.folder / META_FILE).read_text())
    assert set(meta) == {"format", "id", "created", "warnings", "versions", "report", "comparison"}
    shown = meta["comparison"]["shown"]
    assert shown == 1  # the user's threshold, 0.1
    assert meta["report"] == json.loads(json.dumps(result.reports[shown].to_json()))
    rows = meta["comparison"]["entries"]
    assert [set(row) for row in rows] == [
        {"image"} if i == shown else {"image", "report"} for i in range(len(THRESHOLDS))
    ]  # the shown row's report is the entry's own, written once
    for i, row in enumerate(rows):
        if i != shown:
            assert row["report"] == json.loads(json.dumps(result.reports[i].to_json()))


def test_a_cancelled_comparison_keeps_its_finished_rows(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    result = _result(cancel_after=2)
    assert result.cancelled and len(result.reports) == 2
    saved = load_comparison(save_comparison(store, result, hardware=""))
    assert saved.cancelled and len(saved.rows) == 2 and saved.thresholds == THRESHOLDS


def test_plain_runs_still_load_beside_comparisons(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    result = _result()
    store.save(result.reports[0])
    save_comparison(store, result, hardware="")
    kinds = sorted(is_comparison(e) for e in store.entries())
    assert kinds == [False, True] and store.warnings == []
    plain = next(e for e in store.entries() if not is_comparison(e))
    with pytest.raises(ValueError, match="not a threshold comparison"):
        load_comparison(plain)


def test_a_damaged_comparison_says_so_in_one_sentence(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    entry = save_comparison(store, _result(), hardware="")
    (entry.folder / image_name(2)).unlink()
    with pytest.raises(OSError):
        load_comparison(entry)
    assert store.entries()[0].id == entry.id  # still listed (its run is intact)


def test_a_failed_write_leaves_no_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = HistoryStore(tmp_path)
    import app.storage.history as history

    calls = {"n": 0}
    real = history.atomic_write_bytes

    def fail_on_fourth(path: Path, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # gated, vanilla, compare-0, then this one
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(history, "atomic_write_bytes", fail_on_fourth)
    with pytest.raises(OSError):
        save_comparison(store, _result(), hardware="")
    assert list(tmp_path.iterdir()) == []


def _row(threshold: float, pattern: str) -> ComparisonRow:
    skips = pattern.count("S")
    return ComparisonRow(
        threshold, None, skips, len(pattern), None, None, None, None, "", pattern=pattern
    )


def test_same_skips_names_the_first_earlier_row_with_the_same_pattern() -> None:
    rows = [
        _row(0.05, "FCCF"),
        _row(0.1, "FSCF"),
        _row(0.15, "FCCF"),
        _row(0.2, "FSCF"),
        _row(0.25, "FCCF"),
        _row(0.3, ""),  # not run: no pattern, never a twin
    ]
    assert same_skips(rows) == {2: 0, 3: 1, 4: 0}
    assert same_skips(rows[:2]) == {}


def test_each_saved_png_carries_its_own_runs_figures(tmp_path: Path) -> None:
    """The history's PNGs carry their run's metadata like generate's (#27, "Also"); each
    comparison tile its own threshold and skips, not the representative's."""
    from PIL import Image

    from app.storage.history import GATED_FILE

    entry = save_comparison(HistoryStore(tmp_path), _result(), hardware="Test CPU")
    result_rows = load_comparison(entry).rows
    for i, row in enumerate(result_rows):
        with Image.open(entry.folder / image_name(i)) as image:
            text = dict(image.text)  # type: ignore[attr-defined]
        assert float(text["threshold"]) == row.threshold == THRESHOLDS[i]
        assert text["skips"] == str(row.skips)
        assert text.get("speedup_label", "") == row.speedup_label
    with Image.open(entry.folder / GATED_FILE) as image:
        shown = dict(image.text)  # type: ignore[attr-defined]
    assert float(shown["threshold"]) == 0.1 and shown["variant"] == "demo"
