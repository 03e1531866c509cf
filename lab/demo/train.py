"""Train the embedded demo model and its 4-step twin. One command, fixed seed, resumable.

    python -m lab.demo.train all --work /opt/tt --out OUT --demo-seconds 430

Phases (``all`` runs them in order, each can run alone):

``fit-codec``  closed-form PCA codec → resources/demo/codec.safetensors (CPU, ~1 min).
``demo``       rectified flow: x_t = (1 − t)·x0 + t·ε, the transformer predicts ε − x0. That is the
               velocity mflux's FLUX.2 Euler step expects: ``latents + (σ_next − σ)·v`` with σ
               falling from 1 to 0 moves x_t towards x0. The transformer gets ``t·1000`` as its
               timestep, as mflux passes ``sigmas·1000``. t is drawn half from sigmoid(normal) and
               half from the shifted schedule mflux uses at 128×128 (where sampling spends its
               steps). 10% caption dropout (all-padding tokens, mflux's " " negative prompt) for
               CFG. AdamW, cosine learning rate over the time budget, EMA weights, ``mx.compile``d
               step, batch 256. Scenes are drawn from a seeded pool and rasterised on the device.
``turbo``      trajectory distillation: the demo's EMA weights (float16-rounded, as shipped) run
               mflux's 28-step Euler schedule merged with the 4 sigmas mflux uses for 4 steps at
               128×128; the student (initialised from the teacher) learns to land on the teacher's
               state at the next 4-step sigma in one Euler step. With ``--turbo-on-policy P`` a
               share P of every batch comes from the student's *own* states instead: the EMA
               student rolls 1–3 strides from fresh noise, and the guided teacher integrates from
               that state to the next turbo sigma (re-drawn every ``--turbo-refresh`` steps), so
               the student learns to correct its own drift rather than only the teacher's path.
``evaluate``   100 random eval prompts: demo at 28 steps, demo at 4 plain steps, turbo at 4
               steps, scored by the checker; a contact sheet.
``latency``    the real pipeline (mflux's loop), 28 steps at 128×128, median of 5 after warm-up.

Checkpoints (model, EMA, optimizer, RNG states, step) go to ``--work`` every
``--checkpoint-every`` steps; ``--resume`` continues from them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from app.fileio.jsonio import dumps_json

DEFAULT_SEED = 20261130
EMA_DECAY = 0.999


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------------------------
# Codec


def fit_codec_command(args: argparse.Namespace) -> None:
    from app.demo.model import CODEC_FILE
    from app.paths import DEMO_DIR
    from lab.demo.export import fit_pca, save_codec
    from lab.demo.scenes import render_batch, scene_from_seed

    t0 = time.perf_counter()
    scenes = [scene_from_seed(1_000_000 + i) for i in range(args.codec_scenes)]
    images = np.concatenate([render_batch(scenes[i : i + 256]) for i in range(0, len(scenes), 256)])
    codec = fit_pca(images, per_channel=args.per_channel)
    out = args.resources or DEMO_DIR
    out.mkdir(parents=True, exist_ok=True)
    save_codec(codec, out / CODEC_FILE)
    log(
        f"codec: {args.codec_scenes} scenes, kept variance {codec.explained_variance:.5f}, "
        f"scale {codec.scale.min():.4f}–{codec.scale.max():.4f}, "
        f"{time.perf_counter() - t0:.1f} s → {out / CODEC_FILE}"
    )


# --------------------------------------------------------------------------------------------
# Training machinery (MLX imported lazily: the scene pool is built in spawned workers first)


class Trainer:
    """Model, EMA copy, optimizer and the compiled step shared by both phases (same shapes, so
    the distillation phase reuses the compiled graph and its kernels)."""

    def __init__(
        self,
        codec: Any,
        batch: int,
        seed: int,
        compute: str = "float32",
        num_single_layers: int | None = None,
    ) -> None:
        import mlx.core as mx
        import mlx.optimizers as optim
        from mflux.models.common.config.model_config import ModelConfig
        from mlx.nn.utils import value_and_grad
        from mlx.utils import tree_map

        from app.adapters.common import use_precision
        from app.demo.model import DemoModel, image_ids
        from lab.demo.scenes import MAX_TOKENS

        ModelConfig.precision = mx.float32  # the transformer casts its timestep embedding to it
        mx.random.seed(seed)
        self.seed = seed
        self.mx = mx
        self.codec = codec
        self.batch = batch
        self.model = DemoModel(num_single_layers)
        self.ema = DemoModel(num_single_layers)
        self.ema.update(tree_map(lambda p: p, self.model.parameters()))
        # Mixed precision: float32 master weights, optimizer and EMA; the forward and backward
        # pass run on a bfloat16 copy made inside the step (the cast is differentiable).
        compute_dtype = getattr(mx, compute)
        self.compute_dtype = compute
        shadow = DemoModel(num_single_layers) if compute_dtype != mx.float32 else None
        self.opt = optim.AdamW(learning_rate=0.0, betas=[0.9, 0.99], weight_decay=0.01)
        self.opt.init(self.model.trainable_parameters())
        mx.eval(self.model.parameters(), self.ema.parameters(), self.opt.state)
        img = image_ids(64)
        from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder

        txt = Flux2PromptEncoder.prepare_text_ids(mx.zeros((1, MAX_TOKENS, 1)))
        model, ema, opt = self.model, self.ema, self.opt

        def loss_fn(model: Any, tokens: Any, xt: Any, t: Any, target: Any) -> Any:
            net = model
            if shadow is not None:
                shadow.update(tree_map(lambda p: p.astype(compute_dtype), model.parameters()))
                net = shadow
            # Read while tracing: mflux casts the timestep embedding to the model's precision.
            with use_precision(compute_dtype):
                context = net.text_encoder(tokens)
                pred = net.transformer(
                    hidden_states=xt.astype(compute_dtype),
                    encoder_hidden_states=context,
                    timestep=t * 1000.0,
                    img_ids=img,
                    txt_ids=txt,
                    guidance=None,
                )
            return mx.mean(mx.square(pred.astype(mx.float32) - target))

        self.state = [model.state, ema.state, opt.state]

        @partial(mx.compile, inputs=self.state, outputs=self.state)
        def step(tokens: Any, xt: Any, t: Any, target: Any, decay: Any) -> tuple[Any, Any]:
            loss, grads = value_and_grad(model, loss_fn)(model, tokens, xt, t, target)
            grads, grad_norm = optim.clip_grad_norm(grads, 1.0)
            opt.update(model, grads)
            ema.update(
                tree_map(
                    lambda e, p: e + (1.0 - decay) * (p - e), ema.parameters(), model.parameters()
                )
            )
            return loss, grad_norm

        self.step = step
        self.step_count = 0
        self.loss_fn = loss_fn

    def run_step(
        self, tokens: Any, xt: Any, t: Any, target: Any, lr: float, decay: float
    ) -> tuple[Any, Any]:
        mx = self.mx
        self.opt.learning_rate = mx.array(lr, dtype=mx.float32)
        loss, grad_norm = self.step(tokens, xt, t, target, mx.array(decay, dtype=mx.float32))
        mx.async_eval(loss, grad_norm, self.state)
        self.step_count += 1
        return loss, grad_norm

    def init_from(self, weights: Path) -> list[int]:
        """Continue from shipped (float16) weights: model and EMA both start there; the
        optimizer starts fresh (its moments are not shipped), so the schedule warms up again.
        A deeper model than the file's grows (``grow_single_blocks``): returns the added blocks."""
        from mlx.utils import tree_map

        from app.demo.model import grow_single_blocks, read_weights

        added = grow_single_blocks(self.model, read_weights(weights))
        self.ema.update(tree_map(lambda p: p, self.model.parameters()))
        self.mx.eval(self.model.parameters(), self.ema.parameters())
        return added

    def reset_optimizer(self) -> None:
        from mlx.utils import tree_map

        mx = self.mx
        fresh = tree_map(lambda v: mx.zeros_like(v), self.opt.state)
        self.opt.state.update(fresh)  # in place: the compiled step holds this dict
        mx.eval(self.opt.state)

    # -- checkpoints -----------------------------------------------------------------------
    def save_checkpoint(self, folder: Path, phase: str, extra: dict[str, Any]) -> None:
        from mlx.utils import tree_flatten

        mx = self.mx
        folder.mkdir(parents=True, exist_ok=True)
        mx.save_safetensors(
            str(folder / f"{phase}-model.safetensors"), dict(tree_flatten(self.model.parameters()))
        )
        mx.save_safetensors(
            str(folder / f"{phase}-ema.safetensors"), dict(tree_flatten(self.ema.parameters()))
        )
        mx.save_safetensors(
            str(folder / f"{phase}-opt.safetensors"), dict(tree_flatten(self.opt.state))
        )
        info = {"step": self.step_count, **extra}
        (folder / f"{phase}-state.json").write_text(dumps_json(info), encoding="utf-8")

    def load_checkpoint(self, folder: Path, phase: str) -> dict[str, Any] | None:
        from mlx.utils import tree_unflatten

        mx = self.mx
        state_file = folder / f"{phase}-state.json"
        if not state_file.exists():
            return None
        self.model.load_weights(str(folder / f"{phase}-model.safetensors"))
        self.ema.load_weights(str(folder / f"{phase}-ema.safetensors"))
        opt_state = mx.load(str(folder / f"{phase}-opt.safetensors"))
        assert isinstance(opt_state, dict)
        self.opt.state.update(tree_unflatten(list(opt_state.items())))
        info = json.loads(state_file.read_text(encoding="utf-8"))
        self.step_count = int(info["step"])
        # MLX cannot restore a random state, so a resumed run re-seeds from (seed, step): still
        # deterministic, though not the same stream as an uninterrupted run.
        mx.random.seed(self.seed * 1_000_003 + self.step_count)
        mx.eval(self.state)
        return info


