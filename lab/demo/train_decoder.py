"""Train the demo's seamless decoder (``app.demo.decoder``) on the CPU. The latent space, the
transformer and every latent stay as they are: only the picture made from the final latents
changes. Reasoning and measurements: ``lab/demo/training/README.md``, "The seamless decoder".

    python -m lab.demo.train_decoder data --variant demo --samples 960
    python -m lab.demo.train_decoder data --variant demo-turbo --samples 480
    python -m lab.demo.train_decoder eval-latents --variant demo --prompts 200
    python -m lab.demo.train_decoder train --minutes 20 --out resources/demo/decoder.safetensors
    python -m lab.demo.train_decoder score --variant demo

Phases:

``data``         pairs of (latents the model actually produces, the clean picture they should
                 show). A scene from the training distribution (its own seed stream) is encoded
                 with the PCA codec, noised to a σ of the variant's own schedule and denoised by
                 the shipped model conditioned on the scene's caption, with the variant's own
                 sampler (demo: 28-step Euler from σ 0.49–0.74 at guidance 3, every eighth chunk
                 at guidance 1; turbo: its last 1–3 strides, unguided). At those σ the layout and
                 colours are fixed (the scene is still what the caption says), while the last
                 steps leave exactly the token-to-token disagreement that makes the grid: the
                 PCA decode of these latents has the same patch-seam ratio as full generations
                 (2.54 against 2.55). The target is the rendered scene itself.
``eval-latents`` the final latents of the evaluation prompts through the real pipeline (a
                 recording stand-in for the decode), so candidate decoders are scored without
                 sampling again. Development only: the committed figures come from
                 ``python -m lab.demo.evaluate``.
``train``        AdamW on an L1 pixel loss; half of each batch model pairs, half clean PCA
                 encodings of fresh scenes with per-channel Gaussian noise (the model's error
                 scale), so the decoder is exact on clean latents and robust off them.
``score``        a decoder on the cached evaluation latents: checker scores, patch-seam ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from app.blas import preload_openblas

preload_openblas()  # before MLX loads (``python -m`` imports this module before main runs)

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402

from lab.demo.reports import write_json  # noqa: E402

WORK = Path(".devwork/decoder")
DATA_SEED_BASE = 5_000_000  # scene seeds of the decoder's model pairs (the pool uses other streams)
CLEAN_SEED_BASE = 6_000_000  # scene seeds of the clean pairs drawn during training
HELDOUT_SEED_BASE = 7_000_000  # scene seeds of the held-out model pairs
CHUNK = 16
DECODER_FORMAT = "teacache-studio demo seamless decoder"
DEMO_START_STEPS = (19, 20, 21, 22, 23, 24)  # σ 0.735 … 0.494 of the 28-step schedule
TURBO_START_STEPS = (2, 3)  # σ 0.875, 0.701 of the 4-step schedule (from 0.955 it redraws)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------------------------
# Model pairs


def model_pairs(
    variant: str,
    first_seed: int,
    n: int,
    chunk_index: int,
    start_steps: tuple[int, ...],
    resources: Path | None = None,
) -> dict[str, np.ndarray]:
    """One chunk of (model latents, target picture) pairs; see the module docstring."""
    from app.demo.codec import load_codec
    from app.demo.model import CODEC_FILE, VARIANT_FILES
    from app.demo.pipeline import float32_precision
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import schedule
    from lab.demo.scenes import caption, render_batch, scene_from_seed, tokenize
    from lab.demo.train import integrate

    folder = resources or DEMO_DIR
    model = _cached_model(folder / VARIANT_FILES[variant])
    codec = load_codec(folder / CODEC_FILE)
    scenes = [scene_from_seed(first_seed + i) for i in range(n)]
    images = render_batch(scenes)
    x0 = mx.array(codec.encode(images).astype(np.float32))
    tokens = mx.array([tokenize(caption(s)) for s in scenes], dtype=mx.int32)
    if variant == "demo":
        sigmas = [float(s) for s in np.array(schedule(28))]
        guidance = 1.0 if chunk_index % 8 == 7 else 3.0
    else:
        sigmas = [float(s) for s in np.array(schedule(4))]
        guidance = 1.0
    start = start_steps[chunk_index % len(start_steps)]
    noise = mx.random.normal(x0.shape, key=mx.random.key(first_seed))
    sigma = sigmas[start]
    with float32_precision():
        latents = integrate(
            model, (1 - sigma) * x0 + sigma * noise, tokens, sigmas[start:], guidance
        )
    return {
        "latents": np.asarray(latents, dtype=np.float32).astype(np.float16),
        "targets": np.round(images * 255).astype(np.uint8),
        "seeds": np.arange(first_seed, first_seed + n),
        "start_sigma": np.full(n, sigma, dtype=np.float32),
        "guidance": np.full(n, guidance, dtype=np.float32),
    }


_MODELS: dict[Path, Any] = {}


def _cached_model(path: Path) -> Any:
    from app.demo.model import load_model

    if path not in _MODELS:
        _MODELS[path] = load_model(path)
    return _MODELS[path]


def data_command(args: argparse.Namespace) -> None:
    base = HELDOUT_SEED_BASE if args.heldout else DATA_SEED_BASE
    offset = 0 if args.variant == "demo" else 500_000
    folder = args.work / ("heldout" if args.heldout else "pairs")
    folder.mkdir(parents=True, exist_ok=True)
    default = DEMO_START_STEPS if args.variant == "demo" else TURBO_START_STEPS
    start_steps = tuple(args.start_steps or default)
    first = args.first_chunk
    for index in range(first, first + (args.samples + CHUNK - 1) // CHUNK):
        path = folder / f"{args.variant}-{index:04d}.npz"
        if path.exists():
            continue  # resumable: chunks are seeded by their index
        t0 = time.perf_counter()
        seed = base + offset + index * CHUNK
        pairs = model_pairs(args.variant, seed, CHUNK, index, start_steps)
        np.savez(path, **pairs)  # type: ignore[arg-type]
        log(f"{path.name}: σ {pairs['start_sigma'][0]:.3f}, {time.perf_counter() - t0:.1f} s")


def load_pairs(folder: Path, variants: tuple[str, ...] = ("demo", "demo-turbo")) -> dict[str, Any]:
    # Known quirk, kept so the committed command reproduces the shipped decoder byte for byte:
    # "demo-*" also matches "demo-turbo-*", so the turbo's pairs come twice in the default (and
    # are among ("demo",)'s). Fix it with the next refit, and measure again.
    parts = [np.load(p) for v in variants for p in sorted(folder.glob(f"{v}-*.npz"))]
    if not parts:
        raise SystemExit(f"no model pairs in {folder}: run the data phase first")
    return {k: np.concatenate([p[k] for p in parts]) for k in ("latents", "targets")}


# --------------------------------------------------------------------------------------------
# Evaluation latents (development)


class RecordingVAE:
    """Stands in for the pipeline's decoder: keeps the packed latents it is handed, returns a
    blank picture (development only; the committed evaluation decodes for real)."""

    def __init__(self) -> None:
        self.latents: list[np.ndarray] = []

    def decode_packed_latents(self, packed: mx.array, tiling_config: Any = None) -> mx.array:
        batch, channels, h, w = packed.shape
        tokens = packed.transpose(0, 2, 3, 1).reshape(batch, h * w, channels)
        self.latents.append(np.asarray(tokens.astype(mx.float32)))
        return mx.zeros((batch, 3, h * 16, w * 16))


def eval_latents_command(args: argparse.Namespace) -> None:
    from app.demo.pipeline import load_demo_pipeline
    from app.variants import get_variant
    from lab.demo.calibrate import demo_guidance
    from lab.demo.evaluate import eval_prompts

    pipe = load_demo_pipeline(args.variant)
    recorder = RecordingVAE()
    pipe.vae = recorder  # type: ignore[assignment]
    steps = args.steps or get_variant(args.variant).default_steps
    guidance = demo_guidance(args.variant)
    prompts = eval_prompts(args.prompts, args.first_prompt)
    t0 = time.perf_counter()
    for seed, prompt in enumerate(prompts, start=args.first_prompt):
        pipe.generate_image(
            seed=seed,
            prompt=prompt,
            num_inference_steps=steps,
            height=128,
            width=128,
            guidance=guidance,
        )
    name = f"{args.variant}-{steps}" + (f"-from{args.first_prompt}" if args.first_prompt else "")
    args.work.mkdir(parents=True, exist_ok=True)
    np.savez(
        args.work / f"eval-latents-{name}.npz",
        latents=np.concatenate(recorder.latents),
        prompts=np.array(prompts),
    )
    log(f"eval latents {name}: {len(prompts)} prompts, {time.perf_counter() - t0:.0f} s")


# --------------------------------------------------------------------------------------------
# Training


def init_from_codec(decoder: Any, codec: Any) -> None:
    """Start as the PCA decode: the first convolution passes the latents through (its centre tap
    the identity), every residual block adds zero, and each token paints its own patch's PCA
    reconstruction in the middle of its window, divided by the Hann weight there (the neighbours
    paint nothing there yet, so the blend returns the PCA pixels — exactly, except on the outer
    8 pixels of the image, where the blend's normalisation undoes the division: too bright by up
    to 1/0.55 there until training corrects it)."""
    from app.demo.codec import PATCH
    from app.demo.decoder import WINDOW, hann_window

    hidden = channels = codec.basis.shape[1]
    for block in decoder.blocks:
        block.conv2.weight = mx.zeros_like(block.conv2.weight)
        block.conv2.bias = mx.zeros_like(block.conv2.bias)
    lo, hi = (WINDOW - PATCH) // 2, (WINDOW + PATCH) // 2
    hann = hann_window()[lo:hi, lo:hi, None]  # (16, 16, 1)
    # (768, 128): pixel (row, col, colour) of the patch from each latent channel, then / Hann
    pixels = (codec.basis * codec.scale[None, :]).reshape(PATCH, PATCH, 3, channels)
    weight = np.zeros((WINDOW, WINDOW, 3, hidden), dtype=np.float32)
    weight[lo:hi, lo:hi, :, :channels] = pixels / hann[..., None]
    bias = np.zeros((WINDOW, WINDOW, 3), dtype=np.float32)
    bias[lo:hi, lo:hi] = codec.mean.reshape(PATCH, PATCH, 3) / hann
    decoder.head.weight = mx.array(weight.reshape(-1, hidden))
    decoder.head.bias = mx.array(bias.reshape(-1))
    mx.eval(decoder.parameters())


def model_error_scale(latents: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """Per-channel standard deviation of (model latents − clean encoding): the noise scale of the
    clean pairs' augmentation."""
    return (latents.astype(np.float32) - clean).reshape(-1, latents.shape[-1]).std(0)


