"""Weight-less "shell" pipelines of mflux's own classes with random weights: what
``teacache-studio bench --random-weights`` times on the real loop, and what the tests run on.
(The tests' probes — a recording gate, installation snapshots — live in ``tests/fakes/probes.py``.)

mflux has no weight-free constructor, so a shell is ``cls.__new__`` plus the attributes the
initializer would set (mflux-internals §4.2): a transformer with random weights (tiny for CPU
tests, the real dimensions for GPU timing), prompt embeddings injected where mflux looks for
them (prompt cache or an instance override of the encode step), and a stub VAE. The real
``generate_image()`` then runs end to end: the same loop, scheduler and callbacks as a real model.
Every builder takes ``(model_name, *, dims, prompts, dtype, seed)``; a family names its builder and
its tiny and real dimensions (``Family.random_weights``), and ``random_weight_shell`` builds one.

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

from app.families import Family, load
from app.families.flux1 import FLUX1_DEV, FLUX1_TINY, Flux1Dims
from app.families.flux2 import FLUX2_KLEIN_4B, FLUX2_TINY, Flux2Dims
from app.families.flux3 import FLUX3_FULL, FLUX3_TINY, Flux3Dims
from app.families.krea2 import KREA2_FULL, KREA2_TINY, Krea2Dims
from app.families.qwen_image import QWEN_FULL, QWEN_TINY, QwenDims
from app.families.qwen_image21 import QWEN21_FULL, QWEN21_TINY, Qwen21Dims
from app.families.z_image import Z_IMAGE_FULL, Z_IMAGE_TINY, ZImageDims

# The families' dimensions, tiny and real, are theirs (app.families); named here too for callers.
__all__ = [
    "DEFAULT_PROMPT",
    "FLUX1_DEV",
    "FLUX1_TINY",
    "FLUX2_KLEIN_4B",
    "FLUX2_TINY",
    "FLUX3_FULL",
    "FLUX3_TINY",
    "KREA2_FULL",
    "KREA2_TINY",
    "QWEN21_FULL",
    "QWEN21_TINY",
    "QWEN_FULL",
    "QWEN_TINY",
    "Z_IMAGE_FULL",
    "Z_IMAGE_TINY",
    "Flux1Dims",
    "Flux2Dims",
    "Flux3Dims",
    "Krea2Dims",
    "Qwen21Dims",
    "QwenDims",
    "StubVAE",
    "ZImageDims",
    "flux1_shell",
    "flux2_shell",
    "flux3_shell",
    "krea2_shell",
    "qwen21_shell",
    "qwen_shell",
    "random_weight_shell",
    "z_image_shell",
]

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
            offset = int(rng.integers(_POOL_SIZE))
            rolled = mx.concatenate([pool[offset:], pool[:offset]])
            repeats = -(-value.size // _POOL_SIZE)
            flat = (mx.tile(rolled, (repeats,)) if repeats > 1 else rolled)[: value.size]
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
) -> Any:
    """A shell of ``family`` (``Family.random_weights``: its builder and dimensions) for mflux's
    ``model_name`` (the family's default where None): ``full`` at the real dimensions, else tiny.
    ``FamilyError`` where the family has no shell."""
    spec = family.require_random_weights()
    builder = load(spec.builder)
    return builder(
        model_name or spec.model_name,
        dims=spec.full if full else spec.tiny,
        prompts=prompts,
        dtype=dtype,
        seed=seed,
    )


# ---------------------------------------------------------------------------------------------
# FLUX.1 (dev, schnell, Krea): hidden size 3072 is hard-coded, only block counts are free
# (``Flux1Dims``).


def flux1_shell(
    model_name: str = "dev",
    *,
    dims: Flux1Dims = FLUX1_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.flux.model.flux_transformer.transformer import Transformer
    from mflux.models.flux.variants.txt2img.flux import Flux1

    model_config = _model_config(model_name)
    pipeline = _base_shell(Flux1, model_config)
    pipeline.tokenizers = {"t5": None, "clip": None}
    pipeline.t5_text_encoder = None
    pipeline.clip_text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Transformer(
        model_config=model_config,
        num_transformer_blocks=dims.joint_blocks,
        num_single_transformer_blocks=dims.single_blocks,
    )
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    keys = mx.random.split(mx.random.key(seed + 1), 2 * len(prompts))
    cache = {}
    for i, prompt in enumerate(prompts):
        t5 = _random(keys[2 * i], (1, text_tokens, 4096), dtype)
        clip = _random(keys[2 * i + 1], (1, 768), dtype)
        cache[prompt] = (t5, clip)
    pipeline.prompt_cache = cache
    return pipeline


# ---------------------------------------------------------------------------------------------
# FLUX.2 Klein: fully parametric (``Flux2Dims``).


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


def flux2_shell(
    model_name: str = "flux2-klein-base-4b",
    *,
    dims: Flux2Dims = FLUX2_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    init_scale: float = 1.0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder
    from mflux.models.flux2.model.flux2_transformer.transformer import Flux2Transformer
    from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

    pipeline = _base_shell(Flux2Klein, _model_config(model_name))
    pipeline.vae = StubVAE(latent_channels=32)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.small_decoder = False
    pipeline.small_text_encoder = False
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Flux2Transformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype, init_scale)
    pipeline.transformer = transformer
    table: dict[str, tuple[mx.array, mx.array]] = {}
    all_prompts = [*prompts, " "]  # mflux's negative prompt for FLUX.2 CFG is a single space
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = _random(key, (1, text_tokens, dims.joint_attention_dim), dtype)
        table[prompt] = (embeds, Flux2PromptEncoder.prepare_text_ids(embeds))
    pipeline._encode_prompt_pair = _Flux2Prompts(table)
    return pipeline


# ---------------------------------------------------------------------------------------------
# Z-Image (base and Turbo): fully parametric (``ZImageDims``).


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


def z_image_shell(
    model_name: str = "z-image",
    *,
    dims: ZImageDims = Z_IMAGE_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
    init_scale: float = 1.0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.z_image.model.z_image_transformer.transformer import ZImageTransformer
    from mflux.models.z_image.variants.z_image import ZImage

    pipeline = _base_shell(ZImage, _model_config(model_name))
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.float32 = False
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = ZImageTransformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype, init_scale)
    pipeline.transformer = transformer
    all_prompts = [*prompts, " "]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    table = {
        prompt: _random(key, (text_tokens, dims.cap_feat_dim), dtype)
        for key, prompt in zip(keys, all_prompts, strict=True)
    }
    pipeline._encode_prompts = _ZImagePrompts(table)
    return pipeline


# ---------------------------------------------------------------------------------------------
# Qwen-Image: parametric except head_dim = 128 (``QwenDims``).


def qwen_shell(
    model_name: str = "qwen-image",
    *,
    dims: QwenDims = QWEN_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    negative_prompt: str | None = None,
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.qwen.model.qwen_transformer.qwen_transformer import QwenTransformer
    from mflux.models.qwen.variants.txt2img.qwen_image import QwenImage

    pipeline = _base_shell(QwenImage, _model_config(model_name))
    pipeline.tokenizers = {"qwen": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = QwenTransformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    negative = negative_prompt if negative_prompt and negative_prompt.strip() else " "
    keys = mx.random.split(mx.random.key(seed + 1), 2 * len(prompts))
    cache = {}
    mask = mx.ones((1, text_tokens), dtype=mx.int32)
    for i, prompt in enumerate(prompts):
        pos = _random(keys[2 * i], (1, text_tokens, dims.joint_attention_dim), dtype)
        neg = _random(keys[2 * i + 1], (1, text_tokens, dims.joint_attention_dim), dtype)
        cache[f"{prompt}|NEG|{negative}"] = (pos, mask, neg, mask)
    pipeline.prompt_cache = cache
    return pipeline


# ---------------------------------------------------------------------------------------------
# FLUX.3 Image Klein (distilled and base): fully parametric (``Flux3Dims``); the base checkpoint's
# ``flow_map=False`` comes from mflux's model config.


def flux3_shell(
    model_name: str = "flux3-image-klein",
    *,
    dims: Flux3Dims = FLUX3_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.flux3.model.flux3_text_encoder.prompt_encoder import Flux3PromptEncoder
    from mflux.models.flux3.model.flux3_transformer.flux3_transformer import Flux3Transformer
    from mflux.models.flux3.variants.txt2img.flux3_klein import Flux3Klein

    model_config = _model_config(model_name)
    pipeline = _base_shell(Flux3Klein, model_config)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline._noise_override = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Flux3Transformer(**dims.kwargs(), **model_config.transformer_overrides)
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    # ``_encode_prompt`` reads the cache first; the base's CFG branch is the empty prompt
    all_prompts = [*prompts, ""]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = _random(key, (1, text_tokens, dims.joint_attention_dim), dtype)
        pipeline.prompt_cache[prompt] = (embeds, Flux3PromptEncoder.prepare_text_ids(text_tokens))
    return pipeline


# ---------------------------------------------------------------------------------------------
# Qwen-Image 2.1 (base and Turbo): fully parametric (``Qwen21Dims``).


def qwen21_shell(
    model_name: str = "qwen-image-2.1",
    *,
    dims: Qwen21Dims = QWEN21_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    negative_prompt: str | None = None,
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    """mflux's 2.1 samples without CFG unless ``generate_image`` gets a negative prompt and
    guidance above 1; ``negative_prompt`` gets embeddings of its own here for that case."""
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer import Qwen21Transformer
    from mflux.models.qwen21.variants.txt2img.qwen_image_21 import QwenImage21

    pipeline = _base_shell(QwenImage21, _model_config(model_name))
    pipeline.vae = StubVAE(latent_channels=64, spatial_scale=16)
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {"qwen21": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Qwen21Transformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    all_prompts = [*prompts, *([negative_prompt] if negative_prompt else [])]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    mask = mx.ones((1, text_tokens), dtype=mx.int32)
    for key, prompt in zip(keys, all_prompts, strict=True):
        embeds = _random(key, (1, text_tokens, dims.context_in_dim), dtype)
        pipeline.prompt_cache[prompt] = (embeds, mask)
    return pipeline


# ---------------------------------------------------------------------------------------------
# Krea 2 (Turbo): fully parametric (``Krea2Dims``).


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


def krea2_shell(
    model_name: str = "krea-2",
    *,
    dims: Krea2Dims = KREA2_TINY,
    prompts: Sequence[str] = (DEFAULT_PROMPT,),
    text_tokens: int = 16,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> Any:
    from mflux.models.krea2.model.krea2_transformer.transformer import Krea2Transformer
    from mflux.models.krea2.variants.txt2img.krea2 import Krea2

    pipeline = _base_shell(Krea2, _model_config(model_name))
    pipeline.prompt_cache = {}
    pipeline.tokenizers = {"qwen3vl": None}
    pipeline.text_encoder = None
    mx.random.seed(seed)  # the modules' own init (biases) draws from the global key
    transformer = Krea2Transformer(**dims.kwargs())
    _init_weights(transformer, seed, dtype)
    pipeline.transformer = transformer
    all_prompts = [*prompts, " "]
    keys = mx.random.split(mx.random.key(seed + 1), len(all_prompts))
    table = {
        prompt: _random(key, (1, text_tokens, dims.context_dim), dtype)
        for key, prompt in zip(keys, all_prompts, strict=True)
    }
    pipeline._encode_prompts = _Krea2Prompts(table)
    return pipeline
