"""The engine under a LoRA, on tiny random-weight shells (FLUX.2 and Z-Image).

The test loader builds a shell and applies the request's LoRAs with mflux's loader
(``app.adapters.lora``), as mflux's constructor does for a real model (``app.engine.loader``
passes them there; tests/engine/test_loader.py). Both passes run on that one pipeline, so the
comparison stays paired. Oracles: threshold 0 is bit-exact with vanilla under the LoRA on mflux's
eager path (one numerical path); a scripted polynomial engages the gate (skips > 0) under it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mflux.utils.apple_silicon import AppleSiliconUtil

from app import variants
from app.adapters import common, lora
from app.adapters.shells import DEFAULT_PROMPT, random_weight_shell
from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import GenerationRequest, make_request
from tests.fakes import lora as fake_lora

STEPS = 6
# Two predict-factory families' CFG variants; every family's LoRA on its shell:
# tests/adapters/test_lora.py
VARIANTS = ["flux2-klein-base-4b", "z-image"]


def _builder(variant_id: str) -> Callable[[], Any]:
    variant = variants.get_variant(variant_id)
    return lambda: random_weight_shell(variant.family, variant.mflux_name)


class ShellLoader:
    """Builds a fresh shell per load and applies the request's LoRAs; counts the loads."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.loaded: list[tuple[object, ...]] = []

    def __call__(self, variant: Any, request: GenerationRequest, *_: Any) -> Any:
        pipeline = self.build()
        loras = request.loras
        lora.apply_loras(pipeline, [s.path for s in loras], [s.scale for s in loras])
        self.loaded.append(loras)
        return pipeline


def _scripted(variant_id: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The variant with a constant prediction of 0.01 per step: at 0.05 the gate must skip."""
    scripted = replace(
        variants.get_variant(variant_id),
        id=f"test-lora-{variant_id}",
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.01),
        calibrated_range=None,
        distilled=False,
    )
    monkeypatch.setitem(variants.VARIANTS, scripted.id, scripted)
    return scripted.id


def _run(engine: Engine, request: GenerationRequest) -> dict[str, Any]:
    seen: list[Any] = []
    engine.run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
    return seen[-1].report.to_json()


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("variant_id", VARIANTS)
def test_under_a_lora_threshold_zero_is_vanilla_bit_for_bit_and_the_gate_engages(
    variant_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = _scripted(variant_id, monkeypatch)
    build = _builder(variant_id)
    with common.use_precision(mx.float32):
        path = tmp_path / "style.safetensors"
        transformer = build().transformer
        targets = fake_lora.lora_targets(variants.get_variant(variant_id).family, transformer)
        fake_lora.write_lora(path, transformer, targets)
        loader = ShellLoader(build)
        engine = Engine(loader=loader)

        def request(threshold: float, loras: list[tuple[str, float]]) -> GenerationRequest:
            return make_request(
                scripted, DEFAULT_PROMPT, seed=1, steps=STEPS, threshold=threshold,
                size=(128, 128), loras=loras, gate="teacache",  # the scripted polynomial's gate
            )  # fmt: skip

        off = _run(engine, request(0.0, [(str(path), 0.8)]))
        gated = _run(engine, request(0.05, [(str(path), 0.8)]))
        plain = _run(engine, request(0.0, []))
    assert off["loras"] == [{"path": str(path.resolve()), "scale": 0.8}]
    assert off["skipped"] == 0 and off["max_abs_diff"] == 0.0
    assert off["gated_latents_sha256"] == off["vanilla_latents_sha256"]
    # the engagement under the LoRA: the scripted pattern, reusing the LoRA's vanilla pass
    assert gated["pattern"] == "F" + "S" * (STEPS - 2) + "F" and gated["skipped"] == STEPS - 2
    assert (
        gated["vanilla_cached"] and gated["vanilla_latents_sha256"] == off["vanilla_latents_sha256"]
    )
    assert gated["max_abs_diff"] > 0.0
    # without the LoRA: another pipeline (loaded again), another vanilla, another image
    assert plain["loras"] == [] and not plain["vanilla_cached"]
    assert plain["vanilla_latents_sha256"] != off["vanilla_latents_sha256"]
    assert [len(loaded) for loaded in loader.loaded] == [1, 0]  # the LoRA pipeline built once


def test_the_lora_is_part_of_the_vanilla_key(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    fake_lora.write_unrelated_safetensors(path)
    plain = make_request("flux2-klein-base-4b", "a cat")
    with_lora = make_request("flux2-klein-base-4b", "a cat", loras=[(str(path), 1.0)])
    stronger = make_request("flux2-klein-base-4b", "a cat", loras=[(str(path), 1.5)])
    keys = {plain.vanilla_key(), with_lora.vanilla_key(), stronger.vanilla_key()}
    assert len(keys) == 3
    assert with_lora.with_threshold(0.5).vanilla_key() == with_lora.vanilla_key()