def clean_pool(codec: Any, n: int, work: Path) -> tuple[np.ndarray, np.ndarray]:
    """``n`` fresh scenes (their own seed stream) rendered and encoded, cached under ``work``."""
    from lab.demo.scenes import render_batch, scene_from_seed

    path = work / f"clean-{n}.npz"
    if path.exists():
        data = np.load(path)
        return data["latents"], data["targets"]
    images = np.concatenate(
        [
            render_batch([scene_from_seed(CLEAN_SEED_BASE + i) for i in range(s, min(s + 256, n))])
            for s in range(0, n, 256)
        ]
    )
    latents = codec.encode(images).astype(np.float32)
    targets = np.round(images * 255).astype(np.uint8)
    np.savez(path, latents=latents, targets=targets)
    return latents, targets


def decode_all(decoder: Any, latents: np.ndarray, chunk: int = 64) -> np.ndarray:
    """uint8 pictures of (N, 64, 128) latents, as the pipeline makes them."""
    out = []
    for s in range(0, len(latents), chunk):
        images = decoder(mx.array(latents[s : s + chunk].astype(np.float32)), 128, 128)
        out.append(np.asarray(mx.clip(images / 2 + 0.5, 0.0, 1.0)))
    return np.round(np.concatenate(out) * 255).astype(np.uint8)


