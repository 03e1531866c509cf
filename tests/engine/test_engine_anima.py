"""Anima through the engine on mflux's compiled path: threshold 0 runs mflux's compiled predict,
the observing vanilla pass the split-compiled step (the generic test's body,
tests/engine/test_engine_families.py, whose tolerances are keyed by variant). Measured max |Δ|
0.0 on these shells (seed 1, 6 steps, float32, Turbo and Base with CFG); bound as FLUX.2's (1e-5).
The eager path, engagement and resume are the generic tests' on Anima's shell cases."""

from __future__ import annotations

from collections.abc import Iterator

import mlx.core as mx
import pytest

import tests.engine.test_engine_families as families
from app.adapters import common
from app.adapters.shells import case_shell
from app.families import get_family

COMPILED_MAX_ABS_DIFF = 1e-5
ANIMA = [(family, case) for family, case in families.CASES if family is get_family("anima")]


@pytest.fixture(scope="module", params=ANIMA, ids=[case.name for _, case in ANIMA])
def shell(request: pytest.FixtureRequest) -> Iterator[families.Shell]:
    family, case = request.param
    variant = families.case_variant(family, case)
    with common.use_precision(mx.float32):
        pipeline = case_shell(family, case)
    yield families.Shell(variant.id, pipeline, case.steps, (case.size, case.size), case)


def test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(families.COMPILED_MAX_ABS_DIFF, shell.variant_id, COMPILED_MAX_ABS_DIFF)
    families.test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
        shell, monkeypatch
    )
