"""Drift detection for the shipped demo files: sizes and hashes recorded in demo.json."""

from __future__ import annotations

import hashlib

import mlx.core as mx
from mlx.utils import tree_flatten

from app.demo.model import CODEC_FILE, DECODER_FILE, VARIANT_FILES, load_model, read_config
from app.paths import DEMO_DIR
from lab.demo.export import parameter_count

MAX_TOTAL_BYTES = 50 * 1000 * 1000  # the "weights under 50 MB"


def test_files_match_the_recorded_sizes_and_hashes() -> None:
    files = read_config()["files"]
    assert set(files) == {CODEC_FILE, DECODER_FILE, *VARIANT_FILES.values()}
    for name, expected in files.items():
        data = (DEMO_DIR / name).read_bytes()
        assert len(data) == expected["bytes"], name
        assert hashlib.sha256(data).hexdigest() == expected["sha256"], name


def test_weights_stay_under_50_mb() -> None:
    names = [CODEC_FILE, DECODER_FILE, *VARIANT_FILES.values()]
    total = sum((DEMO_DIR / n).stat().st_size for n in names)
    assert total < MAX_TOTAL_BYTES


# Run 7 grew the transformer from 4 to 8 single-stream blocks (8,159,744 → 11,567,872).
SHIPPED_TRANSFORMER_PARAMETERS = 11_567_872


def test_weights_load_strictly_as_float32_at_the_recorded_size() -> None:
    recorded = {k: v for k, v in read_config()["transformer"].items() if k != "class"}
    for name in VARIANT_FILES.values():
        model = load_model(DEMO_DIR / name)
        assert parameter_count(model.transformer) == SHIPPED_TRANSFORMER_PARAMETERS
        assert {
            **model.transformer_config(),
            "axes_dims_rope": list(model.transformer_config()["axes_dims_rope"]),
        } == recorded
        embedder = dict(tree_flatten(model.transformer.x_embedder.parameters()))
        assert embedder and all(v.dtype == mx.float32 for v in embedder.values())
