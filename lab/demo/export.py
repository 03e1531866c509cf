"""What training writes into ``resources/demo``, kept out of the shipped app (which only reads):
the PCA codec's closed-form fit and its file, the weights as float16 safetensors, the in-memory
rounding to what that file will hold, and the parameter counts ``demo.json`` records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_map

from app.demo.codec import CHANNELS, PATCH, PCACodec, patchify
from app.demo.model import DemoModel


def fit_pca(images: np.ndarray, channels: int = CHANNELS, per_channel: bool = False) -> PCACodec:
    """Closed-form fit on (N, H, W, 3) images in [0, 1]."""
    patches = patchify(images.astype(np.float64) * 2.0 - 1.0).reshape(-1, PATCH * PATCH * 3)
    mean = patches.mean(0)
    centred = patches - mean
    cov = centred.T @ centred / len(centred)
    eigvals, eigvecs = np.linalg.eigh(cov)
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    # Deterministic sign: largest-magnitude entry of each component positive.
    signs = np.sign(eigvecs[np.abs(eigvecs).argmax(0), np.arange(eigvecs.shape[1])])
    eigvecs = eigvecs * signs
    basis = eigvecs[:, :channels]
    kept = float(eigvals[:channels].sum() / eigvals.sum())
    if per_channel:
        scale = np.sqrt(eigvals[:channels])
    else:
        scale = np.array([np.sqrt(eigvals[:channels].mean())])
    return PCACodec(
        mean.astype(np.float32), basis.astype(np.float32), scale.astype(np.float32), kept
    )


def save_codec(codec: PCACodec, path: Path) -> None:
    mx.save_safetensors(
        str(path),
        {k: mx.array(v) for k, v in codec.tensors().items()},
        metadata={"format": "teacache-studio demo PCA codec"},
    )


def parameter_count(model: nn.Module) -> int:
    return sum(_array(v).size for _, v in tree_flatten(model.parameters()))


def save_weights(
    model: DemoModel,
    path: Path,
    metadata: dict[str, str] | None = None,
    dtype: mx.Dtype = mx.float16,
) -> None:
    weights = {k: _array(v).astype(dtype) for k, v in tree_flatten(model.parameters())}
    mx.save_safetensors(str(path), weights, metadata=metadata or {})


def round_to_float16(model: nn.Module) -> None:
    """Make the in-memory weights exactly what the float16 file will hold."""
    model.update(tree_map(lambda v: v.astype(mx.float16).astype(mx.float32), model.parameters()))
    mx.eval(model.parameters())


def _array(value: Any) -> mx.array:
    assert isinstance(value, mx.array)
    return value
