"""The demo trainer's numerics: bfloat16 compute against float32, the CFG teacher, and the
on-policy turbo distillation (its pairs and its mixing into the batches). Training-scale work, so
the ``lab_slow`` step (``uv run pytest -m lab_slow``; .ci/run), not the default run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder
from mlx.utils import tree_flatten

from app.adapters.common import use_precision
from app.demo.codec import PCACodec, load_codec
from app.demo.model import (
    CODEC_FILE,
    VARIANT_FILES,
    DemoModel,
    image_ids,
    load_model,
)
from app.paths import DEMO_DIR
from lab.demo.scenes import MAX_TOKENS, caption, render_batch, scene_from_seed, tokenize
from lab.demo.train import Trainer, teacher_velocity

pytestmark = pytest.mark.lab_slow  # minutes of training-scale work: its own CI step

# bfloat16 keeps 8 mantissa bits (relative rounding 2^-9 ≈ 0.2% per operand). On two training
# scenes (``_scene_batch``), one step's loss differed by 0.40% relative on the CPU through the
# shipped run-8k model (0.47% through run 7g's) and the update direction by a cosine of 0.970
# (0.969). Off-distribution inputs (noise latents, random words) amplify it: 1.0% on run 8k, which
# is why the batch is real scenes. The bounds leave room for other backends while still failing
# for a cast that drops the update or a missing gradient path.
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


def _scene_batch(codec: PCACodec) -> tuple[mx.array, ...]:
    """Two training scenes with their captions, noised as in training (in-distribution)."""
    scenes = [scene_from_seed(3_000_000 + i) for i in range(2)]
    x0 = mx.array(codec.encode(render_batch(scenes)))
    noise = mx.random.normal(x0.shape, key=mx.random.key(7))
    t = mx.array([0.3, 0.7])
    xt = (1 - t)[:, None, None] * x0 + t[:, None, None] * noise
    tokens = mx.array([tokenize(caption(scene)) for scene in scenes])
    return tokens, xt, t, noise - x0


def _leaves(tree: object) -> list[Any]:
    return list(dict(tree_flatten(tree)).values())


def _flat(tree: object) -> np.ndarray:
    return np.concatenate([np.array(v).ravel() for _, v in tree_flatten(tree)])


def test_bfloat16_compute_tracks_float32_and_keeps_float32_master_weights() -> None:
    codec = load_codec(DEMO_DIR / CODEC_FILE)
    results = {}
    for compute in ("float32", "bfloat16"):
        trainer = Trainer(codec, batch=2, seed=1, compute=compute)
        trainer.init_from(DEMO_DIR / VARIANT_FILES["demo"])
        before = _flat(trainer.model.parameters())
        loss, _ = trainer.run_step(*_scene_batch(codec), lr=1e-3, decay=0.9)
        mx.eval(trainer.state)
        dtypes = {v.dtype for v in _leaves(trainer.model.parameters())}
        dtypes |= {v.dtype for v in _leaves(trainer.ema.parameters())}
        dtypes |= {v.dtype for v in _leaves(trainer.opt.state) if v.ndim > 0}
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
    # float32 throughout: mflux's default compute precision runs parts in bfloat16, whose
    # rounding (4.7e-2 here with OpenBLAS) would swamp the batched-vs-separate comparison
    with use_precision(mx.float32):
        model = load_model(DEMO_DIR / VARIANT_FILES["demo"])
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
        assert float(mx.max(mx.abs(guided - expected))) < 1e-4
        assert float(mx.max(mx.abs(guided - plain(context)))) > 1e-2  # the guidance did something


def _prompts_tokens_noise(n: int) -> tuple[list[str], mx.array, mx.array]:
    from lab.demo.evaluate import eval_prompts, initial_noise
    from lab.demo.scenes import tokenize

    prompts = eval_prompts(n)
    tokens = mx.array([tokenize(p) for p in prompts], dtype=mx.int32)
    return prompts, tokens, initial_noise(list(range(n)))


def test_integrate_on_the_turbo_sigmas_is_the_evaluation_sampler() -> None:
    from lab.demo.evaluate import sample_batch
    from lab.demo.train import integrate, teacher_ladder

    model = load_model(DEMO_DIR / VARIANT_FILES["demo-turbo"])
    prompts, tokens, noise = _prompts_tokens_noise(3)
    _, turbo_sigmas = teacher_ladder()
    states = integrate(model, noise, tokens, turbo_sigmas, 1.0, keep=turbo_sigmas)
    assert states.shape == (3, 5, 64, 128)
    assert mx.array_equal(states[:, 0], noise)
    # Same noise, sigmas and Euler arithmetic as the sampler that reproduces mflux's loop: one
    # numerical path, so byte-exact.
    assert mx.array_equal(states[:, -1], sample_batch(model, prompts, list(range(3)), 4, 1.0))


def test_on_policy_pairs_start_on_the_students_path_and_end_on_the_teachers() -> None:
    from lab.demo.train import integrate, student_state_pairs, teacher_ladder, teacher_velocity

    student = load_model(DEMO_DIR / VARIANT_FILES["demo-turbo"])
    teacher = load_model(DEMO_DIR / VARIANT_FILES["demo"])
    _, tokens, noise = _prompts_tokens_noise(6)
    ladder, turbo_sigmas = teacher_ladder()
    x_in, x_out, k, toks = student_state_pairs(
        student, teacher, tokens, noise, ladder, turbo_sigmas, 3.0, np.random.default_rng(0)
    )
    assert x_in.shape == x_out.shape == (6, 64, 128) and k.shape == toks.shape[:1] == (6,)
    assert set(np.array(k).tolist()) <= {1, 2, 3}
    own = integrate(student, noise, tokens, turbo_sigmas, 1.0, keep=turbo_sigmas)
    for row in range(6):
        stride = int(k[row].item())
        # x_in is the student's own state after `stride` strides from one of the noises ...
        distance = mx.abs(own[:, stride] - x_in[row]).max(axis=(1, 2))
        source = int(mx.argmin(distance))
        assert float(distance[source]) < 1e-5
        assert mx.array_equal(toks[row], tokens[source])
        # ... and x_out is the guided teacher integrated from it to the next turbo sigma.
        segment = [s for s in ladder if turbo_sigmas[stride + 1] <= s <= turbo_sigmas[stride]]
        assert len(segment) >= 2
        expected = integrate(teacher, x_in[row : row + 1], toks[row : row + 1], segment, 3.0)
        assert float(mx.max(mx.abs(expected[0] - x_out[row]))) < 1e-4
    # Not the student's own next state: the targets carry the teacher's correction.
    img = image_ids(64)
    context = student.text_encoder(toks)
    txt = Flux2PromptEncoder.prepare_text_ids(context[:1])
    first = int(k[0].item())
    s0, s1 = turbo_sigmas[first], turbo_sigmas[first + 1]
    v = teacher_velocity(student.transformer, x_in[:1], context[:1], None, s0, 1.0, img, txt)
    assert float(mx.max(mx.abs(x_in[:1] + (s1 - s0) * v - x_out[:1]))) > 1e-2


def test_on_policy_distillation_mixes_own_states_into_the_batches() -> None:
    import argparse

    from lab.demo.data import build_pool
    from lab.demo.train import train_turbo

    codec = load_codec(DEMO_DIR / CODEC_FILE)
    trainer = Trainer(codec, batch=4, seed=3)
    trainer.init_from(DEMO_DIR / VARIANT_FILES["demo"])
    before = _flat(trainer.ema.parameters())
    args = argparse.Namespace(
        seed=3,
        trajectories=4,
        turbo_guidance=3.0,
        turbo_steps=3,
        turbo_seconds=600.0,
        turbo_lr=1e-4,
        turbo_ema=0.9,
        turbo_on_policy=0.5,
        turbo_refresh=1,
        turbo_refresh_samples=4,
    )
    report: dict[str, object] = {}
    train_turbo(trainer, build_pool(3, 16), args, report)
    turbo = report["turbo_training"]
    assert isinstance(turbo, dict)
    assert turbo["steps"] == 3
    assert turbo["on_policy"]["share"] == 0.5
    assert turbo["on_policy"]["refreshes"] == 2  # before steps 2 and 3
    assert np.linalg.norm(_flat(trainer.ema.parameters()) - before) > 0


def _velocity(model: DemoModel, tokens: mx.array, xt: mx.array) -> mx.array:
    context = model.text_encoder(tokens)
    txt = Flux2PromptEncoder.prepare_text_ids(context[:1])
    return teacher_velocity(model.transformer, xt, context, None, 0.6, 1.0, image_ids(64), txt)


def test_a_grown_model_starts_as_the_shipped_one_and_its_added_blocks_learn() -> None:
    """Deepening by identity blocks: byte-exact with the file's model (h + gate · 0 is h), and the
    added blocks' output projections get gradient, so training can use them."""
    from app.demo.model import grow_single_blocks, read_weights, single_layers_in
    from app.paths import DEMO_DIR

    path = DEMO_DIR / VARIANT_FILES["demo"]
    shipped = load_model(path)
    old = shipped.num_single_layers
    grown = DemoModel(2 * old)
    added = grow_single_blocks(grown, read_weights(path))
    assert added == list(range(1, 2 * old, 2))  # interleaved: old block i at 2i
    tokens, xt, _, target = _batch(shipped.transformer.x_embedder.weight.shape[1])
    assert np.array_equal(
        np.array(_velocity(grown, tokens, xt)), np.array(_velocity(shipped, tokens, xt))
    )

    from mlx.nn.utils import value_and_grad

    def loss(model: DemoModel) -> mx.array:
        return mx.mean(mx.square(_velocity(model, tokens, xt) - target))

    _, grads = value_and_grad(grown, loss)(grown)
    blocks = grads["transformer"]["single_transformer_blocks"]
    for i in added:
        assert float(mx.max(mx.abs(blocks[i]["attn"]["to_out"]["weight"]))) > 0
    assert single_layers_in(dict(tree_flatten(grown.parameters()))) == 2 * old


