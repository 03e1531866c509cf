"""LoRA on the random-weight shells through mflux's own loader and key mapping
(``app.adapters.lora``): it lands where mflux maps it, and it changes what the model draws.

Oracles: the baked weight is the base weight plus scale × B·A to float32 rounding of one addition
(measured 6e-8 on these shells; bound 1e-6); two builds of a shell without a LoRA draw the same
latents bit for bit, so any difference under the LoRA is the LoRA's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

from app.adapters import common, lora
from app.adapters.flux2 import shell as flux2_shell
from app.adapters.flux3 import shell as flux3_shell
from app.adapters.krea2 import shell as krea2_shell
from app.adapters.qwen_image21 import shell as qwen21_shell
from app.adapters.z_image import shell as z_image_shell
from tests.fakes import lora as fake_lora
from tests.fakes import probes

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py

CFG = {"num_inference_steps": 4, "height": 128, "width": 128, "guidance": 4.0}
SCALE = 0.7
# Max |Δ| of the final latents (values of order 1) that the LoRA must cause at least. Measured with
# these settings (scale 0.7, the fixture's LoRA, 4 steps): FLUX.2 0.074, Z-Image 0.71, FLUX.3
# base 0.077, Qwen-Image 2.1 0.017, Krea 2 0.048; the floor is a tenth of FLUX.2's, 2.5× under the
# smallest and far above 0 (a build without the LoRA differs by exactly 0).
LORA_EFFECT_FLOOR = 0.007
BAKE_TOLERANCE = 1e-6

FAMILIES: list[tuple[str, Callable[[], Any], Mapping[str, str]]] = [
    ("flux2", lambda: flux2_shell("flux2-klein-base-4b"), fake_lora.FLUX2_TARGETS),
    ("z-image", lambda: z_image_shell("z-image"), fake_lora.Z_IMAGE_TARGETS),
    ("flux3", lambda: flux3_shell("flux3-image-klein-base"), fake_lora.FLUX3_TARGETS),
    ("qwen-image-2.1", lambda: qwen21_shell("qwen-image-2.1"), fake_lora.QWEN21_TARGETS),
    ("krea-2", lambda: krea2_shell("krea-2"), fake_lora.KREA2_TARGETS),
]


@pytest.mark.parametrize(("family", "build", "targets"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_lora_for_the_shells_keys_is_baked_where_mflux_maps_it_and_changes_the_output(
    family: str, build: Callable[[], Any], targets: Mapping[str, str], tmp_path: Path
) -> None:
    with common.use_precision(mx.float32):
        plain = build()
        plain_latents = probes.generate_latents(plain, **CFG)
        again = probes.generate_latents(build(), **CFG)
        assert mx.array_equal(plain_latents, again).item()  # the build itself is deterministic

        patched = build()
        before = {
            p: mx.array(fake_lora.module_at(patched.transformer, p).weight)
            for p in targets.values()
        }
        updates = fake_lora.write_lora(tmp_path / "style.safetensors", patched.transformer, targets)
        lora.apply_loras(patched, [str(tmp_path / "style.safetensors")], [SCALE])
        for module_path, update in updates.items():
            weight = fake_lora.module_at(patched.transformer, module_path).weight
            error = float(mx.max(mx.abs(weight - before[module_path] - SCALE * update)))
            assert error <= BAKE_TOLERANCE, module_path
        assert patched.lora_scales == [SCALE]  # recorded on the pipeline, as mflux does
        lora_latents = probes.generate_latents(patched, **CFG)
    assert float(mx.max(mx.abs(lora_latents - plain_latents))) > LORA_EFFECT_FLOOR


def test_a_file_that_names_no_layer_of_the_model_is_refused(tmp_path: Path) -> None:
    with common.use_precision(mx.float32):
        pipeline = flux2_shell("flux2-klein-base-4b")
        path = fake_lora.write_unrelated_safetensors(tmp_path / "other.safetensors")
        refused = r"No LoRA layers were applied from other\.safetensors"
        with pytest.raises(ValueError, match=refused):
            lora.apply_loras(pipeline, [str(path)], [1.0])


def test_no_lora_leaves_the_pipeline_alone() -> None:
    with common.use_precision(mx.float32):
        pipeline = flux2_shell("flux2-klein-base-4b")
        lora.apply_loras(pipeline, [], [])
    assert pipeline.lora_paths is None and pipeline.lora_scales is None