def _cosine(progress: float, peak: float, warmup_fraction: float, floor: float = 0.05) -> float:
    if progress < warmup_fraction:
        return peak * max(progress / warmup_fraction, 0.01)
    p = min(1.0, (progress - warmup_fraction) / max(1e-9, 1 - warmup_fraction))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def sample_t(mx: Any, n: int, mu: float) -> Any:
    """Half logit-normal, half mflux's shifted schedule at 128×128 (σ = e^μ/(e^μ + 1/u − 1))."""
    logit_normal = mx.sigmoid(mx.random.normal((n,)))
    u = mx.random.uniform(low=1e-4, high=1.0, shape=(n,))
    shifted = math.exp(mu) / (math.exp(mu) + 1.0 / u - 1.0)
    pick = mx.random.uniform(shape=(n,)) < 0.5
    return mx.clip(mx.where(pick, logit_normal, shifted), 1e-3, 1.0)


# --------------------------------------------------------------------------------------------
# Phase: demo


def prerender(codec: Any, pool: Any, chunk: int = 4096) -> Any:
    """Every pool scene rasterised and encoded once, on the device, kept as float16 latents
    (1M scenes ≈ 16.8 GB): the training step then only gathers a batch."""
    import mlx.core as mx

    from lab.demo.scenes import rasterize

    t0 = time.perf_counter()
    parts = []
    for start in range(0, len(pool), chunk):
        objects = mx.array(pool.objects[start : start + chunk])
        background = mx.array(pool.background[start : start + chunk])
        latents = codec.encode(rasterize(objects, background, mx), xp=mx).astype(mx.float16)
        mx.eval(latents)
        parts.append(latents)
    out = mx.concatenate(parts, axis=0)
    mx.eval(out)
    log(f"prerender: {len(pool)} latents in {time.perf_counter() - t0:.1f} s")
    return out


