"""Tiny LoRA files for the random-weight shells, in key formats mflux's own mappings accept.

FLUX.2's keys are diffusers names (``transformer_blocks.0.attn.to_q.lora_A.weight``), Z-Image's
the ComfyUI/diffusion-model names (``diffusion_model.layers.0.attention.to_q.lora_A.weight``);
FLUX.3's, Qwen-Image 2.1's and Krea 2's mix the names their mflux mappings accept; mflux maps all
of them onto its module paths. The fixture only needs each target's shape, read from the
shell's own module at that path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

# file key (without .lora_A/.lora_B.weight) → the mflux module it patches
FLUX2_TARGETS: Mapping[str, str] = {
    "transformer_blocks.0.attn.to_q": "transformer_blocks.0.attn.to_q",
    "transformer_blocks.1.ff.linear_in": "transformer_blocks.1.ff.linear_in",
    "single_transformer_blocks.0.attn.to_out": "single_transformer_blocks.0.attn.to_out",
}
Z_IMAGE_TARGETS: Mapping[str, str] = {
    "diffusion_model.layers.0.attention.to_q": "layers.0.attention.to_q",
    "diffusion_model.layers.1.feed_forward.w1": "layers.1.feed_forward.w1",
    "diffusion_model.layers.2.attention.to_out.0": "layers.2.attention.to_out.0",
}

# FLUX.3: BFL names as ComfyUI and ai-toolkit write them, and diffusers/PEFT names
FLUX3_TARGETS: Mapping[str, str] = {
    "diffusion_model.content_mode_blocks.image.0.q_proj": "mode_blocks.image.0.attn.to_q",
    "diffusion_model.single_blocks.1.mlp_in": "single_transformer_blocks.1.ff.linear_in",
    "transformer.txt_mode_blocks.1.ff.linear_out": "txt_mode_blocks.1.ff.linear_out",
}
QWEN21_TARGETS: Mapping[str, str] = {
    "transformer.transformer_blocks.0.attn.to_q": "transformer_blocks.0.attn.to_q",
    "diffusion_model.transformer_blocks.1.img_mlp.out": "transformer_blocks.1.img_mlp.out",
    "transformer.transformer_blocks.1.attn.to_out.0": "transformer_blocks.1.attn.to_out.0",
}
# Krea 2: its own module names and diffusers' (Krea 2 Raw's LoRAs)
KREA2_TARGETS: Mapping[str, str] = {
    "diffusion_model.blocks.0.attn.wq": "blocks.0.attn.wq",
    "transformer.transformer_blocks.1.ff.down": "blocks.1.mlp.down",
    "blocks.1.attn.gate": "blocks.1.attn.gate",
}


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
