"""What training writes into resources/demo (lab/demo/export.py): the codec's closed-form fit, and
weights that round-trip through their float16 file exactly as the in-memory rounding predicts."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from app.demo.codec import CHANNELS, load_codec
from app.demo.model import DemoModel, load_model
from lab.demo import scenes as S
from lab.demo.export import fit_pca, parameter_count, round_to_float16, save_codec, save_weights


def test_fit_is_deterministic_and_per_channel_scaling_whitens() -> None:
    images = S.render_batch([S.scene_from_seed(i) for i in range(24)])
    a, b = fit_pca(images), fit_pca(images)
    assert np.array_equal(a.basis, b.basis) and np.array_equal(a.scale, b.scale)
    whitened = fit_pca(images, per_channel=True)
    std = whitened.encode(images).reshape(-1, CHANNELS).std(0)
    # Scales fitted on these very images: measured within 2e-6 of 1 (float32 rounding of the
    # std). 1e-4 leaves 50x that; the unwhitened channels' stds span 0.07–8.3.
    assert np.allclose(std, 1.0, atol=1e-4)


def test_a_saved_codec_loads_back_as_the_same_codec(tmp_path: Path) -> None:
    codec = fit_pca(S.render_batch([S.scene_from_seed(i) for i in range(8)]))
    save_codec(codec, tmp_path / "codec.safetensors")
    loaded = load_codec(tmp_path / "codec.safetensors")
    assert np.array_equal(loaded.basis, codec.basis) and np.array_equal(loaded.mean, codec.mean)
    assert np.array_equal(loaded.scale, codec.scale)
    assert loaded.explained_variance == np.float32(codec.explained_variance)


def test_saved_weights_load_as_the_float16_rounded_model(tmp_path: Path) -> None:
    mx.random.seed(0)
    model = DemoModel(2)
    save_weights(model, tmp_path / "demo.safetensors")
    round_to_float16(model)
    loaded = load_model(tmp_path / "demo.safetensors")
    ours, theirs = dict(tree_flatten(model.parameters())), dict(tree_flatten(loaded.parameters()))
    assert ours.keys() == theirs.keys()
    assert all(mx.array_equal(ours[k], theirs[k]).item() for k in ours)
    assert parameter_count(loaded) == parameter_count(model) > 0