def test_growing_refuses_to_shrink_and_files_load_at_their_own_depth(tmp_path: Path) -> None:
    from app.demo.model import grow_single_blocks, read_weights
    from lab.demo.export import save_weights

    deep = DemoModel(6)
    save_weights(deep, tmp_path / "deep.safetensors")
    assert load_model(tmp_path / "deep.safetensors").num_single_layers == 6
    with pytest.raises(ValueError, match="cannot shrink 6 single blocks to 4"):
        grow_single_blocks(DemoModel(4), read_weights(tmp_path / "deep.safetensors"))


def test_install_weights_joins_split_files_and_unpacks_the_bundle(tmp_path: Path) -> None:
    """What device/collect.sh returns (files over 15 MiB in parts, report/log/samples in one
    tarball) goes back together before installing."""
    import tarfile

    from lab.demo.train import _unpack_device_files

    payload = np.random.default_rng(0).bytes(3000)
    for i, start in enumerate(range(0, 3000, 1024)):
        suffix = "a" + "abc"[i]
        (tmp_path / f"demo-transformer.safetensors.part_{suffix}").write_bytes(
            payload[start : start + 1024]
        )
    (tmp_path / "report.json").write_text("{}", encoding="utf-8")
    with tarfile.open(tmp_path / "g-results.tgz", "w:gz") as tar:
        tar.add(tmp_path / "report.json", arcname="train.log")
    _unpack_device_files(tmp_path)
    assert (tmp_path / "demo-transformer.safetensors").read_bytes() == payload
    assert (tmp_path / "train.log").read_text(encoding="utf-8") == "{}"
