"""No absolute machine path in what ships or is read as documentation: ``app/``, the research
code in ``lab/`` and ``docs/`` cite a fact itself or a path relative to the repository
(``../shared/research/...``), never one machine's folders (``/work/...``, ``/home/<user>``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A path that starts at one machine's root folders; /tmp and the like in usage examples are fine.
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|home|Users|mnt|root|srv)/\w")


def _machine_paths(files: list[Path], root: Path = ROOT) -> list[str]:
    return [
        f"{file.relative_to(root)}:{number}: {line.strip()}"
        for file in files
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]


def _checked_files(root: Path = ROOT) -> list[Path]:
    files = [*(root / "app").rglob("*.py"), *(root / "lab").rglob("*.py")]
    files += (root / "docs").rglob("*.md")
    return sorted(f for f in files if "__pycache__" not in f.parts)


def test_no_absolute_machine_path_in_app_lab_code_or_docs() -> None:
    files = _checked_files()
    assert len(files) > 100  # app, lab and docs were found
    offenders = _machine_paths(files)
    assert not offenders, offenders


def test_the_finder_finds_machine_paths_and_leaves_relative_ones(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "# /work/shared/research/turn3/peers.md §2\n"
        '"see /home/alice/notes.md"\n'
        "# ../shared/research/turn3/peers.md §2\n"
        "# python -m lab.gates.compare --out /tmp/cmp\n"
        "# resources/work/x and https://example.org/work/x\n"
    )
    assert _machine_paths([sample], tmp_path) == [
        "sample.py:1: # /work/shared/research/turn3/peers.md §2",
        'sample.py:2: "see /home/alice/notes.md"',
    ]
