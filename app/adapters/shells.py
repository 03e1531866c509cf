"""Weight-less "shell" pipelines of mflux's own classes with random weights: what
``teacache-studio bench --random-weights`` times on the real loop, and what the tests run on.
(The tests' probes — a recording gate, installation snapshots — live in ``tests/fakes/probes.py``.)

mflux has no weight-free constructor, so a shell is ``cls.__new__`` plus the attributes the
initializer would set (mflux-internals §4.2): a transformer with random weights (tiny for CPU
tests, the real dimensions for GPU timing), prompt embeddings injected where mflux looks for
them (prompt cache or an instance override of the encode step), and a stub VAE. The real
``generate_image()`` then runs end to end: the same loop, scheduler and callbacks as a real model.
Each family's builder is ``shell(model_name, *, dims, prompts, dtype, seed)`` in its own module of
``app.adapters`` beside its anatomy, built from the helpers here; the family names it and its tiny
and real dimensions (``Family.random_weights``), and ``random_weight_shell`` builds one.

``ModelConfig.precision`` is a class attribute mflux reads at call time; hold
``app.adapters.common.use_precision`` around both the build and the generation (float32 for CPU
tests: bf16 matmuls are slow there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import mlx.core as mx
import numpy as np
from mlx import nn
from mlx.utils import tree_flatten, tree_unflatten

from app.families import Family, ShellCase, load

__all__ = ["DEFAULT_PROMPT", "StubVAE", "case_shell", "random_weight_shell"]

DEFAULT_PROMPT = "a red circle on a blue background"


@dataclass(eq=False)
class StubVAE:
    """Stands in for every family's VAE: records the latents it is asked to decode, and encodes a
    picture (image-to-image) into latents of the family's shape: ``latent_channels`` at
    1/``spatial_scale`` of the picture's size (FLUX.1, Z-Image, Qwen-Image, Krea 2: 16 at 1/8;
    FLUX.2: 32 at 1/8, with the batch-norm statistics its encode path reads; Qwen-Image 2.1: 64 at
    1/16), a fixed function of the pixels, so two runs from one picture start alike.

    ``before_decode`` runs first on each decode, so a test can assert what must already be true
    when mflux reaches the decode (for example: the gate holds no residual any more).
    """

    before_decode: Callable[[], None] | None = None
    decoded: list[mx.array] = field(default_factory=list)
    latent_channels: int = 16
    spatial_scale: int = 8

    def encode(self, image: mx.array) -> mx.array:
        """(1, 3, H, W) in [-1, 1] → (1, C, H/s, W/s): each channel a weighted mean of one colour
        over an s × s block."""
        b, c, h, w = image.shape
        s = self.spatial_scale
        pooled = image.reshape(b, c, h // s, s, w // s, s).mean(axis=(3, 5))
        weights = mx.arange(1, self.latent_channels + 1, dtype=mx.float32) / self.latent_channels
        rgb = mx.arange(self.latent_channels) % c
        return (pooled[:, rgb] * weights.reshape(1, -1, 1, 1)).astype(image.dtype)

    @property
    def bn(self) -> Any:
        """FLUX.2's encode path normalises its patchified latents with the VAE's batch-norm
        running statistics (``bn_normalize_vae_encoded_latents``): here the identity."""
        channels = 4 * self.latent_channels
        return SimpleNamespace(
            running_mean=mx.zeros((channels,)), running_var=mx.ones((channels,)), eps=0.0
        )

    def _image(self, latents: mx.array) -> mx.array:
        if self.before_decode is not None:
            self.before_decode()
        mx.eval(latents)
        self.decoded.append(latents)
        return mx.zeros((1, 3, 8, 8), dtype=mx.float32)

    def decode(self, latents: mx.array) -> mx.array:  # FLUX.1, Z-Image, Qwen-Image (2.1), Krea 2
        return self._image(latents)

    def decode_packed_latents(self, packed: mx.array, tiling_config: Any = None) -> mx.array:
        return self._image(packed)  # FLUX.2, FLUX.3

    @property
    def last(self) -> mx.array:
        return self.decoded[-1]


def _random(key: mx.array, shape: Sequence[int], dtype: mx.Dtype, scale: float = 1.0) -> mx.array:
    return (mx.random.normal(shape=tuple(shape), key=key) * scale).astype(dtype)


_POOL_SIZE = 8_388_617  # prime, so tiled rows of any width never line up


def _pool_run(pool: mx.array, offset: int, size: int) -> mx.array:
    """``size`` values of the pool read from ``offset`` on, wrapping round: the first ``size`` of
    the pool rolled by ``offset`` and tiled, without building the whole roll (a copy of the
    8M-value pool per matrix made a tiny shell's build take seconds per hundred matrices)."""
    runs, start, left = [], offset, size
    while left > 0:
        take = min(left, pool.size - start)
        runs.append(pool[start : start + take])
        start, left = 0, left - take
    return runs[0] if len(runs) == 1 else mx.concatenate(runs)


def _init_weights(module: nn.Module, seed: int, dtype: mx.Dtype, scale: float = 1.0) -> None:
    """Random weights, fast: every matrix is a tiling of one shared random pool at its own
    offset, scaled like MLX's default ``Linear`` init (uniform ±1/√fan_in). Drawing 546M numbers
    one by one (a 1+1-block FLUX.1) takes 10–20 s on the 2-core CPU; this takes about one, and
    builds on the default device (a 4B-parameter model never passes through host memory).
    Vectors (biases, norm weights) keep the module's own initialisation."""
    rng = np.random.default_rng(seed)
    pool = mx.array(rng.uniform(-1.0, 1.0, _POOL_SIZE).astype(np.float32))
    named: list[tuple[str, mx.array]] = tree_flatten(module.parameters())  # type: ignore[assignment]
    for name, value in named:
        if not mx.issubdtype(value.dtype, mx.floating):
            continue
        if value.ndim >= 2:
            flat = _pool_run(pool, int(rng.integers(_POOL_SIZE)), value.size)
            bound = scale / float(np.sqrt(value.shape[-1]))
            weight = (flat.reshape(value.shape) * bound).astype(dtype)
        elif value.dtype != dtype:
            weight = value.astype(dtype)
        else:
            continue
        mx.eval(weight)  # one matrix at a time: temporaries never pile up
        module.update(tree_unflatten([(name, weight)]))
    mx.eval(module.parameters())


def _base_shell(cls: Any, model_config: Any) -> Any:
    from mflux.callbacks.callback_registry import CallbackRegistry

    pipeline = cls.__new__(cls)
    nn.Module.__init__(pipeline)
    pipeline.model_config = model_config
    pipeline.callbacks = CallbackRegistry()
    pipeline.tiling_config = None
    pipeline.bits = None
    pipeline.lora_paths = None
    pipeline.lora_scales = None
    pipeline.vae = StubVAE()
    return pipeline


def _model_config(name: str) -> Any:
    from mflux.models.common.config.model_config import ModelConfig

    return ModelConfig.from_name(model_name=name)


def random_weight_shell(
    family: Family,
    model_name: str | None = None,
    *,
    full: bool = False,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    **extras: Any,
) -> Any:
    """A shell of ``family`` (``Family.random_weights``: its builder and dimensions) for mflux's
    ``model_name`` (the family's default where None): ``full`` at the real dimensions, else tiny.
    ``extras`` go to the family's builder as they are (``text_tokens``, say). ``FamilyError``
    where the family has no shell."""
    spec = family.require_random_weights()
    builder = load(spec.builder)
    return builder(
        model_name or spec.model_name,
        dims=spec.full if full else spec.tiny,
        prompts=prompts,
        dtype=dtype,
        seed=seed,
        **extras,
    )


def case_shell(family: Family, case: ShellCase, *, dtype: mx.Dtype = mx.float32) -> Any:
    """The tiny shell a generic test runs ``case`` of ``family`` on: its model, its seed, and
    embeddings for ``DEFAULT_PROMPT`` and the case's negative prompt."""
    negative = () if case.negative_prompt is None else (case.negative_prompt,)
    return random_weight_shell(
        family, case.model_name, prompts=(DEFAULT_PROMPT, *negative), dtype=dtype, seed=case.seed
    )


# -- prompt tables: instance overrides of a family's encode step that return injected
# embeddings (a family whose loop reads ``prompt_cache`` fills that instead) ------------------


class _Flux2Prompts:
    """Instance override of ``Flux2Klein._encode_prompt_pair``: returns injected embeddings,
    with the negative pair only under CFG (``guidance > 1``), as mflux does."""

    def __init__(self, table: dict[str, tuple[mx.array, mx.array]]) -> None:
        self.table = table

    def __call__(
        self, *, prompt: str, negative_prompt: str | None, guidance: float
    ) -> tuple[mx.array, mx.array, mx.array | None, mx.array | None]:
        embeds, ids = self.table[prompt]
        if guidance is not None and guidance > 1.0 and negative_prompt is not None:
            neg_embeds, neg_ids = self.table[negative_prompt]
            return embeds, ids, neg_embeds, neg_ids
        return embeds, ids, None, None


class _ZImagePrompts:
    """Instance override of ``ZImage._encode_prompts`` (negative only when ``guidance > 1``)."""

    def __init__(self, table: dict[str, mx.array]) -> None:
        self.table = table

    def __call__(
        self, *, prompt: str, negative_prompt: str | None, guidance: float
    ) -> tuple[mx.array, mx.array | None]:
        if guidance <= 1.0:
            return self.table[prompt], None
        negative = negative_prompt if negative_prompt and negative_prompt.strip() else " "
        return self.table[prompt], self.table[negative]


class _Krea2Prompts:
    """Instance override of ``Krea2._encode_prompts``: the negative only where guidance is not 1,
    a single space where none is given, as mflux's ``Krea2PromptEncoder.encode_prompt_pair``."""

    def __init__(self, table: dict[str, mx.array]) -> None:
        self.table = table

    def __call__(
        self, *, prompt: str, negative_prompt: str | None, guidance: float
    ) -> tuple[mx.array, mx.array | None]:
        if guidance == 1.0:
            return self.table[prompt], None
        negative = negative_prompt if negative_prompt and negative_prompt.strip() else " "
        return self.table[prompt], self.table[negative]
