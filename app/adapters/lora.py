"""LoRA on a pipeline that was built without mflux's constructor (the random-weight shells).

A real model gets its LoRAs from mflux's own constructor (``lora_paths=``, ``lora_scales=``; see
``app.engine.loader``). A shell skips that constructor, so this applies them the way each family's
initializer does: mflux's ``LoRALoader`` with the family's own key mapping (diffusers, kohya and
BFL names alike), baked into the transformer's weights. No key mapping is written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.adapters import AdapterError, detect_family


def lora_mapping(pipeline: Any) -> list[Any]:
    """mflux's LoRA key mapping for the pipeline's family (``Family.mflux.lora_mapping``)."""
    family = detect_family(pipeline)
    mapping = family.require_mflux().lora_mapping
    if mapping is None:
        raise AdapterError(f"mflux has no LoRA mapping for {family.display_name}")
    return mapping().get_mapping()


def apply_loras(pipeline: Any, paths: Sequence[str], scales: Sequence[float]) -> None:
    """Apply and bake LoRA files into ``pipeline.transformer`` exactly as the family's mflux
    initializer does, and record them on the pipeline as mflux does (``lora_paths``,
    ``lora_scales``)."""
    from mflux.models.common.lora.mapping.lora_loader import LoRALoader

    if not paths:
        return
    pipeline.lora_paths, pipeline.lora_scales = LoRALoader.load_and_apply_lora(
        lora_mapping=lora_mapping(pipeline),
        transformer=pipeline.transformer,
        lora_paths=list(paths),
        lora_scales=list(scales),
        bake_lora=True,
    )
