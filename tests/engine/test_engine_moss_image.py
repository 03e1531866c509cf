"""The engine end to end on MOSS-Image's tiny shell: the generic family tests' bodies
(tests/engine/test_engine_families.py) on MOSS-Image SFT with mflux's CFG (the unconditional
call on the empty prompt, layer 22 skipped), until the family kit lets that file read a family's
cases. mflux never compiles MOSS-Image: its eager path is the only one."""

from __future__ import annotations

from collections.abc import Iterator

import mlx.core as mx
import pytest

import tests.engine.test_engine_families as families
from app.adapters import common
from app.adapters.moss_image import shell as moss_shell


@pytest.fixture(scope="module")
def shell() -> Iterator[families.Shell]:
    with common.use_precision(mx.float32):
        pipeline = moss_shell("moss-image-sft")
    yield families.Shell("moss-image-sft", pipeline, 6, (64, 64))


def test_threshold_zero_matches_vanilla_bit_for_bit(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    families.test_threshold_zero_matches_vanilla_bit_for_bit(shell, monkeypatch)


def test_scripted_gate_engages(shell: families.Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    families.test_scripted_gate_engages_on_every_family(shell, monkeypatch)


def test_resume_from_vanilla_is_bit_exact(
    shell: families.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    families.test_resume_from_vanilla_is_bit_exact_on_every_family(shell, monkeypatch)
