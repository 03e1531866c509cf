"""Input checks on the one request object, before any work: each bad value is one clear line."""

from __future__ import annotations

import math

import pytest

from app.engine.request import GUIDANCE_RANGE, RequestError, make_request
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
