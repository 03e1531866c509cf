"""Strength on every family mflux starts from a picture (``Family.img2img``), on tiny random-weight
shells running mflux's real ``generate_image`` with a picture: the loop starts at the strength's
step (``steps_left_out``), the gate counts only the steps that run, threshold 0 stays bit-exact to
vanilla from the same picture, and forced skips engage within the steps that run, each reusing
the residual of the last computed step.

Vanilla is mflux's eager predict (``is_m1_or_m2`` patched True; Qwen-Image 2.1 compiles on every
machine, vanilla included), as in test_adapter_parity.py. The shells' stub VAE encodes the
picture into the family's latent shape (``app.adapters.shells.StubVAE.encode``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from PIL import Image

from app.adapters import common, install_gate, shells
from app.families import FAMILIES, get_family
from app.gate import Decision, TeaCacheParams
from app.variants.schedule import image_strength, steps_left_out
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
# A constant predicted change of 0.01 a step against threshold 0.05: skips four in a row after
# the first step, then computes (the last step always computes).
FORCED = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.01), rel_l1_thresh=0.05)


@dataclass(frozen=True)
class Case:
    family: str
    model_name: str
    steps: int
    strength: float
    guidance: float | None

    @property
    def active(self) -> int:
        return self.steps - steps_left_out(self.steps, self.strength)


# One model per img2img family (FLUX.1's shell is 3072 wide even when tiny: fewer steps).
CASES = {
    "flux1-dev": Case("flux1", "dev", 4, 0.8, 3.5),
    "flux2-cfg": Case("flux2", "flux2-klein-base-4b", 8, 0.6, 4.0),
    "z-image": Case("z-image", "z-image", 8, 0.6, 4.0),
    "qwen-image": Case("qwen-image", "qwen-image", 8, 0.6, 4.0),
    "qwen-image-2.1": Case("qwen-image-2.1", "qwen-image-2.1", 8, 0.6, None),
    "krea-2": Case("krea-2", "krea-2", 8, 0.6, 1.0),
}

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


def test_every_family_that_starts_from_a_picture_has_a_case() -> None:
    takers = {f.id for f in FAMILIES.values() if f.img2img and f.random_weights is not None}
    assert {case.family for case in CASES.values()} == takers


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(5)
    path = tmp_path_factory.mktemp("img2img") / "start.png"
    Image.fromarray(rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def shell() -> Iterator[Callable[[Case], Any]]:
    built: dict[str, Any] = {}

    def get(case: Case) -> Any:
        if case.family not in built:
            with common.use_precision(mx.float32):
                built[case.family] = shells.random_weight_shell(
                    get_family(case.family), case.model_name
                )
        return built[case.family]

    yield get
    built.clear()


def _kwargs(case: Case, picture: Path | None) -> dict[str, Any]:
    run: dict[str, Any] = {"num_inference_steps": case.steps, "height": 128, "width": 128}
    if case.guidance is not None:
        run["guidance"] = case.guidance
    if picture is not None:
        run["image_path"] = str(picture)
        run["image_strength"] = image_strength(case.strength)
    return run


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_threshold_zero_from_a_picture_is_bit_exact_to_vanilla(
    shell: Callable[[Case], Any], case: Case, picture: Path
) -> None:
    pipeline = shell(case)
    kwargs = _kwargs(case, picture)
    vanilla = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        gated = probes.generate_latents(pipeline, **kwargs)
    from_noise = probes.generate_latents(pipeline, **_kwargs(case, None))

    assert mx.array_equal(gated, vanilla).item()
    # the picture took part: the same seed from noise ends elsewhere
    assert not mx.array_equal(vanilla, from_noise).item()
    # mflux's loop ran only the steps after the strength's: the gate saw exactly those
    assert 0 < case.active < case.steps
    assert off.num_steps == case.active
    assert off.pattern == "C" * case.active and off.reused == {}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_forced_skips_engage_within_the_steps_that_run(
    shell: Callable[[Case], Any], case: Case, picture: Path
) -> None:
    pipeline = shell(case)
    kwargs = _kwargs(case, picture)
    vanilla = probes.generate_latents(pipeline, **kwargs)
    gate = probes.RecordingGate(FORCED)
    with install_gate(pipeline, gate):
        gated = probes.generate_latents(pipeline, **kwargs)

    pattern = gate.pattern
    assert len(pattern) == case.active
    assert pattern[0] in "CF" and pattern[-1] in "CF" and gate.skipped > 0
    assert not mx.array_equal(gated, vanilla).item()  # the skips changed the result
    # each skipped step reused the residual its last computed step stored, branch by branch
    for (index, branch), (_, residual, _) in gate.reused.items():
        assert gate.events[index].decision is Decision.skipped
        seed = max(i for i, e in enumerate(gate.events[:index]) if e.decision.computes)
        assert mx.array_equal(residual, gate.stored[(seed, branch)][2]).item()
    assert {i for i, _ in gate.reused} == {
        i for i, e in enumerate(gate.events) if e.decision is Decision.skipped
    }
