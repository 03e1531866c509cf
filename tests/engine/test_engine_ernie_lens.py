"""The engine end to end on ERNIE-Image (base with CFG, Turbo) and Lens Turbo, through tiny
random-weight shells of mflux's own pipelines: the same oracles as test_engine_families.py
(threshold 0 bit-exact on mflux's eager path, scripted engagement, resume bit-exact), run by
its own checks on these variants until the family kit's shell cases carry them there.

ERNIE-Image's predict is compiled where mflux compiles it: threshold 0 runs mflux's own compiled
predict and the observing vanilla pass the split-compiled step; on these shells the two measured
max |Δ| 0 (float32, seed 1, 6 steps, both variants), bound as FLUX.2's (1e-5). Lens is never
compiled by mflux.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, ernie_image, lens
from tests.engine import test_engine_families as generic

SIZE = (64, 64)  # a 4 × 4 latent grid: 16 image tokens beside 16 caption tokens
FAMILIES: dict[str, Callable[[], Any]] = {
    "ernie-image": lambda: ernie_image.shell("ernie-image"),  # 50 steps, CFG at 4
    "ernie-image-turbo": lambda: ernie_image.shell("ernie-image-turbo"),
    "lens-turbo": lambda: lens.shell("lens-turbo"),
}
COMPILED_MAX_ABS_DIFF = 1e-5


@pytest.fixture(scope="module", params=list(FAMILIES))
def shell(request: pytest.FixtureRequest) -> Iterator[generic.Shell]:
    variant_id: str = request.param
    with common.use_precision(mx.float32):
        pipeline = FAMILIES[variant_id]()
    yield generic.Shell(variant_id, pipeline, 6, SIZE)


def test_threshold_zero_matches_vanilla_bit_for_bit(
    shell: generic.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    generic.test_threshold_zero_matches_vanilla_bit_for_bit(shell, monkeypatch)


@pytest.mark.parametrize("shell", ["ernie-image", "ernie-image-turbo"], indirect=True)
def test_threshold_zero_matches_vanilla_within_tolerance_on_the_compiled_path(
    shell: generic.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))  # compiled
    report = generic._run(shell, 0.0, monkeypatch)
    assert report["skipped"] == 0
    assert report["max_abs_diff"] <= COMPILED_MAX_ABS_DIFF


def test_scripted_gate_engages(shell: generic.Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    generic.test_scripted_gate_engages_on_every_family(shell, monkeypatch)


def test_resume_from_vanilla_is_bit_exact(
    shell: generic.Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    generic.test_resume_from_vanilla_is_bit_exact_on_every_family(shell, monkeypatch)
