"""Input checks on the one request object, before any work: each bad value is one clear line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from app.engine.request import (
    GUIDANCE_RANGE,
    MAX_LORAS,
    GenerationRequest,
    LoraSpec,
    RequestError,
    make_request,
)
from app.variants import get_variant

PROMPT = "two red circles and a blue star on a yellow background"


@pytest.mark.parametrize("guidance", [-1.0, 0.5, math.nan, math.inf, -math.inf, 10.5])
def test_guidance_outside_the_range_or_not_finite_is_refused(guidance: float) -> None:
    with pytest.raises(RequestError, match="guidance must be between 1 and 10"):
        make_request("demo", PROMPT, guidance=guidance)


@pytest.mark.parametrize("guidance", [GUIDANCE_RANGE[0], 3.0, GUIDANCE_RANGE[1]])
def test_guidance_inside_the_range_is_kept(guidance: float) -> None:
    assert make_request("demo", PROMPT, guidance=guidance).guidance == guidance


def test_a_family_without_guidance_refuses_one() -> None:
    with pytest.raises(RequestError, match="flux1-schnell takes no guidance value"):
        make_request("flux1-schnell", "a cat", guidance=3.5)
    assert make_request("flux1-schnell", "a cat").guidance is None


def test_guidance_defaults_to_the_variants() -> None:
    default = get_variant("demo").default_guidance
    assert default is not None
    assert make_request("demo", PROMPT).guidance == default


@pytest.mark.parametrize("threshold", [math.nan, math.inf, -0.1, 1.5])
def test_threshold_outside_zero_to_one_or_not_finite_is_refused(threshold: float) -> None:
    with pytest.raises(RequestError, match="threshold must be between 0 and 1"):
        make_request("demo", PROMPT, threshold=threshold)


# -- LoRA -----------------------------------------------------------------------------------------

KLEIN_BASE = "flux2-klein-base-4b"


def _safetensors(path: Path) -> str:
    import mlx.core as mx

    mx.save_safetensors(str(path), {"x.lora_A.weight": mx.zeros((2, 2))})
    return str(path)


def test_loras_are_kept_with_absolute_paths_and_float_scales(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _safetensors(tmp_path / "a.safetensors")
    b = str(tmp_path / "b.SAFETENSORS")  # the suffix in any case
    Path(b).write_bytes(Path(a).read_bytes())
    monkeypatch.chdir(tmp_path)
    request = make_request(KLEIN_BASE, "a cat", loras=[("a.safetensors", 1), (b, -0.5)])
    assert request.loras == (LoraSpec(a, 1.0), LoraSpec(b, -0.5))
    assert all(isinstance(lora.scale, float) for lora in request.loras)
    assert request.loras[0].label() == "a.safetensors × 1"
    assert make_request(KLEIN_BASE, "a cat").loras == ()


def _junk(tmp_path: Path) -> str:
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    return str(tmp_path / "junk.safetensors")


def _empty(tmp_path: Path) -> str:
    (tmp_path / "empty.safetensors").write_bytes(b"")
    return str(tmp_path / "empty.safetensors")


@pytest.mark.parametrize(
    ("variant_id", "loras", "message"),
    [
        ("demo", lambda p: [(_safetensors(p / "a.safetensors"), 1.0)], "takes no LoRA"),
        (KLEIN_BASE, lambda p: [(str(p / "gone.safetensors"), 1.0)], "does not exist"),
        (KLEIN_BASE, lambda p: [(str(p), 1.0)], "must be a .safetensors file"),
        (KLEIN_BASE, lambda p: [(str(p / "a.ckpt"), 1.0)], "must be a .safetensors file"),
        (KLEIN_BASE, lambda p: [(_junk(p), 1.0)], "not a readable .safetensors file"),
        (KLEIN_BASE, lambda p: [(_empty(p), 1.0)], "not a readable .safetensors file"),
        (KLEIN_BASE, lambda p: [(_safetensors(p / "a.safetensors"), 6.0)], "between -5 and 5"),
        (KLEIN_BASE, lambda p: [(_safetensors(p / "a.safetensors"), math.nan)], "between -5"),
        (KLEIN_BASE, lambda p: [(_safetensors(p / "a.safetensors"), "x")], "must be a number"),
        (
            KLEIN_BASE,
            lambda p: [(_safetensors(p / "a.safetensors"), 1.0)] * 2,
            "a.safetensors is listed twice",
        ),
        (
            KLEIN_BASE,
            lambda p: [(_safetensors(p / f"{i}.safetensors"), 1.0) for i in range(MAX_LORAS + 1)],
            f"at most {MAX_LORAS} LoRA files",
        ),
    ],
)
def test_bad_loras_are_one_clear_sentence(
    tmp_path: Path, variant_id: str, loras: Any, message: str
) -> None:
    with pytest.raises(RequestError) as refused:
        make_request(variant_id, "a cat" if variant_id != "demo" else PROMPT, loras=loras(tmp_path))
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_fill_defaults_to_reuse_and_an_unknown_one_is_one_sentence() -> None:
    assert make_request("demo", "a red circle").fill == "reuse"
    assert make_request("demo", "a red circle", fill="forecast").fill == "forecast"
    with pytest.raises(RequestError, match=r"^unknown fill 'taylor'; choose one of: reuse, "):
        make_request("demo", "a red circle", fill="taylor")
    # A request written before there was a choice reads back as reuse, as it ran.
    data = make_request("demo", "a red circle", fill="forecast").as_dict()
    assert GenerationRequest.from_dict(data).fill == "forecast"
    del data["fill"]
    assert GenerationRequest.from_dict(data).fill == "reuse"
