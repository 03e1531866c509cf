"""The variant registry: one entry per model variant the app can run, with the gate's numbers.

- ``catalog``: what a variant is (``Provenance``, ``Variant``, ``UnknownVariantError``); its
  ``Family`` comes from ``app.families``;
- ``builtin``: the built-in table; ``user``: the user's calibration files, each a variant;
- ``registry``: ``VARIANTS``, ``get_variant``, ``all_variants`` over both;
- ``schedule``: ``check_schedule``, "can this schedule skip at all?";
- ``weights`` (imported on its own, not here): Hugging Face snapshots — on disk?, size, download,
  verification.

Data only: importing this package loads neither MLX nor mflux, so the command line can list
variants and answer "can this schedule skip at all?" instantly and without weights.
"""

from __future__ import annotations

from app.families import Family
from app.paths import DEMO_DIR
from app.variants.builtin import DEMO_GUIDANCE
from app.variants.catalog import (
    QUANTIZE_LEVELS,
    MagCacheCalibration,
    Provenance,
    UnknownVariantError,
    Variant,
)
from app.variants.registry import DEFAULT_VARIANT, VARIANTS, all_variants, get_variant
from app.variants.schedule import ScheduleCheck, check_schedule
from app.variants.user import CalibrationFileError, with_user_calibration

__all__ = [
    "DEFAULT_VARIANT",
    "DEMO_DIR",
    "DEMO_GUIDANCE",
    "QUANTIZE_LEVELS",
    "VARIANTS",
    "CalibrationFileError",
    "Family",
    "MagCacheCalibration",
    "Provenance",
    "ScheduleCheck",
    "UnknownVariantError",
    "Variant",
    "all_variants",
    "check_schedule",
    "get_variant",
    "with_user_calibration",
]
