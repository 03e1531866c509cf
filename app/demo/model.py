"""The demo model: mflux's own ``Flux2Transformer`` at small dimensions plus our text encoder.

The latent codec (``app.demo.codec``) is closed-form and lives in its own file; the picture
decoder (``app.demo.decoder``) in another. Weights ship in
``resources/demo`` as float16 safetensors (halves the size; loaded back as float32, and every
quality figure was measured on the float16-rounded weights).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from app.demo.prompt import MAX_TOKENS, VOCAB_SIZE
from app.paths import DEMO_DIR

CONFIG_FILE = "demo.json"
CODEC_FILE = "codec.safetensors"
DECODER_FILE = "decoder.safetensors"  # app.demo.decoder: latents → pixels without patch seams
VARIANT_FILES = {"demo": "demo.safetensors", "demo-turbo": "demo-turbo.safetensors"}

TRANSFORMER_CONFIG: dict[str, Any] = {
    "num_layers": 2,
    "num_single_layers": 8,  # runs 1-6 trained 4; run 7 grew them to 8 (grow_single_blocks)
    "attention_head_dim": 32,
    "num_attention_heads": 8,
    "joint_attention_dim": 128,
    "axes_dims_rope": (8, 8, 8, 8),  # sums to attention_head_dim, as FLUX.2's rope requires
}
TEXT_CONFIG: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "max_tokens": MAX_TOKENS,
    "dims": 128,  # = joint_attention_dim
    "num_layers": 2,
    "num_heads": 4,
    "mlp_dims": 256,
}


class TextEncoder(nn.Module):
    """Word tokens → (B, MAX_TOKENS, 128) context for the transformer: learned token and position
    embeddings, then a small pre-norm transformer encoder (words see each other, so "red" can
    bind to the shape it describes before the image attends to it)."""

    def __init__(
        self,
        vocab_size: int,
        max_tokens: int,
        dims: int,
        num_layers: int,
        num_heads: int,
        mlp_dims: int,
    ) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, dims)
        self.position_embedding = mx.random.normal((max_tokens, dims)) * 0.02
        self.encoder = nn.TransformerEncoder(
            num_layers, dims, num_heads, mlp_dims=mlp_dims, norm_first=True
        )

    def __call__(self, tokens: mx.array) -> mx.array:
        x = self.token_embedding(tokens) + self.position_embedding[: tokens.shape[1]]
        return self.encoder(x, None)


class DemoModel(nn.Module):
    """The transformer at ``TRANSFORMER_CONFIG``'s size, or deeper by single-stream blocks (the
    one dimension a run may grow: see ``grow_single_blocks``)."""

    def __init__(self, num_single_layers: int | None = None) -> None:
        super().__init__()
        from mflux.models.flux2.model.flux2_transformer.transformer import Flux2Transformer

        config = dict(TRANSFORMER_CONFIG)
        if num_single_layers is not None:
            config["num_single_layers"] = num_single_layers
        self.transformer = Flux2Transformer(**config)
        self.text_encoder = TextEncoder(**TEXT_CONFIG)

    @property
    def num_single_layers(self) -> int:
        return len(self.transformer.single_transformer_blocks)

    def transformer_config(self) -> dict[str, Any]:
        return {**TRANSFORMER_CONFIG, "num_single_layers": self.num_single_layers}


SINGLE_BLOCK_PREFIX = "transformer.single_transformer_blocks."


def single_layers_in(weights: dict[str, Any]) -> int:
    """How many single-stream blocks a weights file holds (its keys say; the shape of each
    block is fixed by ``TRANSFORMER_CONFIG``)."""
    indices = {
        int(key[len(SINGLE_BLOCK_PREFIX) :].split(".", 1)[0])
        for key in weights
        if key.startswith(SINGLE_BLOCK_PREFIX)
    }
    return len(indices)


def read_weights(paths: list[Path] | Path) -> dict[str, mx.array]:
    weights: dict[str, mx.array] = {}
    for path in [paths] if isinstance(paths, Path) else paths:
        loaded = mx.load(str(path))
        assert isinstance(loaded, dict)
        weights.update(loaded)
    return weights


def load_model(paths: list[Path] | Path) -> DemoModel:
    """A model of the size the file holds, its weights loaded as float32."""
    weights = read_weights(paths)
    return _load(DemoModel(single_layers_in(weights)), weights)


def grow_single_blocks(model: DemoModel, weights: dict[str, mx.array]) -> list[int]:
    """Load a shallower model's weights into ``model``: its single block i goes to position
    i·new // old and the blocks in between start as exact identities (their output projection
    zero, so ``h + gate · 0 = h``): the grown model computes what the file's model computed, and
    training then uses the added depth. Returns the positions of the added blocks."""
    old, new = single_layers_in(weights), model.num_single_layers
    if old > new:
        raise ValueError(f"cannot shrink {old} single blocks to {new}")
    placed = [i * new // old for i in range(old)]
    moved: dict[str, mx.array] = {}
    for key, value in weights.items():
        if key.startswith(SINGLE_BLOCK_PREFIX):
            index, rest = key[len(SINGLE_BLOCK_PREFIX) :].split(".", 1)
            key = f"{SINGLE_BLOCK_PREFIX}{placed[int(index)]}.{rest}"
        moved[key] = value
    added = [i for i in range(new) if i not in placed]
    for i in added:
        out = model.transformer.single_transformer_blocks[i].attn.to_out
        out.weight = mx.zeros_like(out.weight)
    # The added blocks keep their fresh initialisation apart from the zeroed projection.
    own = dict(tree_flatten(model.parameters()))
    for i in added:
        prefix = f"{SINGLE_BLOCK_PREFIX}{i}."
        moved.update({k: v for k, v in own.items() if k.startswith(prefix)})
    _load(model, moved)
    return added


def image_ids(tokens: int = 64) -> mx.array:
    """FLUX.2's image position ids for a square latent grid, (1, tokens, 4)."""
    from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator

    side = round(tokens**0.5)
    return Flux2LatentCreator.prepare_grid_ids(mx.zeros((1, 1, side, side)), t_coord=0)


def text_ids(context: mx.array) -> mx.array:
    from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder

    return Flux2PromptEncoder.prepare_text_ids(context[:1])


def load_weights(model: DemoModel, paths: list[Path] | Path) -> DemoModel:
    """Load (float16 or float32) safetensors into ``model`` as float32; several files merge."""
    return _load(model, read_weights(paths))


def _load(model: DemoModel, weights: dict[str, mx.array]) -> DemoModel:
    model.load_weights([(k, v.astype(mx.float32)) for k, v in weights.items()], strict=True)
    mx.eval(model.parameters())
    return model


def read_config(resources: Path = DEMO_DIR) -> dict[str, Any]:
    return json.loads((resources / CONFIG_FILE).read_text(encoding="utf-8"))
