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
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from PIL import Image

from app.adapters import common, install_gate
from app.adapters.shells import case_shell
from app.families import Family, ShellCase, ShellTest, shell_cases
from app.gate import Decision, TeaCacheParams
from app.variants.schedule import image_strength, steps_left_out
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
# A constant predicted change of 0.01 a step against threshold 0.05: skips four in a row after
# the first step, then computes (the last step always computes).
FORCED = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 0.01), rel_l1_thresh=0.05)


# Every family's run from a picture (``ShellCase``, ``ShellTest.img2img``; the registry contract
# wants one exactly where ``Family.img2img``): the case's model, guidance and prompt, over
# ``STEPS`` at 128², the first ``steps_left_out`` of them never run.
CASES = shell_cases(ShellTest.img2img)
STEPS, STRENGTH, SIZE = 8, 0.6, 128
ACTIVE = STEPS - steps_left_out(STEPS, STRENGTH)

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(5)
    path = tmp_path_factory.mktemp("img2img") / "start.png"
    Image.fromarray(rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)).save(path)
    return path


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


def _kwargs(case: ShellCase, picture: Path | None) -> dict[str, Any]:
    run = case.generate_kwargs(size=SIZE, steps=STEPS)
    if picture is not None:
        run["image_path"] = str(picture)
        run["image_strength"] = image_strength(STRENGTH)
    return run


@pytest.mark.parametrize(("family", "case"), CASES, ids=[family.id for family, _ in CASES])
def test_threshold_zero_from_a_picture_is_bit_exact_to_vanilla(
    shell: Callable[[Family, ShellCase], Any], family: Family, case: ShellCase, picture: Path
) -> None:
    pipeline = shell(family, case)
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
    assert 0 < ACTIVE < STEPS
    assert off.num_steps == ACTIVE
    assert off.pattern == "C" * ACTIVE and off.reused == {}


@pytest.mark.parametrize(("family", "case"), CASES, ids=[family.id for family, _ in CASES])
def test_forced_skips_engage_within_the_steps_that_run(
    shell: Callable[[Family, ShellCase], Any], family: Family, case: ShellCase, picture: Path
) -> None:
    pipeline = shell(family, case)
    kwargs = _kwargs(case, picture)
    vanilla = probes.generate_latents(pipeline, **kwargs)
    gate = probes.RecordingGate(FORCED)
    with install_gate(pipeline, gate):
        gated = probes.generate_latents(pipeline, **kwargs)

    pattern = gate.pattern
    assert len(pattern) == ACTIVE
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
