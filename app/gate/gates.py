"""The two gates behind one decision protocol: TeaCache (a polynomial of the input signal's change)
and MagCache (a table of the residual's magnitude ratios). Plain Python, no MLX.

Both parameter types carry ``gate`` (their name), ``threshold``, ``enabled``, ``with_threshold``
and ``eligible_steps``; the helpers here dispatch the rest (simulation, engagement) on the type, so
the engine, the notices and the reports handle either without knowing which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from app.gate.decision import GateParams, Verdict
from app.gate.magcache import MagCacheParams, onset, simulate_magcache
from app.gate.simulator import Engagement, engagement, simulate

AnyGateParams = GateParams | MagCacheParams

TEACACHE: Final = "teacache"
MAGCACHE: Final = "magcache"
GATES: Final = (TEACACHE, MAGCACHE)

GATE_LABELS: Final = {TEACACHE: "TeaCache", MAGCACHE: "MagCache"}

# What the threshold means, in plain words, for the window's hint line and the CLI's help.
THRESHOLD_MEANINGS: Final = {
    TEACACHE: (
        "TeaCache: how much predicted change in the model's output to let pile up before a "
        "step is computed again"
    ),
    MAGCACHE: (
        "MagCache: how much accumulated magnitude drift to tolerate before a step is computed "
        "again (the drift comes from a table measured once on vanilla runs)"
    ),
}


class UnknownGateError(ValueError):
    def __init__(self, name: object) -> None:
        super().__init__(f"unknown gate {name!r}; choose one of: {', '.join(GATES)}")


def check_gate(name: object) -> str:
    """The gate's name, or ``UnknownGateError`` with one sentence."""
    if name not in GATES:
        raise UnknownGateError(name)
    return str(name)


def simulate_gate(params: AnyGateParams, trace: Sequence[float | None]) -> list[Verdict]:
    """The gate's verdicts on a vanilla run of ``len(trace)`` steps. For TeaCache ``trace`` is the
    signal's rel-L1 (exact up to the first skip); MagCache reads only the step count (exact)."""
    if isinstance(params, MagCacheParams):
        return simulate_magcache(params, len(trace))
    return simulate(params, trace)


def engagement_of(params: AnyGateParams, trace: Sequence[float | None]) -> Engagement:
    """Where skipping begins: TeaCache on this run's trace, MagCache on its table."""
    if isinstance(params, MagCacheParams):
        eligible, threshold, step = onset(params, len(trace))
        return Engagement(eligible, threshold, step)
    return engagement(params.with_threshold(max(params.threshold, 0.01)), trace)
