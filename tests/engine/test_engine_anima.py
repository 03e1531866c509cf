"""The engine end to end on Anima's tiny shells: the generic family tests' bodies
(tests/engine/test_engine_families.py) on Anima Turbo (no CFG, ER-SDE's seeded noise) and Anima
Base (CFG on the empty prompt), until the family kit lets that file read a family's cases.

Where mflux compiles Anima's predict, threshold 0 runs that compiled predict and the observing
vanilla pass the split-compiled step: measured max |Δ| 0.0 on these shells (seed 1, 6 steps,
float32), bound as FLUX.2's (1e-5)."""

from __future__ import annotations

from collections.abc import Iterator

import mlx.core as mx
import pytest

import tests.engine.test_engine_families as families
from app.adapters import common
from app.adapters.anima import shell as anima_shell

CASES = {"anima-turbo": 6, "anima-base": 6}
COMPILED_MAX_ABS_DIFF = 1e-5


@pytest.fixture(scope="module", params=list(CASES))
def shell(request: pytest.FixtureRequest) -> Iterator[families.Shell]:
    variant_id: str = request.param
    with common.use_precision(mx.float32):
        pipeline = anima_shell(variant_id)
    yield families.Shell(variant_id, pipeline, CASES[variant_id], (64, 64))


def test_threshold_zero_matches_vanilla_bit_for_bit(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    families.test_threshold_zero_matches_vanilla_bit_for_bit(shell, monkeypatch)


def test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(families.COMPILED_MAX_ABS_DIFF, shell.variant_id, COMPILED_MAX_ABS_DIFF)
    families.test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
        shell, monkeypatch
    )


def test_scripted_gate_engages(shell: families.Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    families.test_scripted_gate_engages_on_every_family(shell, monkeypatch)


def test_resume_from_vanilla_is_bit_exact(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    families.test_resume_from_vanilla_is_bit_exact_on_every_family(shell, monkeypatch)
