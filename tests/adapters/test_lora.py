"""LoRA on the random-weight shells through mflux's own loader and key mapping
(``app.adapters.lora``): it lands where mflux maps it, and it changes what the model draws.

Oracles: the baked weight is the base weight plus scale × B·A to float32 rounding of one addition
(measured 6e-8 on these shells; bound 1e-6); two builds of a shell without a LoRA draw the same
latents bit for bit, so any difference under the LoRA is the LoRA's.
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import pytest

from app.adapters import common, lora
from app.adapters.shells import case_shell, random_weight_shell
from app.families import Family, ShellCase, ShellTest, get_family, shell_cases
from tests.fakes import lora as fake_lora
from tests.fakes import probes

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py

STEPS = 4
SCALE = 0.7
# Max |Δ| of the final latents (values of order 1) that the LoRA must cause at least. Measured with
# these settings (scale 0.7, the fixture's LoRA on the three targets ``lora_targets`` reads off
# each family's mflux mapping, 4 steps, each family's LoRA case): FLUX.2 0.027, FLUX.3 base 0.027,
# Z-Image 0.89, Qwen-Image 2.1 0.018, Krea 2 0.044; the floor is 2.6× under the smallest and far
# above 0 (a build without the LoRA differs by exactly 0).
LORA_EFFECT_FLOOR = 0.007
BAKE_TOLERANCE = 1e-6

# Every family's LoRA case (``ShellTest.lora``): the model, its guidance and its seed.
CASES = shell_cases(ShellTest.lora)


@pytest.mark.parametrize(("family", "case"), CASES, ids=[family.id for family, _ in CASES])
def test_a_lora_for_the_shells_keys_is_baked_where_mflux_maps_it_and_changes_the_output(
    family: Family, case: ShellCase, tmp_path: Path
) -> None:
    kwargs = case.generate_kwargs(steps=STEPS)
    with common.use_precision(mx.float32):
        plain = case_shell(family, case)
        plain_latents = probes.generate_latents(plain, **kwargs)
        again = probes.generate_latents(case_shell(family, case), **kwargs)
        assert mx.array_equal(plain_latents, again).item()  # the build itself is deterministic

        patched = case_shell(family, case)
        targets = fake_lora.lora_targets(family, patched.transformer)
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
        lora_latents = probes.generate_latents(patched, **kwargs)
    assert float(mx.max(mx.abs(lora_latents - plain_latents))) > LORA_EFFECT_FLOOR


def test_a_file_that_names_no_layer_of_the_model_is_refused(tmp_path: Path) -> None:
    with common.use_precision(mx.float32):
        pipeline = random_weight_shell(get_family("flux2"), "flux2-klein-base-4b")
        path = fake_lora.write_unrelated_safetensors(tmp_path / "other.safetensors")
        refused = r"No LoRA layers were applied from other\.safetensors"
        with pytest.raises(ValueError, match=refused):
            lora.apply_loras(pipeline, [str(path)], [1.0])


def test_no_lora_leaves_the_pipeline_alone() -> None:
    with common.use_precision(mx.float32):
        pipeline = random_weight_shell(get_family("flux2"), "flux2-klein-base-4b")
        lora.apply_loras(pipeline, [], [])
    assert pipeline.lora_paths is None and pipeline.lora_scales is None
