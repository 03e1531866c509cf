"""The README's real-size benchmark figures, from the reports committed under
``resources/benchmarks/``: the performance table (``app.bench.table.readme_table``) and the
"This year's models" sentence with issue #29's device rows (``lab/bench/device/issue29.sh``).

After a device batch: copy its ``*-random-h200.json`` / ``.md`` into ``resources/benchmarks/``,
then ``uv run python -m lab.readme_figures --write`` rewrites both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.bench.table import (
    BENCHMARKS_DIR,
    END_MARKER,
    START_MARKER,
    load_reports,
    readme_table,
)
from lab.readme_figures import Block, Figure, Passage, fixed

# Issue #29's families: the report ``issue29.sh`` writes for each (the file name to commit).
THIS_YEARS_REPORTS = {
    "flux3": "flux3-image-klein-1024-random-h200.json",
    "qwen21": "qwen-image-2.1-1024-random-h200.json",
    "krea2": "krea-2-1024-random-h200.json",
}
NOT_MEASURED = "not measured yet"
THIS_YEARS_TEMPLATE = (
    "`lab/bench/device/issue29.sh` builds them at mflux's dimensions (`bench --random-weights "
    "full`) and times TeaCache's seam on the forced pattern; gate off / vanilla and measured / "
    "ideal: FLUX.3 Image Klein {flux3}, Qwen-Image 2.1 {qwen21}, Krea 2 {krea2} (each measured "
    "one is a row of the table below)."
)


def bench_table_block(directory: Path = BENCHMARKS_DIR) -> Block:
    """The performance table between its markers, as ``bench --readme-table`` prints it."""
    table = readme_table(directory)
    body = table.removeprefix(START_MARKER + "\n").removesuffix("\n" + END_MARKER)
    return Block("bench-table", f"{directory.name}/*.json", body)


def ratios(report: dict[str, Any]) -> str:
    """ "gate off / vanilla and measured / ideal" of one report, as the table rounds them."""
    speedup = report["speedup"]
    return (
        f"{fixed(speedup['gate_off_vs_vanilla'], 2)} and {fixed(speedup['measured_over_ideal'], 2)}"
    )


def this_years_passage(directory: Path = BENCHMARKS_DIR) -> Passage:
    reports = dict(load_reports(directory))
    values = {
        key: ratios(reports[name]) if name in reports else NOT_MEASURED
        for key, name in THIS_YEARS_REPORTS.items()
    }
    return Passage(f"{directory.name}/issue29 rows", THIS_YEARS_TEMPLATE, values)


def readme_figures() -> list[Figure]:
    return [bench_table_block(), this_years_passage()]
