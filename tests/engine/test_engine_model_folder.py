"""A 4-bit model folder end to end through the engine: written by mflux's ``ModelSaver`` from a
tiny quantized FLUX.2 shell, read back by mflux's own ``WeightLoader`` and ``WeightApplier`` (the
code mflux's constructor runs on ``model_path``) into a fresh shell, generated through the engine.

mflux's constructor itself cannot run here: it builds the real text encoder and VAE at their full
size. What this pins: the engine hands the request's folder to the loader, the folder's stored
quantization reaches the report and the caches, and the weights read back are the ones saved —
byte-exact, since both runs share one numerical path (the same quantized matmuls, eager)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.common.weights.loading.weight_applier import WeightApplier
from mflux.models.common.weights.loading.weight_loader import WeightLoader
from mflux.utils.apple_silicon import AppleSiliconUtil

from app.adapters import common, shells
from app.adapters.flux2 import shell as flux2_shell
from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import GenerationRequest, make_request
from app.families.flux2 import Flux2Dims
from app.variants import get_variant, weights
from tests.fakes.model_folders import quantize_shell, save_shell

KLEIN_4B_TINY = Flux2Dims(5, 1, 4, 32, 64, (8, 8, 8, 8))


def _tiny(seed: int) -> Any:
    return flux2_shell("flux2-klein-base-4b", dims=KLEIN_4B_TINY, seed=seed)


def _folder_loader(loaded: list[str]) -> Any:
    """Reads the request's folder with mflux's own loader into a fresh shell whose transformer
    starts from other random weights: every transformer weight the run uses comes from the
    folder (the prompt embeddings, which a folder's text encoder would make, are the shell's)."""

    def load(variant: Any, request: GenerationRequest, emit: Any, cancel: Any) -> Any:
        assert request.model_path is not None
        definition = weights._weight_definition(variant)
        (component,) = [c for c in definition.get_components() if c.name == "transformer"]
        pipeline = _tiny(seed=0)
        pipeline.transformer = _tiny(seed=99).transformer
        folder = Path(request.model_path)
        read = WeightLoader.load_single_local(component=component, root_path=folder)
        pipeline.bits = WeightApplier.apply_and_quantize_single(
            read, pipeline.transformer, component, quantize_arg=request.quantize
        )
        loaded.append(request.model_path)
        return pipeline

    return load


def _run(engine: Engine, request: GenerationRequest) -> dict[str, Any]:
    seen: list[Any] = []
    engine.run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
    return seen[-1].report.to_json()


def test_a_saved_4_bit_folder_runs_through_the_engine(
    forced_variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))  # eager
    variant = get_variant(forced_variant)
    with common.use_precision(mx.float32):
        original = _tiny(seed=0)
        quantize_shell(original, 4)
        folder = save_shell(original, variant, tmp_path / "klein-q4", 4)
        in_memory = _run(
            Engine(loader=lambda *args: original),
            make_request(forced_variant, shells.DEFAULT_PROMPT, seed=1, steps=8, quantize=4),
        )
        loaded: list[str] = []
        request = make_request(  # the forced variant's gate (a folder alone opens on the probe)
            forced_variant, shells.DEFAULT_PROMPT, seed=1, steps=8, model_path=folder,
            gate="teacache",
        )  # fmt: skip
        from_folder = _run(Engine(loader=_folder_loader(loaded)), request)
    assert loaded == [str(folder.resolve())]
    assert from_folder["quantize"] == 4  # the folder's stored level, not asked for
    assert from_folder["model_path"] == str(folder.resolve())
    assert from_folder["skipped"] > 0  # engagement
    assert from_folder["vanilla_latents_sha256"] == in_memory["vanilla_latents_sha256"]
    assert from_folder["gated_latents_sha256"] == in_memory["gated_latents_sha256"]
