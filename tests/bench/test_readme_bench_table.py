"""README.md's performance table is exactly what the committed benchmark JSON renders to.

To update it: commit new reports under resources/benchmarks/, then run
``uv run python -m lab.readme_figures --write`` (or paste ``teacache-studio bench --readme-table``
over the block between the markers).
"""

from __future__ import annotations

from pathlib import Path

from app.bench.table import END_MARKER, START_MARKER, load_reports, readme_block, readme_table

ROOT = Path(__file__).resolve().parents[2]


def test_readme_holds_exactly_the_rendered_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme_block(readme)
    assert block is not None, (
        f"README.md has no {START_MARKER} … {END_MARKER} block; paste the output of "
        "`teacache-studio bench --readme-table`"
    )
    assert block == readme_table(), (
        "README.md's benchmark table differs from resources/benchmarks/*.json; paste the output "
        "of `teacache-studio bench --readme-table` between the markers"
    )


def test_every_committed_report_has_engagement_beside_every_time() -> None:
    reports = load_reports()
    assert reports, "no benchmark report committed under resources/benchmarks/"
    for name, report in reports:
        assert report["isolation"].startswith("every (condition, repetition) in a fresh"), name
        conditions = set(report["conditions"])
        # The three a bench always runs, plus a gated line per extra gate (`--also-gate`).
        assert {"vanilla", "gate_off", "gated"} <= conditions, name
        assert all(c.startswith("gated-") for c in conditions - {"vanilla", "gate_off", "gated"})
        assert list(report["conditions"]) == report["recipe"]["conditions"], name
        for run in report["runs"]:
            assert run["loop_seconds"] > 0, name
            assert len(run["pattern"]) == run["active_steps"], name
            assert run["skipped"] == run["pattern"].count("S"), name
        if report["recipe"]["threshold"] > 0 and report["recipe"]["coefficients"] is not None:
            # A forced pattern is there to be measured: every gated line must have engaged.
            for condition in conditions - {"vanilla", "gate_off"}:
                assert min(report["conditions"][condition]["skipped"]) > 0, (name, condition)
        assert report["hardware"]["runtime"].get("mlx_device"), name


def test_rendered_table_has_one_row_per_gated_line() -> None:
    table = readme_table()
    rows = [line for line in table.splitlines() if line.startswith("| **")]
    gated_lines = sum(
        len([c for c in report["conditions"] if c.startswith("gated")])
        for _, report in load_reports()
    )
    assert len(rows) == gated_lines
    assert table.startswith(START_MARKER) and table.endswith(END_MARKER)
