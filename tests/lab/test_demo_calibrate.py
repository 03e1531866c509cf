"""lab.demo.calibrate writes a variant's TeaCache record into the calibration file that the gate
kinds share: a re-calibration replaces the TeaCache fields and keeps MagCache's section."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.paths import DEMO_DIR
from lab.demo.calibrate import write_calibration


def test_a_recalibration_keeps_the_other_gates_sections(tmp_path: Path) -> None:
    path = tmp_path / "demo.calibration.json"
    shutil.copyfile(DEMO_DIR / "demo.calibration.json", path)
    shipped = json.loads(path.read_text(encoding="utf-8"))
    assert "magcache" in shipped
    record = {k: v for k, v in shipped.items() if k != "magcache"}
    record["default_threshold"] = 0.2
    write_calibration(path, record)
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["magcache"] == shipped["magcache"]
    assert written["default_threshold"] == 0.2
    assert {k: v for k, v in written.items() if k != "magcache"} == record