def train_demo(
    trainer: Trainer, pool: Any, args: argparse.Namespace, report: dict[str, Any]
) -> None:
    import mlx.core as mx
    from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import (
        FlowMatchEulerDiscreteScheduler as Scheduler,
    )

    from lab.demo.scenes import rasterize

    work: Path = args.work
    info = trainer.load_checkpoint(work / "ckpt", "demo") if args.resume else None
    if info and info.get("finished"):
        log(f"demo: finished checkpoint at step {trainer.step_count}, skipping training")
        report["demo_training"] = info.get("report", {})
        return
    history: list[dict[str, float]] = info.get("history", []) if info else []
    trained_seconds = float(info.get("trained_seconds", 0.0)) if info else 0.0
    rng = np.random.default_rng([args.seed, 1, trainer.step_count])
    mu = Scheduler._compute_empirical_mu(image_seq_len=64, num_steps=28)
    latents = prerender(trainer.codec, pool) if args.prerender else None
    from lab.demo.data import BatchSampler, scene_weights

    weights = scene_weights(pool, {"star": args.star_weight})
    draw = BatchSampler(len(pool), weights)
    if weights is not None:
        log(f"demo: scenes with a star drawn {args.star_weight:g}× as often")
    budget = args.demo_seconds
    start = time.perf_counter()
    first_step_seconds = None
    pending: tuple[Any, Any] | None = None
    window: list[float] = []
    norms: list[float] = []
    b = trainer.batch
    log(
        f"demo: training from step {trainer.step_count}, budget {budget:.0f} s, "
        f"max {args.demo_steps} steps, pool {len(pool)}"
    )
    while trainer.step_count < args.demo_steps:
        elapsed = time.perf_counter() - start
        if elapsed > budget:
            break
        idx = draw(rng, b)
        tokens_np = pool.tokens[idx].copy()
        tokens_np[rng.random(b) < args.caption_dropout] = 0
        if latents is not None:
            x0 = latents[mx.array(idx)].astype(mx.float32)
        else:
            images = rasterize(mx.array(pool.objects[idx]), mx.array(pool.background[idx]), mx)
            x0 = trainer.codec.encode(images, xp=mx)
        noise = mx.random.normal(x0.shape)
        t = sample_t(mx, b, mu)
        xt = (1 - t)[:, None, None] * x0 + t[:, None, None] * noise
        progress = max(
            trainer.step_count / args.demo_steps,
            (trained_seconds + elapsed) / max(1.0, trained_seconds + budget),
        )
        lr = _cosine(progress, args.lr, warmup_fraction=0.03)
        decay = min(EMA_DECAY, (1 + trainer.step_count) / (10 + trainer.step_count))
        loss, norm = trainer.run_step(mx.array(tokens_np), xt, t, noise - x0, lr, decay)
        if pending is not None:
            window.append(pending[0].item())
            norms.append(pending[1].item())
        elif first_step_seconds is None:
            mx.eval(loss)
            first_step_seconds = time.perf_counter() - start
            log(f"demo: first step (compile) {first_step_seconds:.1f} s, loss {loss.item():.4f}")
        pending = (loss, norm)
        if trainer.step_count % 100 == 0 and window:
            entry = {
                "step": trainer.step_count,
                "loss": float(np.mean(window)),
                "grad_norm": float(np.mean(norms)),
                "lr": lr,
                "seconds": round(trained_seconds + time.perf_counter() - start, 1),
            }
            history.append(entry)
            window, norms = [], []
            if trainer.step_count % 500 == 0:
                log(f"demo: {entry}")
        if trainer.step_count % args.checkpoint_every == 0:
            trainer.save_checkpoint(
                work / "ckpt",
                "demo",
                {
                    "history": history,
                    "trained_seconds": trained_seconds + time.perf_counter() - start,
                },
            )
    mx.eval(trainer.state)
    total = trained_seconds + time.perf_counter() - start
    steps_timed = max(1, trainer.step_count - 1)
    demo_report = {
        "steps": trainer.step_count,
        "seconds": round(total, 1),
        "first_step_seconds": first_step_seconds,
        "seconds_per_step_after_first": (total - (first_step_seconds or 0)) / steps_timed,
        "batch": b,
        "compute_dtype": trainer.compute_dtype,
        "peak_lr": args.lr,
        "caption_dropout": args.caption_dropout,
        "star_weight": args.star_weight,
        "history": history,
        "pool": len(pool),
        "seed": args.seed,
    }
    report["demo_training"] = demo_report
    trainer.save_checkpoint(
        work / "ckpt",
        "demo",
        {"history": history, "trained_seconds": total, "finished": True, "report": demo_report},
    )
    last = history[-1]["loss"] if history else (window[-1] if window else float("nan"))
    log(f"demo: done, {trainer.step_count} steps in {total:.0f} s, last loss {last:.4f}")


# --------------------------------------------------------------------------------------------
# Phase: turbo


