"""A variant's parameters for one shipped gate, typed as that gate's (what tests read beside the
threshold: TeaCache's polynomial, MagCache's table): ``Variant.params_for`` underneath, so a
variant without that gate's calibration raises its one-sentence reason as the app does."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.gate import MagCacheParams, TeaCacheParams
from app.variants import Variant


def teacache_params(
    variant: Variant, threshold: float | None = None, **overrides: Any
) -> TeaCacheParams:
    params = variant.params_for("teacache", threshold)
    assert isinstance(params, TeaCacheParams)
    return replace(params, **overrides) if overrides else params


def magcache_params(variant: Variant, threshold: float | None = None) -> MagCacheParams:
    params = variant.params_for("magcache", threshold)
    assert isinstance(params, MagCacheParams)
    return params
