"""The new-user walk reports in ``lab/ui/results/``: each named by the date it was walked and the
commit it walked (``walk-2026-12-02-c83ecee.md``), its title naming that commit and date, its
screenshots in the folder of the same name, and every reference to a walk report (README, docs,
lab, tests) naming one that exists (#39 item 13: they were named by round)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "lab" / "ui" / "results"
NAME = re.compile(r"^walk-(\d{4}-\d{2}-\d{2})-([0-9a-f]{7,40})$")


def _reports() -> list[Path]:
    return sorted(RESULTS.glob("walk*.md"))


def test_each_walk_report_is_named_by_its_date_and_commit() -> None:
    reports = _reports()
    assert reports  # the walks are kept
    for report in reports:
        found = NAME.match(report.stem)
        assert found, f"{report.name}: not walk-<date>-<commit>.md"
        date, commit = found.groups()
        title = report.read_text(encoding="utf-8").splitlines()[0]
        assert commit in title and date in title, title
        shots = RESULTS / report.stem
        for named in re.findall(r"`(walk-[^/`]+)/", report.read_text(encoding="utf-8")):
            assert named == report.stem, f"{report.name} names {named}/"
        assert not shots.exists() or any(shots.iterdir())
    folders = [p for p in RESULTS.iterdir() if p.is_dir() and p.name.startswith("walk")]
    assert sorted(p.name for p in folders) == sorted(
        r.stem for r in reports if (RESULTS / r.stem).is_dir()
    )


def test_every_reference_to_a_walk_report_names_one_that_exists() -> None:
    existing = {p.name for p in _reports()}
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md")]
    texts += [p for p in (ROOT / "lab").rglob("*") if p.suffix in (".md", ".py")]
    texts += list((ROOT / "tests").rglob("*.py"))
    named = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in texts
        for name in re.findall(r"\bwalk-[\w.-]*?\.md\b", path.read_text(encoding="utf-8"))
    }
    assert named  # the README names them
    assert {(where, name) for where, name in named if name not in existing} == set()
