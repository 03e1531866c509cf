"""Tiny LoRA files for the random-weight shells, in key formats mflux's own mappings accept.

The targets are read off each family's mflux LoRA mapping (``lora_targets``): diffusers names
(``transformer_blocks.0.attn.to_q.lora_A.weight``), ComfyUI/diffusion-model names
(``diffusion_model.layers.0.attention.to_q``), PEFT and BFL names, as the mapping lists them;
mflux maps all of them onto its module paths. The fixture only needs each target's shape, read
from the shell's own module at that path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from app.families import Family


def lora_targets(family: Family, transformer: Any, count: int = 3) -> dict[str, str]:
    """``count`` LoRA targets of ``family``'s shell, read off mflux's own key mapping
    (``Family.mflux.lora_mapping``): file key (without ``.lora_A/.lora_B.weight``) → the module
    path it patches. Only plain block targets (a ``{block}`` in the path, no transform) on blocks
    0 and 1 whose module the shell has, with a 2-D weight; spread over the mapping (its first,
    middle and last such modules), each under another of the names mflux accepts for it (diffusers,
    BFL/ComfyUI, PEFT prefixes), so the names a family's mapping adds are exercised without a
    table here."""
    mflux = family.require_mflux()
    assert mflux.lora_mapping is not None, f"{family.display_name} has no LoRA mapping"
    found: dict[str, list[str]] = {}  # module path → its file keys, in the mapping's order
    for target in mflux.lora_mapping().get_mapping():
        if target.up_transform or target.down_transform or "{block}" not in target.model_path:
            continue
        for block in (0, 1):
            path = target.model_path.format(block=block)
            try:
                weight = getattr(module_at(transformer, path), "weight", None)
            except (AttributeError, IndexError, KeyError):
                continue  # a module the tiny shell lacks
            if weight is None or weight.ndim != 2:
                continue
            ups = {u.format(block=block) for u in target.possible_up_patterns}
            for down in target.possible_down_patterns:
                key = down.format(block=block).removesuffix(".lora_A.weight")
                if down.endswith(".lora_A.weight") and f"{key}.lora_B.weight" in ups:
                    found.setdefault(path, [])
                    if key not in found[path]:
                        found[path].append(key)
    paths = [path for path, keys in found.items() if keys]
    assert len(paths) >= count, f"{family.display_name}: {len(paths)} LoRA targets on the shell"
    picks = sorted({round(i * (len(paths) - 1) / max(count - 1, 1)) for i in range(count)})
    chosen = [paths[i] for i in picks]
    return {found[path][i % len(found[path])]: path for i, path in enumerate(chosen)}


def module_at(transformer: Any, path: str) -> Any:
    module = transformer
    for part in path.split("."):
        if isinstance(module, dict):  # FLUX.3's per-mode blocks: {"image": [...], ...}
            module = module[part]
        else:
            module = module[int(part)] if part.isdigit() else getattr(module, part)
    return module


def write_lora(
    path: Path,
    transformer: Any,
    targets: Mapping[str, str],
    *,
    rank: int = 4,
    seed: int = 0,
    strength: float = 1.0,
) -> dict[str, mx.array]:
    """Write a rank-``rank`` LoRA for ``targets`` and return each module path's full update
    ``B @ A`` (``[out, in]``, at scale 1), so a test can check what mflux baked in.

    ``strength`` sizes the update against the shell's weights (uniform ±1/√fan_in): at 1 the
    update's entries spread about as widely as the weights' (both of order 1/√fan_in)."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, mx.array] = {}
    updates: dict[str, mx.array] = {}
    for key, module_path in targets.items():
        out_dim, in_dim = module_at(transformer, module_path).weight.shape
        down = rng.standard_normal((rank, in_dim)).astype(np.float32) / np.sqrt(in_dim)
        up = rng.standard_normal((out_dim, rank)).astype(np.float32) * strength / np.sqrt(rank)
        tensors[f"{key}.lora_A.weight"] = mx.array(down)
        tensors[f"{key}.lora_B.weight"] = mx.array(up)
        updates[module_path] = mx.array(up @ down)
    mx.save_safetensors(str(path), tensors)
    return updates


def write_unrelated_safetensors(path: Path) -> Path:
    """A valid safetensors file whose keys no mapping knows (not a LoRA for these models)."""
    mx.save_safetensors(str(path), {"vision_tower.proj.weight": mx.zeros((2, 2))})
    return path
