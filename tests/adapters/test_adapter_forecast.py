"""The forecast fill on every family with a shell, eager and compiled, under CFG: on tiny float32
random-weight shells running mflux's real ``generate_image``, over the kit's residual cases
(``ShellTest.residual``: one a family, with CFG where it has it).

The oracle is behaviour, not any adapter's inside: whatever path the family takes, a skipped step
adds what the fill computes from the residuals the gate kept at the computed steps before it and
the schedule's positions (``LiveGate.reuse`` / ``LiveGate.residual``), each CFG branch from its
own; the positions are the sigmas the family's loop steps on (decreasing from about 1, not the
evenly spaced fallback); and forecasting changes the run against reuse by more than float32
rounding (the fill really reached the latents). The gate's record says which steps forecast.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate
from app.adapters.shells import case_shell
from app.families import Family, ShellCase
from app.gate import Decision, TeaCacheGate
from app.gate.fill import REACH, REUSE, Fill, Forecast, even_positions
from tests.adapters.test_adapter_observed_residual import ALTERNATE, CASES, SIZE
from tests.fakes import probes

FORECAST = Forecast(order=1, horizon=1)  # unguarded: every skip after two computed steps forecasts
# Skipping every other step (``ALTERNATE``) from step 1 on: the first skip has one computed step
# behind it (reused), the second and later ones two (forecast). Six steps give two forecasts.
STEPS = 6
# Relative L1 of the final latents, forecast against reuse on the same pattern. Forecasting moves
# the run by far more than float32 rounding (the observed-residual test's 6.4e-7): a floor well
# under every family's measured effect.
SMALLEST_FILL_EFFECT = 1e-5

pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


class Watching(TeaCacheGate):
    """``ALTERNATE`` with ``fill``, keeping what it was handed and what it added, by step and
    branch, and the positions ``begin`` received."""

    def __init__(self, fill: Fill) -> None:
        super().__init__(ALTERNATE)
        self.fill = fill
        self.kept: dict[tuple[int, str], mx.array] = {}
        self.added: dict[tuple[int, str], mx.array] = {}
        self.positions: tuple[float, ...] = ()

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self.positions = tuple(positions or ())

    def keep_residual(self, residual: mx.array, branch: str = "cond") -> None:
        super().keep_residual(residual, branch)
        self.kept[(self.step_index, branch)] = residual

    def residual(self, branch: str = "cond") -> mx.array:
        added = super().residual(branch)
        self.added[(self.step_index, branch)] = added
        return added


def expected(gate: Watching, step: int, branch: str) -> mx.array:
    """The first-order forecast one step past the last computed step, from the two before it,
    written out here apart from ``app.gate.fill``."""
    computed = sorted(s for s, b in gate.kept if b == branch and s < step)
    if len(computed) < 2:
        return gate.kept[(computed[-1], branch)]
    k1, k2 = computed[-2:]
    r1, r2 = gate.kept[(k1, branch)], gate.kept[(k2, branch)]
    s = gate.positions
    return r2 + ((s[k2 + 1] - s[k2]) / (s[k2] - s[k1])) * (r2 - r1)


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Family, ShellCase], Any]]:
    """Each case's shell, built once for the module (as the observed-residual test builds it)."""
    built: dict[str, Any] = {}

    def get(family: Family, case: ShellCase) -> Any:
        if case.name not in built:
            with common.use_precision(mx.float32):
                built[case.name] = case_shell(family, case)
        return built[case.name]

    yield get
    built.clear()


def _rel_l1(a: mx.array, b: mx.array) -> float:
    ratio: float = (mx.mean(mx.abs(a - b)) / mx.mean(mx.abs(b))).tolist()  # type: ignore[assignment]
    return ratio


@pytest.mark.parametrize("path", ["eager", "compiled"])
@pytest.mark.parametrize(("family", "case"), CASES, ids=[family.id for family, _ in CASES])
def test_a_skipped_step_adds_the_forecast_on_every_family(
    shell: Callable[[Family, ShellCase], Any],
    family: Family,
    case: ShellCase,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: path == "eager"))
    pipeline = shell(family, case)
    for name, value in case.transformer_attrs:
        monkeypatch.setattr(pipeline.transformer, name, value)
    kwargs = case.generate_kwargs(size=SIZE, steps=STEPS)
    reusing = Watching(REUSE)
    with install_gate(pipeline, reusing):
        reused = probes.generate_latents(pipeline, **kwargs)
    gate = Watching(FORECAST)
    with install_gate(pipeline, gate):
        forecast = probes.generate_latents(pipeline, **kwargs)

    # Engagement: the same skips with either fill, and the later ones forecast.
    assert gate.pattern == reusing.pattern == "FSCSCF"
    skipped = [e.index for e in gate.events if e.decision is Decision.skipped]
    assert [gate.events[i].fill[REACH] for i in skipped] == [0.0, 1.0]
    branches = {branch for _, branch in gate.kept}
    assert len(branches) == (2 if case.cfg else 1)  # under CFG the unconditional branch too
    assert {(step, branch) for step in skipped for branch in branches} == set(gate.added)
    # The positions are the loop's sigmas: one per step, decreasing from about 1.
    s = gate.positions
    assert len(s) == STEPS and s != even_positions(STEPS)
    assert 0.0 <= s[-1] < s[0] <= 1.0 + 1e-6 and all(a > b for a, b in itertools.pairwise(s))
    for step in skipped:
        for branch in branches:  # each branch from its own residuals (two under CFG)
            want = np.array(expected(gate, step, branch))
            assert np.allclose(np.array(gate.added[(step, branch)]), want, rtol=1e-5, atol=1e-6)
    # The fill reached the latents; and the history was released with the residuals.
    assert _rel_l1(forecast, reused) > SMALLEST_FILL_EFFECT
    assert gate.cached_branches == ()
