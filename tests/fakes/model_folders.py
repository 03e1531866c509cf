"""Model folders on disk, written by mflux's own ``ModelSaver`` from tiny random-weight shells:
the layout ``mflux-save`` writes (numbered shards and an index per component, the quantization
level in the metadata), small enough for the CPU."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlx.core as mx
from mflux.models.common.weights.saving.model_saver import ModelSaver
from mlx import nn

from app.variants import Variant, weights

GROUP_SIZE = 64  # mflux's


def quantize_shell(pipeline: Any, bits: int) -> None:
    """Quantize the transformer's layers the way mflux does (``nn.quantize``, group size 64),
    where a layer's width allows it."""

    def fits(_path: str, module: nn.Module) -> bool:
        weight = getattr(module, "weight", None)
        return (
            hasattr(module, "to_quantized")
            and weight is not None
            and weight.shape[-1] % GROUP_SIZE == 0
        )

    nn.quantize(pipeline.transformer, group_size=GROUP_SIZE, bits=bits, class_predicate=fits)


def save_shell(pipeline: Any, variant: Variant, root: Path, bits: int | None) -> Path:
    """``mflux-save``'s layout from ``pipeline``'s transformer (a stand-in ``nn.Linear`` for each
    other component, a tokenizer file where ``save_pretrained`` would write one)."""
    definition = weights._weight_definition(variant)
    parts: dict[str, Any] = {"tokenizers": {}}
    for component in definition.get_components():
        attr = component.model_attr or component.name
        parts[attr] = pipeline.transformer if component.name == "transformer" else nn.Linear(4, 4)
    ModelSaver.save_model(
        model=SimpleNamespace(**parts),
        bits=bits,  # type: ignore[arg-type]  # mflux writes "None" for unquantized saves
        base_path=str(root),
        weight_definition=definition,
    )
    for tokenizer in variant.family.require_mflux().tokenizers():
        (root / tokenizer.hf_subdir).mkdir(parents=True, exist_ok=True)
        (root / tokenizer.hf_subdir / "tokenizer.json").write_text("{}", encoding="utf-8")
    mx.eval(pipeline.transformer.parameters())
    return root