def teacher_ladder(steps_full: int = 28, steps_turbo: int = 4) -> tuple[list[float], list[float]]:
    from lab.demo.evaluate import schedule

    full = [float(s) for s in np.array(schedule(steps_full))]
    turbo = [float(s) for s in np.array(schedule(steps_turbo))]
    ladder = sorted(set(full) | set(turbo), reverse=True)
    return ladder, turbo


def teacher_velocity(
    transformer: Any,
    x: Any,
    context: Any,
    uncond: Any | None,
    sigma: float,
    guidance: float,
    img_ids: Any,
    txt_ids: Any,
) -> Any:
    """The teacher's velocity at ``sigma``; with an uncond context, classifier-free guided
    (``v_u + g·(v_c − v_u)``, as the pipeline samples), both halves in one batched call."""
    import mlx.core as mx

    m = x.shape[0]
    both = uncond is not None
    v = transformer(
        hidden_states=mx.concatenate([x, x]) if both else x,
        encoder_hidden_states=mx.concatenate([context, uncond]) if both else context,
        timestep=mx.full((2 * m if both else m,), sigma * 1000.0),
        img_ids=img_ids,
        txt_ids=txt_ids,
        guidance=None,
    )
    return v[m:] + guidance * (v[:m] - v[m:]) if both else v


def guided_velocity(
    model: Any, tokens: Any, image_tokens: int, guidance: float
) -> Callable[[Any, float], Any]:
    """``velocity(x, sigma)`` of ``model`` for these captions, classifier-free guided when
    ``guidance > 1`` (the empty caption, all-zero tokens, is the uncond); the text encodings and
    position ids are computed once, here."""
    import mlx.core as mx
    from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder

    from app.demo.model import image_ids
    from app.demo.pipeline import float32_precision

    context = model.text_encoder(tokens)
    uncond = model.text_encoder(mx.zeros_like(tokens)) if guidance > 1.0 else None
    img, txt = image_ids(image_tokens), Flux2PromptEncoder.prepare_text_ids(context[:1])

    def velocity(x: Any, sigma: float) -> Any:
        # The sampler's precision: mflux casts the timestep embedding to ModelConfig.precision
        # (bfloat16 by default), which only a Trainer in the same process used to set.
        with float32_precision():
            return teacher_velocity(
                model.transformer, x, context, uncond, sigma, guidance, img, txt
            )

    return velocity


def integrate(
    model: Any,
    x: Any,
    tokens: Any,
    sigmas: list[float],
    guidance: float,
    keep: list[float] | None = None,
) -> Any:
    """Euler from ``sigmas[0]`` down ``sigmas`` with :func:`guided_velocity`. Returns the states
    at the sigmas in ``keep`` stacked on axis 1 (default: only the last state, unstacked)."""
    import mlx.core as mx

    velocity = guided_velocity(model, tokens, x.shape[1], guidance)
    wanted = set(keep or [])
    states = [x] if sigmas[0] in wanted else []
    for s0, s1 in itertools.pairwise(sigmas):
        v = velocity(x, s0)
        x = x + (s1 - s0) * v
        mx.eval(x)
        if s1 in wanted:
            states.append(x)
    return mx.stack(states, axis=1) if keep is not None else x


def student_state_pairs(
    student: Any,
    teacher: Any,
    tokens: Any,
    noise: Any,
    ladder: list[float],
    turbo_sigmas: list[float],
    guidance: float,
    rng: np.random.Generator,
) -> tuple[Any, Any, Any, Any]:
    """Training pairs on the student's own path: for each sample a stride k ∈ {1 … K−1} (K turbo
    strides), the student's state after k strides from ``noise`` (its own Euler steps, no
    guidance, as it samples) and the guided teacher's state at σ_k+1 integrated from there along
    ``ladder``. Returns (x_in, x_out, k, tokens), grouped by k."""
    import mlx.core as mx

    strides = len(turbo_sigmas) - 1
    own = integrate(student, noise, tokens, turbo_sigmas[:-1], 1.0, keep=turbo_sigmas[1:-1])
    k = rng.integers(1, strides, size=noise.shape[0])
    x_in, x_out, ks, toks = [], [], [], []
    for stride in range(1, strides):
        sel = mx.array(np.nonzero(k == stride)[0])
        if sel.size == 0:
            continue
        start = own[sel, stride - 1]
        hi, lo = turbo_sigmas[stride], turbo_sigmas[stride + 1]
        segment = [s for s in ladder if lo <= s <= hi]
        x_in.append(start)
        x_out.append(integrate(teacher, start, tokens[sel], segment, guidance))
        ks.append(mx.full((sel.size,), stride, dtype=mx.int32))
        toks.append(tokens[sel])
    return (
        mx.concatenate(x_in),
        mx.concatenate(x_out),
        mx.concatenate(ks),
        mx.concatenate(toks),
    )


