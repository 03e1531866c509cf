"""Issue #29's device rows reach the README from the committed reports alone
(``lab.bench.device_figures``): a report under the name ``lab/bench/device/issue29.sh`` writes is
taken in from the batch's folder as it came back, becomes a row of the performance table, and its
two ratios replace "not measured yet" in the "This year's models" sentence (``lab.readme_figures
--write``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from app.bench.table import BENCHMARKS_DIR
from lab.bench.device_figures import (
    NOT_MEASURED,
    THIS_YEARS_REPORTS,
    bench_table_block,
    collect,
    this_years_passage,
)
from lab.readme_figures import README, differences, rewrite

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "lab" / "bench" / "device" / "issue29.sh"


def test_the_batch_writes_the_reports_the_readme_reads() -> None:
    """The default cases' report names, as the script builds them, are the ones read here."""
    text = SCRIPT.read_text(encoding="utf-8")
    default = re.search(r"cases=\((?P<cases>[^)]*)\)\n", text.split('cases=("$@")')[1])
    assert default is not None
    plans = dict(re.findall(r"^\s+([\w-]+)\) echo \"(\S+) 1024x1024 ", text, re.MULTILINE))
    assert 'stem="$variant-${size%%x*}-random-h200"' in text
    written = {f"{plans[case]}-1024-random-h200.json" for case in default["cases"].split()}
    assert written == set(THIS_YEARS_REPORTS.values())


def test_a_committed_report_becomes_a_row_and_its_ratios(tmp_path: Path) -> None:
    # A committed H200 report stands in for the device's FLUX.3 one (same schema).
    shutil.copy(BENCHMARKS_DIR / "z-image-1024-random-h200.json", tmp_path)
    flux3 = THIS_YEARS_REPORTS["flux3"]
    shutil.copy(BENCHMARKS_DIR / "z-image-1024-random-h200.json", tmp_path / flux3)
    passage = this_years_passage(tmp_path)
    # The stand-in's own two ratios, read from its speedup block and rounded to 2 places.
    expected = _ratios(BENCHMARKS_DIR / "z-image-1024-random-h200.json")
    assert passage.values == {
        "flux3": expected,
        "qwen21": NOT_MEASURED,
        "krea2": NOT_MEASURED,
    }
    block = bench_table_block(tmp_path)
    rows = [line for line in block.text.splitlines() if line.startswith("| **")]
    # A row per gated line of each of the two copies (TeaCache's and, where run, the probe's).
    gated = [c for c in json.loads((tmp_path / flux3).read_text("utf-8"))["conditions"]]
    lines = len([c for c in gated if c.startswith("gated")])
    assert len(rows) == 2 * lines and rows[0].endswith(f"| `resources/benchmarks/{flux3}` |")

    readme = README.read_text(encoding="utf-8")
    assert not differences(readme, [this_years_passage()])  # the README holds what is committed
    written = rewrite(readme, [passage, block])
    assert f"FLUX.3\n  Image Klein {expected}, Qwen-Image 2.1 not measured yet" in written
    assert f"`resources/benchmarks/{flux3}`" in written
    assert not differences(written, [passage, block])


def test_collect_takes_issue29s_reports_by_their_committed_names(tmp_path: Path) -> None:
    batch, benchmarks = tmp_path / "batch", tmp_path / "benchmarks"
    batch.mkdir()
    benchmarks.mkdir()
    # A committed H200 report stands in for the device's Krea 2 one; a CPU dry run's FLUX.3 one.
    report = json.loads((BENCHMARKS_DIR / "z-image-1024-random-h200.json").read_text("utf-8"))
    krea2, flux3 = THIS_YEARS_REPORTS["krea2"], THIS_YEARS_REPORTS["flux3"]
    (batch / krea2).write_text(json.dumps(report), encoding="utf-8")
    (batch / krea2).with_suffix(".md").write_text("# the report\n", encoding="utf-8")
    report["recipe"]["random_weights"] = "tiny"
    (batch / flux3).write_text(json.dumps(report), encoding="utf-8")
    lines = collect(batch, benchmarks, tmp_path / "profile.json")
    assert lines == [  # in THIS_YEARS_REPORTS' order
        f"{flux3}: not taken, a CPU dry run's bench (tiny random weights)",
        f"{krea2} -> {benchmarks / krea2}",
    ]
    assert sorted(p.name for p in benchmarks.iterdir()) == sorted(
        [krea2, krea2.replace(".json", ".md")]
    )
    assert this_years_passage(benchmarks).values["krea2"] == _ratios(
        BENCHMARKS_DIR / "z-image-1024-random-h200.json"
    )


def _ratios(path: Path) -> str:
    speedup = json.loads(path.read_text("utf-8"))["speedup"]
    return f"{speedup['gate_off_vs_vanilla']:.2f} and {speedup['measured_over_ideal']:.2f}"
