"""The vanilla (observing) pass's residual spans the body a skip stands in for, in every family
with a shell: on tiny float32 random-weight shells running mflux's real ``generate_image``.

The oracle is behaviour, not any adapter's inside: a gate that skips reuses a residual by adding it
to the body's input (``LiveGate.reuse`` / ``LiveGate.residual``, whatever path the adapter takes).
So a skip at step ``k`` given the residual the observer recorded at the *same* step of the vanilla
pass — the step's input is vanilla's up to that skip — must reproduce vanilla's output of that step:
``body_in + (body_out − body_in)``. A residual over any other span (block 0's output, say, instead
of the stack's input) adds the wrong amount and the run leaves vanilla. MagCache's calibration
reads these residuals (its recorder's ``ratio``): its ratios from the recorder must equal the ratio
computed directly from the residuals so checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, install_gate
from app.adapters.shells import case_shell
from app.families import Family, ShellCase, ShellTest, shell_cases
from app.gate import Decision, TeaCacheGate, TeaCacheParams
from app.gate.live import VanillaRecorder, magnitude_ratio
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
# A zero polynomial prices every change at 0: skip wherever the guards allow (one in a row).
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
# Relative L1 of the final latents, replanted run against vanilla. ``x + (out − x)`` differs from
# ``out`` by float32 rounding only, carried through the later steps: measured at most 6.4e-7 over
# these cases (eager and compiled, 64×64). A residual over block 0's output instead of the stack's
# input (Qwen-Image 2.1's and Krea 2's observer, put in by hand) measured 5.7e-3 and 6.0e-3.
TOLERANCE = 1e-5


# One case per family with a shell (``ShellTest.residual``), with CFG where the family has it
# (each branch its residual), at 64² (fewer tokens, the same engagement: every case skips).
CASES = shell_cases(ShellTest.residual)
SIZE = 64

pytestmark = pytest.mark.usefixtures("float32")  # tests/adapters/conftest.py


class Observer(VanillaRecorder):
    """The vanilla pass's recorder, keeping every residual it was handed by step and branch
    (through ``keep_residual``, which every adapter's store reaches)."""

    def __init__(self) -> None:
        super().__init__(probes.recorder(calibrating=True).recorders)  # type: ignore[attr-defined]
        self.kept: dict[tuple[int, str], mx.array] = {}

    def keep_residual(self, residual: mx.array, branch: str = "cond") -> None:
        super().keep_residual(residual, branch)
        self.kept[(self.step_index, branch)] = residual


class Replanted(TeaCacheGate):
    """Skips where ``ALTERNATE`` allows, and on a skip adds the residual the observer recorded at
    that same step instead of the one it cached itself."""

    def __init__(self, recorded: dict[tuple[int, str], mx.array]) -> None:
        super().__init__(ALTERNATE)
        self.recorded = recorded
        self.replanted: set[tuple[int, str]] = set()

    def residual(self, branch: str = "cond") -> mx.array:
        self.replanted.add((self.step_index, branch))
        return self.recorded[(self.step_index, branch)]


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Family, ShellCase], Any]]:
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
def test_observed_residual_is_the_bodys_output_minus_its_input(
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
    kwargs = case.generate_kwargs(size=SIZE)
    observer = Observer()
    with install_gate(pipeline, observer):
        vanilla = probes.generate_latents(pipeline, **kwargs)
    replanted = Replanted(observer.kept)
    with install_gate(pipeline, replanted):
        gated = probes.generate_latents(pipeline, **kwargs)

    # Engagement: the run skipped, and every skip added a residual the observer recorded.
    skipped = [e.index for e in replanted.events if e.decision is Decision.skipped]
    assert skipped and {step for step, _ in replanted.replanted} == set(skipped)
    branches = {branch for _, branch in observer.kept}
    assert {(step, branch) for step in skipped for branch in branches} == replanted.replanted
    assert _rel_l1(gated, vanilla) <= TOLERANCE

    # MagCache's calibration measure, from the recorder and directly from those residuals.
    ratios = [probes.figure(e, "magcache", "ratio") for e in observer.events]
    assert ratios[0] is None and len(ratios) == case.steps
    for step in range(1, case.steps):
        direct = magnitude_ratio(observer.kept[(step, "cond")], observer.kept[(step - 1, "cond")])
        assert ratios[step] == direct.item()  # one function on the same arrays