def train_turbo(
    trainer: Trainer, pool: Any, args: argparse.Namespace, report: dict[str, Any]
) -> None:
    import mlx.core as mx
    from mlx.utils import tree_map

    from app.demo.model import DemoModel
    from lab.demo.export import round_to_float16

    # The teacher is the shipped demo: EMA weights rounded to float16. The EMA then becomes the
    # student's, so on-policy targets need the teacher frozen beside it (the same arrays: an
    # update replaces a module's arrays, it never writes into them).
    round_to_float16(trainer.ema)
    teacher = trainer.ema
    frozen_teacher = DemoModel(teacher.num_single_layers)
    frozen_teacher.update(tree_map(lambda p: p, teacher.parameters()))
    ladder, turbo_sigmas = teacher_ladder()
    guidance = args.turbo_guidance
    log(
        f"turbo: teacher ladder {len(ladder) - 1} steps, guidance {guidance:g}, "
        f"turbo sigmas {turbo_sigmas}"
    )
    t0 = time.perf_counter()
    rng = np.random.default_rng([args.seed, 2])
    n = args.trajectories
    states_all, tokens_all = [], []
    chunk = 2048
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        idx = rng.integers(len(pool), size=m)
        tokens = mx.array(pool.tokens[idx])
        # CFG teacher (guidance > 1): the student learns the guided path in one pass, as
        # guidance-distilled models do.
        noise = mx.random.normal((m, 64, 128))
        states_all.append(integrate(teacher, noise, tokens, ladder, guidance, keep=turbo_sigmas))
        tokens_all.append(tokens)
    trajectories = mx.concatenate(states_all, axis=0)  # (n, 5, 64, 128)
    traj_tokens = mx.concatenate(tokens_all, axis=0)
    mx.eval(trajectories, traj_tokens)
    teacher_seconds = time.perf_counter() - t0
    log(f"turbo: {n} teacher trajectories in {teacher_seconds:.1f} s")

    # Student starts from the teacher; fresh optimizer; EMA restarts from the teacher too.
    trainer.model.update(tree_map(lambda p: p, teacher.parameters()))
    trainer.reset_optimizer()
    mx.eval(trainer.state)
    sig = mx.array(turbo_sigmas, dtype=mx.float32)
    b = trainer.batch
    history: list[dict[str, float]] = []
    window: list[float] = []
    pending = None
    start = time.perf_counter()
    first = trainer.step_count
    first_step_seconds: float | None = None
    steps = 0
    # On-policy share of each batch; the batch keeps its size, so the compiled step is reused.
    own_batch = round(args.turbo_on_policy * b)
    own: tuple[Any, ...] | None = None
    refreshes, refresh_seconds = 0, 0.0
    while steps < args.turbo_steps and time.perf_counter() - start < args.turbo_seconds:
        if own_batch and steps > 0 and steps % args.turbo_refresh == 0:
            t_refresh = time.perf_counter()
            parts = []
            for first_sample in range(0, args.turbo_refresh_samples, chunk):
                m = min(chunk, args.turbo_refresh_samples - first_sample)
                parts.append(
                    student_state_pairs(
                        trainer.ema,
                        frozen_teacher,
                        mx.array(pool.tokens[rng.integers(len(pool), size=m)]),
                        mx.random.normal((m, 64, 128)),
                        ladder,
                        turbo_sigmas,
                        guidance,
                        rng,
                    )
                )
                mx.eval(parts[-1])
            own = tuple(mx.concatenate(list(column)) for column in zip(*parts, strict=True))
            mx.eval(own)
            refreshes += 1
            refresh_seconds += time.perf_counter() - t_refresh
        from_own = own_batch if own is not None else 0
        idx = mx.array(rng.integers(n, size=b - from_own))
        k = mx.array(rng.integers(len(turbo_sigmas) - 1, size=b - from_own))
        x_in = trajectories[idx, k]
        x_out = trajectories[idx, k + 1]
        tokens = traj_tokens[idx]
        if own is not None and from_own:
            pick = mx.array(rng.integers(own[0].shape[0], size=from_own))
            x_in = mx.concatenate([x_in, own[0][pick]])
            x_out = mx.concatenate([x_out, own[1][pick]])
            k = mx.concatenate([k, own[2][pick]])
            tokens = mx.concatenate([tokens, own[3][pick]])
        s0, s1 = sig[k], sig[k + 1]
        target = (x_out - x_in) / (s1 - s0)[:, None, None]
        progress = max(steps / args.turbo_steps, (time.perf_counter() - start) / args.turbo_seconds)
        lr = _cosine(progress, args.turbo_lr, warmup_fraction=0.05)
        loss, _ = trainer.run_step(tokens, x_in, s0, target, lr, args.turbo_ema)
        if pending is not None:
            window.append(pending.item())
        elif first_step_seconds is None:
            # The budget is for training: a compile here (no demo phase ran in this process to
            # compile the shared step) must not eat it.
            mx.eval(loss)
            first_step_seconds = time.perf_counter() - start
            start = time.perf_counter()
            log(f"turbo: first step {first_step_seconds:.1f} s")
        pending = loss
        steps += 1
        if steps % 100 == 0 and window:
            history.append(
                {
                    "step": steps,
                    "loss": float(np.mean(window)),
                    "lr": lr,
                    "seconds": round(time.perf_counter() - start, 1),
                }
            )
            window = []
            if steps % 500 == 0:
                log(f"turbo: {history[-1]}")
    mx.eval(trainer.state)
    report["turbo_training"] = {
        "method": "trajectory distillation onto mflux's 4-step sigmas",
        "teacher": "demo EMA weights (float16-rounded), Euler over mflux's 28-step sigmas "
        "merged with the 4-step ones",
        "teacher_guidance": guidance,
        "teacher_ladder": ladder,
        "turbo_sigmas": turbo_sigmas,
        "trajectories": n,
        "teacher_seconds": round(teacher_seconds, 1),
        "steps": steps,
        "seconds": round(time.perf_counter() - start, 1),
        "peak_lr": args.turbo_lr,
        "ema_decay": args.turbo_ema,
        "history": history,
        "compiled_step_reused_from_step": first,
        "first_step_seconds": first_step_seconds,
        "on_policy": {
            "share": own_batch / b,
            "refresh_every": args.turbo_refresh,
            "samples_per_refresh": args.turbo_refresh_samples,
            "refreshes": refreshes,
            "refresh_seconds": round(refresh_seconds, 1),
        }
        if own_batch
        else None,
    }
    log(f"turbo: done, {steps} steps, last loss {history[-1]['loss'] if history else 'n/a'}")


