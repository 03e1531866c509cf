"""The demo trainer's numerics: bfloat16 compute against float32, and the CFG teacher."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder
from mlx.utils import tree_flatten

from app.demo.codec import load_codec
from app.demo.model import CODEC_FILE, RESOURCES, VARIANT_FILES, DemoModel, image_ids, load_weights
from app.demo.scenes import MAX_TOKENS
from app.demo.train import Trainer, teacher_velocity

# bfloat16 keeps 8 mantissa bits (relative rounding 2^-9 ≈ 0.2% per operand); through the shipped
# model one step's loss differed by 3e-5 relative on the CPU and the update direction by a cosine
# of 0.99+. The bounds leave room for other backends while still failing for a broken cast (a
# float16/bfloat16 mix-up, a missing gradient path or a cast that drops the update).
LOSS_RELATIVE_TOLERANCE = 1e-2
UPDATE_MIN_COSINE = 0.95


def _batch(channels: int) -> tuple[mx.array, ...]:
    key = mx.random.key(7)
    k1, k2, k3, k4 = mx.random.split(key, 4)
    x0 = mx.random.normal((2, 64, channels), key=k1)
    noise = mx.random.normal((2, 64, channels), key=k2)
    t = mx.random.uniform(low=0.1, high=0.9, shape=(2,), key=k3)
    xt = (1 - t)[:, None, None] * x0 + t[:, None, None] * noise
    tokens = mx.random.randint(1, 20, (2, MAX_TOKENS), key=k4)
    return tokens, xt, t, noise - x0


def _flat(tree: object) -> np.ndarray:
    return np.concatenate([np.array(v).ravel() for _, v in tree_flatten(tree)])


def test_bfloat16_compute_tracks_float32_and_keeps_float32_master_weights() -> None:
    codec = load_codec(RESOURCES / CODEC_FILE)
    results = {}
    for compute in ("float32", "bfloat16"):
        trainer = Trainer(codec, batch=2, seed=1, compute=compute)
        trainer.init_from(RESOURCES / VARIANT_FILES["demo"])
        before = _flat(trainer.model.parameters())
        batch = _batch(trainer.model.transformer.x_embedder.weight.shape[1])
        loss, _ = trainer.run_step(*batch, lr=1e-3, decay=0.9)
        mx.eval(trainer.state)
        dtypes = {v.dtype for _, v in tree_flatten(trainer.model.parameters())}
        dtypes |= {v.dtype for _, v in tree_flatten(trainer.ema.parameters())}
        dtypes |= {v.dtype for _, v in tree_flatten(trainer.opt.state) if v.ndim > 0}
        results[compute] = (loss.item(), _flat(trainer.model.parameters()) - before, dtypes)
    assert ModelConfig.precision == mx.float32  # restored after tracing the bfloat16 step
    loss32, update32, _ = results["float32"]
    loss16, update16, dtypes16 = results["bfloat16"]
    assert dtypes16 == {mx.float32}
    assert abs(loss16 - loss32) <= LOSS_RELATIVE_TOLERANCE * loss32
    assert np.linalg.norm(update16) > 0
    cosine = update16 @ update32 / (np.linalg.norm(update16) * np.linalg.norm(update32))
    assert cosine >= UPDATE_MIN_COSINE


def test_teacher_velocity_is_the_pipelines_guided_velocity() -> None:
    model = load_weights(DemoModel(), RESOURCES / VARIANT_FILES["demo"])
    tokens, xt, _, _ = _batch(model.transformer.x_embedder.weight.shape[1])
    context = model.text_encoder(tokens)
    uncond = model.text_encoder(mx.zeros_like(tokens))
    img = image_ids(64)
    txt = Flux2PromptEncoder.prepare_text_ids(context[:1])

    def plain(ctx: mx.array) -> mx.array:
        return teacher_velocity(model.transformer, xt, ctx, None, 0.6, 1.0, img, txt)

    guided = teacher_velocity(model.transformer, xt, context, uncond, 0.6, 3.0, img, txt)
    expected = plain(uncond) + 3.0 * (plain(context) - plain(uncond))
    # One batched call against three separate ones: same arithmetic, different matmul batch
    # shapes, so float32 rounding may differ in the last bits; 1e-4 is far below the ~1 scale
    # of a velocity and far above that rounding.
    assert mx.max(mx.abs(guided - expected)).item() < 1e-4
    assert mx.max(mx.abs(guided - plain(context))).item() > 1e-2  # the guidance did something
