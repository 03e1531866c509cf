"""MagCache from a picture: its table is indexed by the schedule's step, so a run that starts at
step k (strength leaves the first k out) reads the schedule's ratios from k on, keeps the
schedule's retention window and always-computed steps where they fall, and the kinds that read
only the steps that ran keep their numbers (``GateKind.for_steps_run``)."""

from __future__ import annotations

import pytest

from app.gate.kinds import GATE_KINDS, gate_kind
from app.gate.magcache import MagCacheParams, simulate_magcache
from app.variants import get_variant

TABLE = (1.0, 1.2, 1.1, 1.05, 1.02, 1.0, 0.99, 0.98, 0.97, 0.95, 0.9, 0.85, 0.8, 0.7)
PARAMS = MagCacheParams(TABLE, 0.2, retention_ratio=0.3, always_compute=(11,))


@pytest.mark.parametrize("steps", [14, 20, 28])
@pytest.mark.parametrize("left_out", [1, 4, 9])
def test_the_run_reads_the_schedules_numbers_where_it_starts(steps: int, left_out: int) -> None:
    tail = PARAMS.for_steps_run(steps, left_out)
    ran = steps - left_out
    assert tail.ratios_for(ran) == PARAMS.ratios_for(steps)[left_out:]
    assert [tail.protected(i, ran) for i in range(ran)] == [
        PARAMS.protected(left_out + i, steps) for i in range(ran)
    ]
    assert tail.first_eligible(ran) == max(0, PARAMS.first_eligible(steps) - left_out)
    assert tail.threshold == PARAMS.threshold
    assert tail.with_threshold(0.3).ratios == tail.ratios  # a threshold change keeps the cut


def test_the_cut_changes_the_decisions_on_the_demo() -> None:
    """On the demo's own table (28 steps from a picture at strength 0.6: 11 left out), the run's
    verdicts differ from the table squeezed onto 17 steps, which read the schedule's early
    ratios for late steps."""
    kind = gate_kind("magcache")
    calibration = kind.calibration_of(get_variant("demo"))
    assert calibration is not None
    params = kind.params(calibration, 0.12)
    squeezed = [v.decision for v in simulate_magcache(params, 17)]
    cut = [v.decision for v in simulate_magcache(kind.for_steps_run(params, 28, 11), 17)]
    assert cut != squeezed


def test_nothing_changes_without_steps_left_out_or_with_one_step_run() -> None:
    assert PARAMS.for_steps_run(20, 0) is PARAMS
    assert PARAMS.for_steps_run(20, 19) is PARAMS


@pytest.mark.parametrize("name", [n for n in GATE_KINDS if n != "magcache"])
def test_the_kinds_that_read_only_the_steps_run_keep_their_numbers(name: str) -> None:
    kind = gate_kind(name)
    calibration = kind.calibration_of(get_variant("demo"))
    assert calibration is not None
    params = kind.params(calibration, 0.1)
    assert kind.for_steps_run(params, 28, 11) is params