# --------------------------------------------------------------------------------------------
# Phase: evaluate + latency


def evaluate_models(
    models: dict[str, Any], args: argparse.Namespace, report: dict[str, Any]
) -> dict[str, np.ndarray]:
    import mlx.core as mx

    from lab.demo.evaluate import eval_prompts, sample_batch, score_images, to_uint8

    prompts = eval_prompts(args.eval_prompts)
    seeds = list(range(len(prompts)))
    runs = {
        "demo-28": ("demo", 28, 1.0),
        "demo-4-plain": ("demo", 4, 1.0),
        "demo-turbo-4": ("demo-turbo", 4, 1.0),
        "demo-28-cfg3": ("demo", 28, 3.0),
    }
    results: dict[str, Any] = {}
    images_by_run: dict[str, np.ndarray] = {}
    for name, (variant, steps, guidance) in runs.items():
        if variant not in models:
            continue
        t0 = time.perf_counter()
        latents = sample_batch(models[variant], prompts, seeds, steps, guidance)
        decoded = trainer_decode(models["codec"], latents)
        images = to_uint8(decoded)
        scored = score_images(images, prompts)
        results[name] = {
            "variant": variant,
            "steps": steps,
            "guidance": guidance,
            "scores": scored["scores"],
            "seconds": time.perf_counter() - t0,
            "per_prompt": scored["per_prompt"],
        }
        images_by_run[name] = images
        log(f"eval {name}: {scored['scores']}")
        mx.clear_cache()
    report["evaluation"] = {
        "sampler": "batched, mflux's FLUX.2 noise/sigmas/Euler arithmetic",
        "prompts": len(prompts),
        "runs": results,
    }
    return images_by_run


def trainer_decode(codec: Any, latents: Any) -> np.ndarray:
    import mlx.core as mx

    images = codec.decode(latents, 128, 128, xp=mx)
    return np.asarray(mx.clip(images / 2 + 0.5, 0.0, 1.0))


def measure_latency(resources: Path, report: dict[str, Any], variants: list[str]) -> None:
    from app.demo.pipeline import load_demo_pipeline
    from app.variants import get_variant
    from lab.demo.calibrate import demo_guidance
    from lab.demo.evaluate import eval_prompts

    prompt = eval_prompts(1)[0]
    out: dict[str, Any] = {}
    for variant in variants:
        pipe = load_demo_pipeline(variant, resources)
        steps = get_variant(variant).default_steps
        # The variant's default, as the speed bar is stated (runs 1-7 timed guidance 1 here).
        guidance = demo_guidance(variant)
        times = []
        for rep in range(7):
            t0 = time.perf_counter()
            pipe.generate_image(
                seed=rep,
                prompt=prompt,
                num_inference_steps=steps,
                height=128,
                width=128,
                guidance=guidance,
            )
            times.append(time.perf_counter() - t0)
        out[variant] = {
            "steps": steps,
            "guidance": guidance,
            "seconds": times,
            "median_after_warmup": float(np.median(times[2:])),
            "first": times[0],
        }
        log(
            f"latency {variant}: {out[variant]['median_after_warmup']:.3f} s (first {times[0]:.2f})"
        )
    report["latency"] = {
        "sampler": "load_demo_pipeline(...).generate_image, eager, batch 1",
        "prompt": prompt,
        **out,
    }


def _as_array(value: Any) -> Any:
    return value