def pair_metrics(pictures: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    from lab.demo.evaluate import patch_seam_ratio

    diff = pictures.astype(np.float32) - targets.astype(np.float32)
    return {
        "mae_255": float(np.abs(diff).mean()),
        "patch_seam_ratio": patch_seam_ratio(pictures),
    }


# --------------------------------------------------------------------------------------------
# The closed-form fit


QUARTERS = ((0, 0), (0, 1), (1, 0), (1, 1))  # the decoder's tap order: (row half, column half)


def _cell_kind(index: int, cells: int) -> int:
    """0: the first cell of an axis (only the first token's upper half reaches it), 2: the last
    (only the last token's lower half), 1: inside (two tokens)."""
    return 0 if index == 0 else 2 if index == cells - 1 else 1


def cell_statistics(
    latents: np.ndarray, targets: np.ndarray, edge: bool = False, chunk: int = 256
) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Per kind of cell (inside, edge, corner): Σ FᵀF and Σ FᵀY over every image and cell of the
    half-patch-shifted grid, F a cell's four tokens' latents (plus 1 for the bias, in the tap
    order; zero where no token is), Y its 16×16×3 target pixels in [−1, 1] (zero outside the
    image). float64."""
    from app.demo.codec import GRID, PATCH

    cells = GRID + 1
    width = CHANNELS_WITH_BIAS * len(QUARTERS)
    sums: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for start in range(0, len(latents), chunk):
        lat = latents[start : start + chunk].astype(np.float64)
        n = len(lat)
        f = np.concatenate([lat, np.ones((n, GRID * GRID, 1))], axis=-1)
        f = np.pad(
            f.reshape(n, GRID, GRID, -1),
            [(0, 0), (1, 1), (1, 1), (0, 0)],
            mode="edge" if edge else "constant",
        )
        half = PATCH // 2
        y = targets[start : start + chunk].astype(np.float64) / 127.5 - 1.0
        y = np.pad(y, [(0, 0), (half, half), (half, half), (0, 0)])
        for i in range(cells):
            for j in range(cells):
                features = np.concatenate(
                    [f[:, i + 1 - a, j + 1 - d] for a, d in QUARTERS], axis=-1
                )
                pixels = y[:, i * PATCH : (i + 1) * PATCH, j * PATCH : (j + 1) * PATCH]
                kind = (_cell_kind(i, cells), _cell_kind(j, cells))
                gram, cross = sums.get(kind, (np.zeros((width, width)), np.zeros((width, 768))))
                sums[kind] = (
                    gram + features.T @ features,
                    cross + features.T @ pixels.reshape(n, -1),
                )
    return sums


CHANNELS_WITH_BIAS = 129


def _axis_weights(kind: int, offset: int, edge: bool = False) -> np.ndarray | None:
    """The normalised Hann weights of a cell's two tokens along one axis at ``offset`` (0–15)
    into the cell, or None where that pixel is outside the image."""
    from app.demo.decoder import hann_1d

    present = (1.0, 1.0) if edge else {0: (1.0, 0.0), 1: (1.0, 1.0), 2: (0.0, 1.0)}[kind]
    if (kind == 0 and offset < 8) or (kind == 2 and offset >= 8):
        return None
    hann = hann_1d()
    weights = np.array([hann[a * 16 + offset] * present[a] for a in (0, 1)])
    return weights / weights.sum()


def solve_paintings(
    model: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
    clean: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
    clean_weight: float,
    ridge: np.ndarray,
    noise: np.ndarray | None = None,
    edge: bool = False,
    solo: float = 0.0,
) -> np.ndarray:
    """(32, 32, 3, 129) paintings (weights per latent channel, then the bias) minimising the
    squared pixel error of the decoder's blend over the model pairs plus ``clean_weight`` × the
    clean pairs (each set's sums divided by its own size), plus ``ridge`` (per unknown) on the
    paintings. ``noise`` (128 variances) adds what Gaussian noise of that variance on every
    latent would add to the squared error in expectation (its variance times the squared
    blend weight on each painting entry). One 516-unknown system per pixel offset in a cell:
    the blend at offset (r, c) uses exactly four painting entries, (r, c) of quarter (0, 0) and
    so on."""
    from app.demo.decoder import WINDOW

    width = CHANNELS_WITH_BIAS * len(QUARTERS)
    paintings = np.zeros((WINDOW, WINDOW, 3, CHANNELS_WITH_BIAS))
    half = WINDOW // 2
    for r in range(half):
        for c in range(half):
            system = np.diag(ridge)
            rhs = np.zeros((width, 3))
            for kind, (gram, cross) in model.items():
                rows, cols = _axis_weights(kind[0], r, edge), _axis_weights(kind[1], c, edge)
                if rows is None or cols is None:
                    continue
                clean_gram, clean_cross = clean[kind]
                scale = np.repeat([rows[a] * cols[d] for a, d in QUARTERS], CHANNELS_WITH_BIAS)
                g = gram + clean_weight * clean_gram
                if noise is not None:
                    # E[(F + N)ᵀ(F + N)] = FᵀF + diag(count · σ²): count = cells with the token
                    counts = np.diag(g)[CHANNELS_WITH_BIAS - 1 :: CHANNELS_WITH_BIAS]
                    padded = np.append(noise, 0.0)
                    g = g + np.diag(np.concatenate([c * padded for c in counts]))
                b = (cross + clean_weight * clean_cross).reshape(width, half, half, 3)[:, r, c]
                system += scale[:, None] * g * scale[None, :]
                rhs += scale[:, None] * b
                if solo:
                    # each painting on its own (weight one) should also draw its part of the cell
                    for q in range(len(QUARTERS)):
                        block = slice(q * CHANNELS_WITH_BIAS, (q + 1) * CHANNELS_WITH_BIAS)
                        if scale[block][0] > 0:
                            system[block, block] += solo * g[block, block]
                            rhs[block] += solo * b[block]
            solution = np.linalg.solve(system, rhs)
            for q, (a, d) in enumerate(QUARTERS):
                block = solution[q * CHANNELS_WITH_BIAS : (q + 1) * CHANNELS_WITH_BIAS]
                paintings[a * half + r, d * half + c] = block.T
    return paintings


def float16_weights(module: nn.Module) -> dict[str, mx.array]:
    """The module's parameters as the float16 arrays its file holds."""
    from mlx.utils import tree_flatten

    weights = {}
    for key, value in tree_flatten(module.parameters()):
        assert isinstance(value, mx.array)
        weights[key] = value.astype(mx.float16)
    return weights


def fit_command(args: argparse.Namespace) -> None:
    """The closed-form decoder: paintings from :func:`solve_paintings`, residual blocks that add
    nothing yet (``train --init`` refines them)."""

    from app.demo.codec import load_codec
    from app.demo.decoder import SeamlessDecoder
    from app.demo.model import CODEC_FILE
    from app.paths import DEMO_DIR

    t0 = time.perf_counter()
    mx.random.seed(args.seed)
    codec = load_codec(DEMO_DIR / CODEC_FILE)
    pairs = load_pairs(args.work / "pairs")
    clean_of_pairs = codec.encode(pairs["targets"].astype(np.float32) / 255.0).astype(np.float32)
    demo = load_pairs(args.work / "pairs", ("demo",))
    error = model_error_scale(
        demo["latents"], codec.encode(demo["targets"].astype(np.float32) / 255.0)
    )
    extra_latents, extra_targets = clean_pool(codec, args.clean_scenes, args.work)
    model = cell_statistics(pairs["latents"], pairs["targets"], args.edge)
    clean = cell_statistics(
        np.concatenate([clean_of_pairs, extra_latents]),
        np.concatenate([pairs["targets"], extra_targets]),
        args.edge,
    )
    n_model, n_clean = len(pairs["latents"]), len(clean_of_pairs) + len(extra_latents)
    model = {k: (g / n_model, b / n_model) for k, (g, b) in model.items()}
    clean = {k: (g / n_clean, b / n_clean) for k, (g, b) in clean.items()}
    paintings = solve_paintings(
        model,
        clean,
        args.clean_weight,
        np.full(CHANNELS_WITH_BIAS * len(QUARTERS), args.ridge),
        args.noise_ridge * error**2 if args.noise_ridge > 0 else None,
        args.edge,
        args.solo,
    )
    decoder = SeamlessDecoder(args.width, args.blocks, edge=args.edge)
    init_from_codec(decoder, codec)  # blocks that add nothing
    flat = paintings.reshape(-1, CHANNELS_WITH_BIAS)
    decoder.head.weight = mx.array(flat[:, :-1].astype(np.float32))
    decoder.head.bias = mx.array(flat[:, -1].astype(np.float32))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    weights = float16_weights(decoder)
    mx.save_safetensors(str(args.out), weights, metadata={"format": DECODER_FORMAT})
    log(
        f"fit {n_model} model pairs, {n_clean} clean: {time.perf_counter() - t0:.0f} s → {args.out}"
    )
    if args.report is not None:
        from app.demo.decoder import load_decoder

        shipped = load_decoder(args.out)  # the float16 file, as the app loads it
        heldout = load_pairs(args.work / "heldout")
        pca = PCADecoder(codec)
        report = {
            "command": "python -m lab.demo.train_decoder " + " ".join(args.argv),
            "model_pairs": {
                v: len(load_pairs(args.work / "pairs", (v,))["latents"])
                for v in ("demo", "demo-turbo")
            },
            "clean_pairs": n_clean,
            "heldout_pairs": len(heldout["latents"]),
            "blocks": args.blocks,
            "ridge": args.ridge,
            "clean_weight": args.clean_weight,
            "bytes": args.out.stat().st_size,
            "heldout": {
                "pca": pair_metrics(decode_all(pca, heldout["latents"]), heldout["targets"]),
                "seamless": pair_metrics(
                    decode_all(shipped, heldout["latents"]), heldout["targets"]
                ),
            },
            "seconds": round(time.perf_counter() - t0, 1),
        }
        write_json(args.report, report)
        log(f"wrote {args.report}: held out {report['heldout']}")


class PCADecoder:
    """The PCA codec's per-patch decode behind the decoder's call signature."""

    def __init__(self, codec: Any) -> None:
        self.codec = codec

    def __call__(self, latents: mx.array, height: int, width: int) -> mx.array:
        return self.codec.decode(latents, height, width, xp=mx)


def train_command(args: argparse.Namespace) -> None:
    import mlx.optimizers as optim
    from mlx.nn.utils import value_and_grad

    from app.demo.codec import load_codec
    from app.demo.decoder import SeamlessDecoder
    from app.demo.model import CODEC_FILE
    from app.paths import DEMO_DIR
    from lab.demo.export import parameter_count, round_to_float16

    t_start = time.perf_counter()
    mx.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    codec = load_codec(DEMO_DIR / CODEC_FILE)
    pairs = load_pairs(args.work / "pairs")
    heldout = load_pairs(args.work / "heldout")
    model_latents = pairs["latents"].astype(np.float32)
    model_targets = pairs["targets"]
    targets_clean = codec.encode(model_targets.astype(np.float32) / 255.0).astype(np.float32)
    error_scale = model_error_scale(model_latents, targets_clean)
    extra_latents, extra_targets = clean_pool(codec, args.clean_scenes, args.work)
    clean_latents = np.concatenate([targets_clean, extra_latents])
    clean_targets = np.concatenate([model_targets, extra_targets])
    log(
        f"model pairs {len(model_latents)}, clean {len(clean_latents)}, held out "
        f"{len(heldout['latents'])}; model error per channel {error_scale.min():.3f}–"
        f"{error_scale.max():.3f} ({time.perf_counter() - t_start:.0f} s)"
    )

    if args.init is not None:
        from app.demo.decoder import load_decoder

        decoder = load_decoder(args.init)
    else:
        decoder = SeamlessDecoder(args.width, args.blocks)
        init_from_codec(decoder, codec)
    parameters = parameter_count(decoder)
    base = pair_metrics(decode_all(decoder, heldout["latents"]), heldout["targets"])
    log(f"{parameters} parameters; at init (= the PCA decode) held out {base}")

    schedule = optim.cosine_decay(args.lr, args.train_steps, args.lr * 0.02)
    warm = optim.linear_schedule(args.lr * 0.05, args.lr, max(1, args.train_steps // 50))
    lr = optim.join_schedules([warm, schedule], [max(1, args.train_steps // 50)])
    optimizer = optim.AdamW(learning_rate=lr, weight_decay=args.weight_decay)

    def loss_fn(model: Any, latents: mx.array, targets: mx.array) -> mx.array:
        return mx.abs(model(latents, 128, 128) - targets).mean()

    state = [decoder.state, optimizer.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(latents: mx.array, targets: mx.array) -> mx.array:
        loss, grads = value_and_grad(decoder, loss_fn)(decoder, latents, targets)
        optimizer.update(decoder, grads)
        return loss

    half = args.batch // 2
    history: list[dict[str, Any]] = []
    losses: list[float] = []
    t0 = time.perf_counter()
    for i in range(args.train_steps):
        m = rng.integers(len(model_latents), size=half)
        c = rng.integers(len(clean_latents), size=args.batch - half)
        amount = rng.uniform(0.0, args.noise, size=(len(c), 1, 1)).astype(np.float32)
        noisy = (
            clean_latents[c]
            + amount
            * rng.standard_normal((len(c), *clean_latents.shape[1:]), dtype=np.float32)
            * error_scale
        )
        latents = mx.array(np.concatenate([model_latents[m], noisy]))
        targets = mx.array(
            np.concatenate([model_targets[m], clean_targets[c]]).astype(np.float32) / 127.5 - 1.0
        )
        loss = step(latents, targets)
        mx.eval(state)
        losses.append(float(loss))
        if (i + 1) % args.report_every == 0 or i + 1 == args.train_steps:
            metrics = pair_metrics(decode_all(decoder, heldout["latents"]), heldout["targets"])
            row = {
                "step": i + 1,
                "loss": float(np.mean(losses[-args.report_every :])),
                "seconds": time.perf_counter() - t0,
                **{f"heldout_{k}": v for k, v in metrics.items()},
            }
            history.append(row)
            log(
                f"step {i + 1}: loss {row['loss']:.4f}, held out MAE {metrics['mae_255']:.2f}/255,"
                f" seams {metrics['patch_seam_ratio']:.3f} ({row['seconds']:.0f} s)"
            )
    round_to_float16(decoder)
    final = pair_metrics(decode_all(decoder, heldout["latents"]), heldout["targets"])
    clean_check = pair_metrics(decode_all(decoder, extra_latents[:256]), extra_targets[:256])
    log(f"float16: held out {final}; clean encodings {clean_check}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    weights = float16_weights(decoder)
    mx.save_safetensors(
        str(args.out),
        weights,
        metadata={"format": DECODER_FORMAT},
    )
    report = {
        "command": "python -m lab.demo.train_decoder " + " ".join(args.argv),
        "parameters": parameters,
        "width": args.width,
        "blocks": args.blocks,
        "model_pairs": len(model_latents),
        "clean_pairs": len(clean_latents),
        "heldout_pairs": len(heldout["latents"]),
        "model_error_scale": [float(v) for v in error_scale],
        "heldout_at_init_pca_decode": base,
        "heldout_float16": final,
        "clean_encodings_float16": clean_check,
        "history": history,
        "train_seconds": time.perf_counter() - t0,
        "bytes": args.out.stat().st_size,
    }
    write_json(args.out.with_suffix(".report.json"), report)
    log(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


# --------------------------------------------------------------------------------------------
# Scoring on the cached evaluation latents (development)


def score_command(args: argparse.Namespace) -> None:
    from app.demo.codec import load_codec
    from app.demo.decoder import load_decoder
    from app.demo.model import CODEC_FILE
    from app.paths import DEMO_DIR
    from lab.demo.evaluate import patch_seam_ratio, score_images, to_uint8

    steps = args.steps or (28 if args.variant == "demo" else 4)
    data = np.load(args.work / f"eval-latents-{args.variant}-{steps}.npz")
    latents, prompts = data["latents"], [str(p) for p in data["prompts"]]
    if args.decoder is None:
        codec = load_codec(DEMO_DIR / CODEC_FILE)
        pictures = to_uint8(np.clip(codec.decode(latents) / 2 + 0.5, 0, 1))
    else:
        pictures = decode_all(load_decoder(args.decoder), latents)
    out: dict[str, Any] = {"variant": args.variant, "steps": steps, "decoder": str(args.decoder)}
    for name, lo, hi in (("reported", 0, 100), ("heldout", 100, 200)):
        if len(prompts) >= hi:
            scored = score_images(pictures[lo:hi], prompts[lo:hi])
            out[name] = {**scored["scores"], "patch_seam_ratio": patch_seam_ratio(pictures[lo:hi])}
    if args.sheet is not None:
        from PIL import Image

        from lab.demo.evaluate import contact_sheet

        Image.fromarray(contact_sheet(pictures[: args.sheet_count], columns=8)).save(args.sheet)
    print({k: v for k, v in out.items()})


# --------------------------------------------------------------------------------------------
# Before / after pictures


CROP_PROMPT = "two red circles and a blue star on a yellow background"  # the window's default
CROP_SEED = 42  # the window's default seed


def crops_command(args: argparse.Namespace) -> None:
    """The window's default demo picture (its prompt, seed 42, 28 steps, guidance 3) through the
    real pipeline, decoded both ways: ``decoder-before-after.png`` side by side at 100 %
    (PCA per-patch decode | seamless decoder), ``decoder-before-after-200.png`` the upper left
    64×64 of each at 200 % (nearest neighbour, so every pixel is a 2×2 block)."""
    from PIL import Image

    from app.demo.pipeline import load_demo_pipeline
    from lab.paths import DEMO_RESULTS

    pipe = load_demo_pipeline("demo")
    decoder = pipe.vae.decoder  # type: ignore[attr-defined]
    pictures = []
    for shipped in (None, decoder):
        pipe.vae.decoder = shipped  # type: ignore[attr-defined]
        result = pipe.generate_image(
            seed=CROP_SEED,
            prompt=CROP_PROMPT,
            num_inference_steps=28,
            height=128,
            width=128,
            guidance=3.0,
        )
        pictures.append(np.asarray(result.image.convert("RGB")))
    gap = np.full((128, 4, 3), 255, dtype=np.uint8)
    folder = args.results or DEMO_RESULTS
    Image.fromarray(np.concatenate([pictures[0], gap, pictures[1]], axis=1)).save(
        folder / "decoder-before-after.png"
    )
    zoomed = [np.kron(p[:64, :64], np.ones((2, 2, 1), dtype=np.uint8)) for p in pictures]
    Image.fromarray(np.concatenate([zoomed[0], gap, zoomed[1]], axis=1)).save(
        folder / "decoder-before-after-200.png"
    )
    from lab.demo.evaluate import patch_seam_ratio

    before, after = (patch_seam_ratio(p[None]) for p in pictures)
    log(f"patch-seam ratio of this picture: PCA {before:.2f}, seamless {after:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=["data", "eval-latents", "fit", "train", "score", "crops"])
    parser.add_argument("--variant", default="demo", choices=["demo", "demo-turbo"])
    parser.add_argument("--samples", type=int, default=960)
    parser.add_argument("--heldout", action="store_true", help="data: the held-out seed stream")
    parser.add_argument(
        "--start-steps",
        type=lambda text: [int(v) for v in text.split(",")],
        default=None,
        help="data: steps of the variant's schedule to start from, chunk by chunk in turn",
    )
    parser.add_argument("--first-chunk", type=int, default=0, help="data: index of the first")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--first-prompt", type=int, default=0, help="eval-latents: first prompt")
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--out", type=Path, default=WORK / "decoder.safetensors")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--train-steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument(
        "--noise", type=float, default=1.5, help="clean pairs: noise up to this × the model's error"
    )
    parser.add_argument("--clean-scenes", type=int, default=1024)
    parser.add_argument("--init", type=Path, default=None, help="train: start from this decoder")
    parser.add_argument("--ridge", type=float, default=1e-4, help="fit: on every painting entry")
    parser.add_argument(
        "--noise-ridge", type=float, default=0.0, help="fit: × the demo's latent error variance"
    )
    parser.add_argument("--clean-weight", type=float, default=0.5, help="fit: of the clean pairs")
    parser.add_argument("--solo", type=float, default=0.0, help="fit: each painting alone")
    parser.add_argument("--edge", action="store_true", help="fit: pad the token grid by its edge")
    parser.add_argument("--report-every", type=int, default=250)
    parser.add_argument("--report", type=Path, default=None, help="fit: write its record here")
    parser.add_argument(
        "--decoder", type=Path, default=None, help="score: decoder file (none: PCA)"
    )
    parser.add_argument("--sheet", type=Path, default=None, help="score: contact sheet PNG")
    parser.add_argument("--sheet-count", type=int, default=16)
    parser.add_argument("--results", type=Path, default=None, help="crops: folder (lab results)")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.phase == "data":
        data_command(args)
    elif args.phase == "eval-latents":
        eval_latents_command(args)
    elif args.phase == "fit":
        fit_command(args)
    elif args.phase == "train":
        train_command(args)
    elif args.phase == "score":
        score_command(args)
    else:
        crops_command(args)


if __name__ == "__main__":
    main()
