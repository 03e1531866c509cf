"""The in-process preview-phase benchmark (lab/bench/preview_phase.py) on a tiny size: every mode
runs, and the previewer delivers one preview per step in both preview modes (asserted inside the
loop). No timing is asserted; the count of host transfers that waited on the device is: one per
step for the blocking design, none for the queued one."""

from __future__ import annotations

import pytest

from lab.bench import preview_phase


def test_tiny_run_reports_each_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert preview_phase.main(["--size", "64", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == ["off", "blocking", "queued"]
    assert rows["blocking"].endswith("waiting transfers 1.00/step")
    assert rows["queued"].endswith("waiting transfers 0.00/step")
    # The parser the README's figures are read with reads this printout back, line for line.
    modes = preview_phase.parse(out)
    assert list(modes) == list(rows)
    assert (modes["blocking"]["waits"], modes["queued"]["waits"]) == (1.0, 0.0)
    assert all(m["host_ms"] >= 0 and m["wall_ms"] > 0 for m in modes.values())
    assert modes["off"]["over_ms"] == 0.0