def save_variant(
    model: Any, folder: Path, variant: str, out: Path | None, metadata: dict[str, str]
) -> None:
    """Full float16 file for the pipeline, plus (for the 16 MiB transfer limit) the same tensors
    split into transformer and text-encoder files under ``out``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from app.demo.model import VARIANT_FILES
    from lab.demo.export import save_weights

    save_weights(model, folder / VARIANT_FILES[variant], metadata)
    if out is not None:
        flat = {k: _as_array(v).astype(mx.float16) for k, v in tree_flatten(model.parameters())}
        for part in ("transformer", "text_encoder"):
            mx.save_safetensors(
                str(out / f"{variant}-{part}.safetensors"),
                {k: v for k, v in flat.items() if k.startswith(part + ".")},
                metadata=metadata,
            )


def run_all(args: argparse.Namespace) -> None:
    import mlx.core as mx

    from app.demo.codec import load_codec
    from app.demo.model import CODEC_FILE, DECODER_FILE, DemoModel, read_weights, single_layers_in
    from app.paths import DEMO_DIR
    from lab.demo.data import build_pool
    from lab.demo.evaluate import contact_sheet
    from lab.demo.export import parameter_count
    from lab.demo.export import round_to_float16 as round16

    work: Path = args.work
    out: Path | None = args.out
    work.mkdir(parents=True, exist_ok=True)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "seed": args.seed,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    t_pool = time.perf_counter()
    pool = build_pool(args.seed, args.pool, workers=args.workers)
    report["pool_seconds"] = round(time.perf_counter() - t_pool, 1)
    log(f"pool: {len(pool)} scenes in {report['pool_seconds']} s; device {mx.default_device()}")
    codec_path = args.codec or DEMO_DIR / CODEC_FILE
    codec = load_codec(codec_path)
    resources = work / "resources"
    resources.mkdir(exist_ok=True)
    (resources / CODEC_FILE).write_bytes(codec_path.read_bytes())
    # The shipped picture decoder, so the run's latency is measured on the shipped pipeline.
    (resources / DECODER_FILE).write_bytes((DEMO_DIR / DECODER_FILE).read_bytes())
    if out is not None:
        (out / CODEC_FILE).write_bytes(codec_path.read_bytes())
    report["codec"] = {
        "file": str(codec_path),
        "per_channel": bool(codec.scale.size > 1),
        "explained_variance": codec.explained_variance,
    }
    single_layers = args.single_layers
    if single_layers is None and args.init_from is not None:
        single_layers = single_layers_in(read_weights(args.init_from))
    trainer = Trainer(codec, args.batch, args.seed, args.compute, single_layers)
    if args.init_from is not None:
        added = trainer.init_from(args.init_from)
        report["init_from"] = str(args.init_from)
        log(f"demo: model and EMA start from {args.init_from} (fresh optimizer)")
        if added:
            report["grown_single_blocks"] = added
            log(f"demo: single blocks {added} added as identities (zero output projection)")
    report["transformer_config"] = trainer.model.transformer_config()
    report["parameters"] = {
        "transformer": parameter_count(trainer.model.transformer),
        "text_encoder": parameter_count(trainer.model.text_encoder),
    }

    def write_report() -> None:
        text = dumps_json(report, indent=1)
        (work / "report.json").write_text(text, encoding="utf-8")
        if out is not None:
            (out / "report.json").write_text(text, encoding="utf-8")

    train_demo(trainer, pool, args, report)
    round16(trainer.ema)
    demo = DemoModel(trainer.model.num_single_layers)
    demo.update(trainer.ema.parameters())
    mx.eval(demo.parameters())
    meta = {"variant": "demo", "seed": str(args.seed), "steps": str(trainer.step_count)}
    save_variant(demo, resources, "demo", out, meta)
    write_report()
    models: dict[str, Any] = {"demo": demo, "codec": codec}
    if args.turbo_steps > 0:
        train_turbo(trainer, pool, args, report)
        round16(trainer.ema)
        turbo = DemoModel(trainer.model.num_single_layers)
        turbo.update(trainer.ema.parameters())
        mx.eval(turbo.parameters())
        save_variant(
            turbo, resources, "demo-turbo", out, {"variant": "demo-turbo", "seed": str(args.seed)}
        )
        models["demo-turbo"] = turbo
        write_report()
    images = evaluate_models(models, args, report)
    write_report()
    if out is not None and images:
        from PIL import Image

        rows = [contact_sheet(imgs[:16], columns=16) for imgs in images.values()]
        Image.fromarray(np.concatenate(rows, axis=0)).save(out / "samples.png")
    measure_latency(resources, report, [v for v in ("demo", "demo-turbo") if v in models])
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    write_report()
    (work / "DONE").write_text("ok", encoding="utf-8")
    log("all done")


def write_config_command(args: argparse.Namespace) -> None:
    """resources/demo/demo.json: architecture, files with sizes and hashes, training summary."""
    import hashlib

    from app.demo.decoder import OVERLAP, WINDOW, load_decoder
    from app.demo.model import (
        CODEC_FILE,
        CONFIG_FILE,
        DECODER_FILE,
        TEXT_CONFIG,
        TRANSFORMER_CONFIG,
        VARIANT_FILES,
        read_weights,
        single_layers_in,
    )
    from app.paths import DEMO_DIR
    from lab.demo.export import parameter_count

    folder = args.resources or DEMO_DIR
    files = {}
    for name in [CODEC_FILE, DECODER_FILE, *VARIANT_FILES.values()]:
        data = (folder / name).read_bytes()
        files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    shipped = read_weights(folder / VARIANT_FILES["demo"])
    decoder = load_decoder(folder / DECODER_FILE)
    transformer = {**TRANSFORMER_CONFIG, "num_single_layers": single_layers_in(shipped)}
    config: dict[str, Any] = {
        "transformer": {"class": "mflux Flux2Transformer", **transformer},
        "text_encoder": {"class": "app.demo.model.TextEncoder", **TEXT_CONFIG},
        "codec": {"class": "app.demo.codec.PCACodec", "patch": 16, "channels": 128},
        "decoder": {
            "class": "app.demo.decoder.SeamlessDecoder",
            "weights": DECODER_FILE,
            "dtype": "float16",
            "window": WINDOW,
            "overlap": OVERLAP,
            "blocks": len(decoder.blocks),
            "parameters": parameter_count(decoder),
        },
        "variants": {v: {"weights": f, "dtype": "float16"} for v, f in VARIANT_FILES.items()},
        "files": files,
    }
    if args.report:
        # One entry per run that made the shipped weights, oldest first (a run continued with
        # --init-from lists its predecessor before it).
        runs = []
        parameters = None
        for path in args.report:
            report = json.loads(path.read_text(encoding="utf-8"))
            parameters = report.get("parameters", parameters)
            demo = {k: v for k, v in report.get("demo_training", {}).items() if k != "history"}
            turbo = {
                k: v
                for k, v in report.get("turbo_training", {}).items()
                if k not in ("history", "teacher_ladder")
            }
            runs.append(
                {
                    "report": path.name,
                    "command": report.get("command"),
                    "init_from": report.get("init_from"),
                    "demo": demo,
                    "demo-turbo": turbo or None,
                    "evaluation": {
                        name: run["scores"]
                        for name, run in report.get("evaluation", {}).get("runs", {}).items()
                    },
                }
            )
        config["training"] = {
            "runs": runs,
            "parameters": parameters,
            "device": args.device,
        }
    elif (folder / CONFIG_FILE).exists():
        # Files changed, not the models: the record of the runs behind the weights stays.
        previous = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        if "training" in previous:
            config["training"] = previous["training"]
    (folder / CONFIG_FILE).write_text(dumps_json(config, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {folder / CONFIG_FILE}")


def _unpack_device_files(source: Path) -> None:
    """Undo what ``device/collect.sh`` does to fit the transfer limits: join ``NAME.part_*``
    (split at 15 MiB) into NAME and unpack ``*-results.tgz`` (report, log, sample sheet)."""
    import tarfile

    for first in sorted(source.glob("*.part_aa")):
        whole = source / first.name.removesuffix(".part_aa")
        parts = sorted(source.glob(f"{whole.name}.part_*"))
        whole.write_bytes(b"".join(part.read_bytes() for part in parts))
    for bundle in sorted(source.glob("*-results.tgz")):
        with tarfile.open(bundle) as tar:
            tar.extractall(source, filter="data")


def install_weights_command(args: argparse.Namespace) -> None:
    """Merge the split files a device run returns into resources/demo (weights, codec) and
    lab/demo/training (logs, reports, samples)."""
    import shutil

    import mlx.core as mx

    from app.demo.model import CODEC_FILE, VARIANT_FILES
    from app.paths import DEMO_DIR
    from lab.paths import DEMO_TRAINING

    source: Path = args.source
    folder = args.resources or DEMO_DIR
    _unpack_device_files(source)
    for variant, name in VARIANT_FILES.items():
        weights: dict[str, Any] = {}
        metadata: dict[str, str] = {}
        for part in ("transformer", "text_encoder"):
            result: Any = mx.load(
                str(source / f"{variant}-{part}.safetensors"), return_metadata=True
            )
            loaded, metadata = result
            weights.update(loaded)
        mx.save_safetensors(str(folder / name), weights, metadata=metadata)
    if (source / CODEC_FILE).exists():
        shutil.copyfile(source / CODEC_FILE, folder / CODEC_FILE)
    training = DEMO_TRAINING if args.resources is None else folder / "training"
    training.mkdir(exist_ok=True)
    for name, target in (
        ("report.json", "report.json"),
        ("train.log", "train.log"),
        ("samples.png", "samples.png"),
    ):
        if (source / name).exists():
            shutil.copyfile(source / name, training / f"{args.run}-{target}")
    log(f"installed {source} into {folder} as {args.run}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=["fit-codec", "all", "write-config", "install-weights"])
    parser.add_argument("--source", type=Path, default=None, help="install-weights: device files")
    parser.add_argument("--run", default="run2", help="install-weights: name for the logs")
    parser.add_argument(
        "--report",
        type=Path,
        action="append",
        default=[],
        help="write-config: training report of each run behind the shipped weights, oldest first",
    )
    parser.add_argument("--device", default="NVIDIA H200 (MLX CUDA backend, mlx 0.32.2)")
    parser.add_argument("--work", type=Path, default=Path(".devwork/demo-train"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--resources", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--codec-scenes", type=int, default=4096)
    parser.add_argument(
        "--per-channel",
        action="store_true",
        help="fit-codec: unit variance per channel instead of one global scale",
    )
    parser.add_argument("--codec", type=Path, default=None, help="codec file (default: shipped)")
    parser.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="all: continue training from these demo weights (e.g. an earlier run's demo file)",
    )
    parser.add_argument(
        "--prerender",
        action="store_true",
        help="encode the whole pool once on the device instead of rasterising every batch",
    )
    parser.add_argument("--pool", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument(
        "--compute",
        choices=["float32", "bfloat16"],
        default="float32",
        help="dtype of the training forward/backward (master weights stay float32)",
    )
    parser.add_argument("--caption-dropout", type=float, default=0.1)
    parser.add_argument(
        "--star-weight",
        type=float,
        default=1.0,
        help="demo: draw scenes that contain a star this many times as often (stars are the "
        "weakest shape: 5%% of clauses after run 3)",
    )
    parser.add_argument("--demo-steps", type=int, default=100_000)
    parser.add_argument("--demo-seconds", type=float, default=430.0)
    parser.add_argument("--checkpoint-every", type=int, default=2000)
    parser.add_argument("--trajectories", type=int, default=24576)
    parser.add_argument("--turbo-steps", type=int, default=3000)
    parser.add_argument("--turbo-seconds", type=float, default=100.0)
    parser.add_argument("--turbo-lr", type=float, default=1e-4)
    parser.add_argument(
        "--turbo-guidance",
        type=float,
        default=1.0,
        help="CFG scale of the teacher trajectories (1: plain; runs 1-4 used 1)",
    )
    parser.add_argument("--turbo-ema", type=float, default=0.998)
    parser.add_argument(
        "--turbo-on-policy",
        type=float,
        default=0.0,
        help="share of each distillation batch from the student's own states (0: teacher only)",
    )
    parser.add_argument("--turbo-refresh", type=int, default=1000, help="on-policy: re-draw every")
    parser.add_argument("--turbo-refresh-samples", type=int, default=8192)
    parser.add_argument("--eval-prompts", type=int, default=100)
    parser.add_argument(
        "--single-layers",
        type=int,
        default=None,
        help="single-stream blocks (default: as --init-from, else 8); more than --init-from's "
        "grows it, the added blocks starting as identities",
    )
    args = parser.parse_args(argv)
    from app.blas import preload_openblas

    preload_openblas()  # CPU runs (toy sizes, tests); a no-op for the device's CUDA backend
    if args.phase == "fit-codec":
        fit_codec_command(args)
    elif args.phase == "write-config":
        write_config_command(args)
    elif args.phase == "install-weights":
        install_weights_command(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
