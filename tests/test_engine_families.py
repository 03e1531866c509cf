"""The engine end to end on every real family, through tiny random-weight shells of mflux's own
pipelines (the real loaders need weights this machine cannot download).

This pins what only the engine does for a real model: the keyword arguments it passes to each
family's ``generate_image``, the vanilla (observe) pass, the gated pass, the report. Oracles:
threshold 0 is bit-exact against the same-process vanilla pass (both run the adapter's eager path),
and a scripted polynomial engages the gate (skips > 0) on every family.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import mlx.core as mx
import pytest

from app import variants
from app.adapters import shells
from app.engine import events as ev
from app.engine.engine import Engine
from app.engine.request import make_request

PROMPT = shells.DEFAULT_PROMPT
# variant id, shell builder, steps: FLUX.1 keeps its real 3072 width, so it runs fewer steps.
FAMILIES: list[tuple[str, Callable[[], Any], int]] = [
    ("flux1-dev", lambda: shells.flux1_shell("dev"), 4),
    ("flux1-schnell", lambda: shells.flux1_shell("schnell", seed=3), 4),
    ("flux2-klein-base-4b", lambda: shells.flux2_shell("flux2-klein-base-4b"), 6),
    ("z-image", lambda: shells.z_image_shell("z-image"), 6),
    ("qwen-image", lambda: shells.qwen_shell(), 6),
]


def _run(
    variant_id: str,
    build: Callable[[], Any],
    steps: int,
    threshold: float,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    base = variants.get_variant(variant_id)
    # A constant prediction of 0.01 per step: at 0.05 the gate must skip (scripted engagement).
    scripted = replace(
        base,
        id=f"test-{variant_id}",
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.01),
        calibrated_range=None,
        default_threshold=0.05,
        distilled=False,
    )
    monkeypatch.setitem(variants.VARIANTS, scripted.id, scripted)
    with shells.use_precision(mx.float32):
        pipeline = build()
        engine = Engine(loader=lambda *args: pipeline)
        request = make_request(
            scripted.id, PROMPT, seed=1, steps=steps, threshold=threshold, size=(128, 128)
        )
        seen: list[Any] = []
        engine.run(1, request, seen.append, threading.Event())
    assert isinstance(seen[-1], ev.RunFinished), getattr(seen[-1], "details", seen[-1])
    return seen[-1].report


@pytest.mark.parametrize(("variant_id", "build", "steps"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_threshold_zero_matches_vanilla_bit_for_bit(
    variant_id: str, build: Callable[[], Any], steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _run(variant_id, build, steps, 0.0, monkeypatch)
    assert report["skipped"] == 0
    assert report["max_abs_diff"] == 0.0
    assert report["gated_latents_sha256"] == report["vanilla_latents_sha256"]
    assert len(report["vanilla_trace"]) == steps  # the vanilla pass measured the gate signal
    assert all(x is not None for x in report["vanilla_trace"][1:])


@pytest.mark.parametrize(("variant_id", "build", "steps"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_scripted_gate_engages_on_every_family(
    variant_id: str, build: Callable[[], Any], steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _run(variant_id, build, steps, 0.05, monkeypatch)
    # 0.01 per step stays under 0.05 for four steps in a row: all of them between the ends skip
    assert report["pattern"] == "F" + "S" * (steps - 2) + "F"
    assert report["skipped"] == steps - 2
    assert report["max_abs_diff"] > 0.0
