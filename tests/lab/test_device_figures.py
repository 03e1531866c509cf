"""The device batch's reports reach the README only as GPU runs with their commit
(``lab.bench.device_figures``): a CPU dry run's are refused, a GPU run's are copied where the
figures read them, and the targets table marks a target met exactly where its rounded figure
meets it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from app.bench.table import BENCHMARKS_DIR
from lab.bench import device_figures
from lab.bench.device_figures import CASES, TARGETS, collect, profile_tables, targets_table


def _report(name: str) -> dict[str, Any]:
    return json.loads((BENCHMARKS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def _write(path: Path, report: dict[str, Any]) -> None:
    path.write_text(json.dumps(report), encoding="utf-8")


def _profile(*, tiny: bool, device: str = "Device(gpu, 0)") -> dict[str, Any]:
    loop = {
        "gate": "teacache",
        "pattern": "FSCSCSCSCSCF",
        "skipped_step_ms": {"latents_eval": 0.5, "glue": 0.2, "step": 0.75},
        "computed_step_ms": {"step": 71.0},
        "skipped_over_computed": 0.75 / 71.0,
        "measured_over_ideal_in_loop": 0.991,
    }
    ms = {"prelude": 0.5, "skipped_step_graph": 0.9, "vanilla_predict": 71.8}
    return {
        "kind": "profile-skip",
        "dtype": "mlx.core.bfloat16",
        "tiny": tiny,
        "n": 20,
        "device": device,
        "gpus": ["NVIDIA H200, 143771 MiB"],
        "git": {"commit": "abcdef0123", "dirty": None},
        "rows": [{"family": "flux2-klein-4b", "size": 1024, "ms": ms, "loop": loop}],
    }


def test_collect_takes_gpu_reports_and_refuses_a_dry_run(tmp_path: Path) -> None:
    batch, benchmarks = tmp_path / "batch", tmp_path / "benchmarks"
    batch.mkdir()
    benchmarks.mkdir()
    gpu = _report(CASES["flux2-512"])
    _write(batch / "flux2-512.json", gpu)
    (batch / "flux2-512.md").write_text("# the report\n", encoding="utf-8")
    dry = _report(CASES["flux2-1024"])
    dry["recipe"]["random_weights"] = "tiny"
    _write(batch / "flux2-1024.json", dry)
    no_commit = _report(CASES["z-image-1024"])
    no_commit["hardware"]["git"]["commit"] = None
    _write(batch / "z-image-1024.json", no_commit)
    _write(batch / "profile-skip.json", _profile(tiny=True, device="Device(cpu, 0)"))
    profile = tmp_path / "skip-profile.json"

    lines = collect(batch, benchmarks, profile)

    assert lines == [
        "flux2-1024.json: not taken, a CPU dry run's bench (tiny random weights)",
        f"flux2-512.json -> {tmp_path / 'benchmarks' / (CASES['flux2-512'] + '.json')}",
        "z-image-1024.json: not taken, no commit recorded (set TEACACHE_GIT_COMMIT on the device)",
        "profile-skip.json: not taken, a CPU dry run's profile (tiny shells)",
    ]
    assert sorted(p.name for p in benchmarks.iterdir()) == [
        f"{CASES['flux2-512']}.json",
        f"{CASES['flux2-512']}.md",
    ]
    assert json.loads((benchmarks / f"{CASES['flux2-512']}.json").read_text()) == gpu
    assert not profile.exists()

    _write(batch / "profile-skip.json", _profile(tiny=False))
    assert collect(batch, benchmarks, profile)[-1] == f"profile-skip.json -> {profile}"
    assert json.loads(profile.read_text()) == _profile(tiny=False)


def test_every_target_reads_a_committed_report_of_its_case() -> None:
    assert {t.file for t in TARGETS} == {f"{name}.json" for name in CASES.values()}


def _row(table: str, family: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {family} |"))


def test_a_target_is_bold_exactly_where_its_rounded_figure_meets_it(tmp_path: Path) -> None:
    for target in TARGETS:
        shutil.copyfile(BENCHMARKS_DIR / target.file, tmp_path / target.file)
    klein = tmp_path / "flux2-klein-4b-1024-random-h200.json"
    report = json.loads(klein.read_text())
    report["speedup"].update(gate_off_vs_vanilla=0.985, measured_over_ideal=0.975)
    report["step_costs"].update(
        skipped_seconds=0.000715, computed_seconds=0.0715, skipped_over_computed=0.01
    )
    _write(klein, report)
    row = _row(targets_table(tmp_path), "FLUX.2 Klein 4B")
    assert "| **0.99** | **0.98** (≥ 0.98, #30) | **1.0%** (0.715 / 71.5 ms) |" in row

    report["speedup"].update(gate_off_vs_vanilla=0.984, measured_over_ideal=0.974)
    report["step_costs"].update(skipped_over_computed=0.0106)
    _write(klein, report)
    row = _row(targets_table(tmp_path), "FLUX.2 Klein 4B")
    assert "| 0.98 | 0.97 (≥ 0.98, #30) | 1.1% (0.715 / 71.5 ms) |" in row
    skipped = report["conditions"]["gated"]["skipped"][0]
    assert row.endswith(
        f"| {skipped}/20 | {report['recipe']['reps']} | {report['hardware']['git']['commit'][:7]} |"
    )


def test_the_profile_tables_name_the_hardware_and_each_skipped_step(tmp_path: Path) -> None:
    text = profile_tables(_profile(tiny=False))
    assert text.splitlines()[0].startswith("H200, bfloat16, commit abcdef0; ")
    assert "| FLUX.2 Klein 4B, 1024² | 0.50 |" in text
    assert "0.90 (1.3%)" in text  # the skipped step's graph and its share of a vanilla predict
    assert "| FLUX.2 Klein 4B, 1024² | teacache | `FSCSCSCSCSCF` |" in text
    assert text.rstrip().endswith("| 0.75 | 71.00 | 1.1% | 0.99 |")
    missing = device_figures.profile_block(tmp_path / "absent.json")
    assert "issue17.sh profile-skip" in missing
