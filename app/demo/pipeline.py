"""The demo model as a weight-less mflux ``Flux2Klein`` shell running mflux's real FLUX.2 loop.

``load_demo_pipeline("demo")`` returns a ``Flux2Klein`` built with ``__new__`` plus attributes
(mflux has no weight-free constructor), holding our transformer, with three seams set on the
instance:

- ``_encode_prompt_pair``: our word-level tokenizer + text encoder instead of Qwen3. The negative
  prompt mflux passes (``" "``) becomes all-padding tokens, the unconditional input the model was
  trained on (caption dropout), so ``guidance > 1`` runs real classifier-free guidance.
- ``vae``: an object with ``decode_packed_latents(packed, tiling_config)``, the one method
  ``Flux2Klein.generate_image`` calls to decode; it runs the seamless decoder
  (``app.demo.decoder``) on the PCA codec's latents.
- ``_prepare_img2img_latents``: a run from a picture (``image_path``, ``image_strength``)
  encodes it with the codec (pixels → the packed tokens, ``DemoVAE.encode_picture``) instead of
  mflux's FLUX.2 VAE encoder, then noises it to the strength's step as mflux does
  (``LatentCreator.add_noise_by_interpolation`` at ``sigmas[config.init_time_step]``); mflux's
  loop then starts at that step.
- ``_predict``: mflux's own predict closure without ``mx.compile`` (an instance attribute
  overrides the staticmethod factory), so vanilla and gated runs share one numerical path and the
  first generation has no g++/NVRTC compile stall. On the CPU under guidance, its two branches run
  on two streams (``app.adapters.branch_streams``), as the gated FLUX.2 predict's do.

mflux behaviour relied on (mflux 0.24.0, ``models/flux2/variants/txt2img/flux2_klein.py``):
``generate_image`` calls ``self._encode_prompt_pair(prompt=, negative_prompt=" ", guidance=)``,
``Flux2LatentCreator.prepare_packed_latents`` (noise in ``ModelConfig.precision``), and with a
picture ``self._prepare_img2img_latents(seed=, config=)`` returning (latents, latent ids, latent
height, latent width),
``self._predict(self.transformer)`` once per generation, ``config.scheduler.step`` per step,
``self.callbacks``, then ``self.vae.decode_packed_latents`` on (1, 128, H/16, W/16) and
``ImageUtil.to_image`` on a (1, 3, H, W) array in [-1, 1]. ``ModelConfig.precision`` is a class
attribute read at call time (the transformer casts its timestep embedding to it); the demo sets it
to float32 for the duration of its own generations only, so a real model in the same process keeps
its precision. mflux's per-step tqdm bar writes to stderr; tqdm reads ``TQDM_DISABLE`` when it is
imported, so an entry point that wants silence sets it before importing mflux (a disabled bar still
reports the elapsed time mflux stores as ``generation_time``). The scheduler's ``_step`` is
``mx.compile``d in mflux; the demo uses the same class with an eager ``step`` (identical
arithmetic) for the same reason as the eager predict.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
import numpy as np
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.common.schedulers import register_contrib
from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import (
    FlowMatchEulerDiscreteScheduler,
)
from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein

from app.adapters.branch_streams import (
    branch_stream,
    concurrent_branches,
    cpu_concurrency_helps,
)
from app.adapters.common import use_precision
from app.demo.codec import GRID, PATCH, PCACodec, load_codec
from app.demo.decoder import SeamlessDecoder, load_decoder
from app.demo.model import (
    CODEC_FILE,
    DECODER_FILE,
    VARIANT_FILES,
    load_model,
    text_ids,
)
from app.demo.prompt import parse_prompt, tokenize
from app.paths import DEMO_DIR

DEFAULT_SCHEDULER = "flow_match_euler_discrete"
EAGER_SCHEDULER = "teacache_demo_flow_match_euler_discrete"


class EagerFlowMatchEulerDiscreteScheduler(FlowMatchEulerDiscreteScheduler):
    """mflux's FLOW-match Euler scheduler (same sigmas) with the step run eagerly."""

    def step(self, noise: mx.array, timestep: int, latents: mx.array, **kwargs: Any) -> mx.array:
        sigmas = kwargs.get("sigmas", self.sigmas)
        dt = (sigmas[timestep + 1] - sigmas[timestep]).astype(latents.dtype)
        return latents + dt * noise.astype(latents.dtype)


register_contrib(EagerFlowMatchEulerDiscreteScheduler, EAGER_SCHEDULER)
_GENERATE = inspect.signature(Flux2Klein.generate_image)


def demo_model_config(variant_id: str) -> ModelConfig:
    """Our own ModelConfig: FLUX.2 Klein's scheduling rules (sigma shift from the image sequence
    length), a name no downloader resolves. "base" in the name follows mflux's rule that marks
    non-distilled Klein models."""
    return ModelConfig(
        priority=999,
        aliases=[variant_id],
        model_name="teacache-studio/demo-base"
        if variant_id == "demo"
        else "teacache-studio/demo-turbo",
        base_model=None,
        controlnet_model=None,
        custom_transformer_model=None,
        num_train_steps=1000,
        max_sequence_length=24,
        supports_guidance=True,
        requires_sigma_shift=True,
        transformer_overrides=None,
        text_encoder_overrides=None,
    )


@contextlib.contextmanager
def float32_precision() -> Iterator[None]:
    with use_precision(mx.float32):
        yield


class DemoVAE:
    """The decode side, in the shape mflux's FLUX.2 loop hands over: the seamless decoder
    (``app.demo.decoder``). With ``decoder`` None it is the PCA codec's own per-patch decode, the
    one shipped before the decoder (kept for the lab's before/after measurements)."""

    def __init__(self, codec: PCACodec, decoder: SeamlessDecoder | None) -> None:
        self.codec = codec
        self.decoder = decoder

    def decode_tokens(self, latents: mx.array, height: int, width: int) -> mx.array:
        """Packed-token latents (B, tokens, 128) → (B, H, W, 3) in [−1, 1] (unclipped)."""
        latents = latents.astype(mx.float32)
        if self.decoder is None:
            return self.codec.decode(latents, height, width, xp=mx)
        return self.decoder(latents, height, width)

    def decode_packed_latents(
        self, packed_latents: mx.array, tiling_config: Any = None
    ) -> mx.array:
        batch, channels, h, w = packed_latents.shape
        tokens = packed_latents.transpose(0, 2, 3, 1).reshape(batch, h * w, channels)
        return self.decode_tokens(tokens, h * PATCH, w * PATCH).transpose(0, 3, 1, 2)

    def encode_picture(self, path: str | Path, height: int, width: int) -> mx.array:
        """The picture at ``path`` as packed-token latents (1, tokens, 128): loaded and resized
        by mflux's own rule (``LatentCreator.encode_image``: EXIF orientation, alpha over white,
        Lanczos to the run's size), then the codec's encode."""
        from mflux.utils.image_util import ImageUtil

        picture = ImageUtil.scale_to_dimensions(
            image=ImageUtil.load_image(path).convert("RGB"),
            target_width=width,
            target_height=height,
        )
        pixels = mx.array(np.asarray(picture, dtype=np.float32)[None] / 255.0)
        return self.codec.encode(pixels, xp=mx)

    def decode_to_unit(self, latents: mx.array, height: int, width: int) -> mx.array:
        """Packed-token latents (B, tokens, 128) → (B, H, W, 3) in [0, 1], as mflux would save."""
        return mx.clip(self.decode_tokens(latents, height, width) / 2 + 0.5, 0.0, 1.0)


def eager_predict(transformer: Any) -> Any:
    """mflux's ``Flux2Klein._predict`` closure, line for line, without ``mx.compile``; each
    CFG branch inside its :func:`branch_stream` (the default stream unless concurrency is on)."""

    def predict(
        latents: mx.array,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
        negative_prompt_embeds: mx.array | None,
        negative_text_ids: mx.array | None,
        guidance: float,
        timestep: mx.array,
    ) -> mx.array:
        with branch_stream(0):
            noise = transformer(
                hidden_states=latents,
                encoder_hidden_states=prompt_embeds,
                timestep=timestep,
                img_ids=latent_ids,
                txt_ids=text_ids,
                guidance=None,
            )
        if negative_prompt_embeds is not None and negative_text_ids is not None:
            with branch_stream(1):
                negative_noise = transformer(
                    hidden_states=latents,
                    encoder_hidden_states=negative_prompt_embeds,
                    timestep=timestep,
                    img_ids=latent_ids,
                    txt_ids=negative_text_ids,
                    guidance=None,
                )
            noise = negative_noise + guidance * (noise - negative_noise)
        return noise

    return predict


class DemoFlux2Klein(Flux2Klein):
    """A ``Flux2Klein`` whose ``generate_image`` is mflux's, run in float32 with the eager
    scheduler; built only through :func:`load_demo_pipeline`."""

    demo_variant: str
    text_model: Any
    concurrent_cfg: bool = True  # False: both CFG branches on one stream (benchmarks' A/B)

    def generate_image(self, seed: int, prompt: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if kwargs.get("scheduler", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER:
            kwargs["scheduler"] = EAGER_SCHEDULER
        if kwargs.get("pid_decode"):
            raise ValueError("the demo model does not support pid_decode")
        parse_prompt(prompt)  # a clear error for words outside the demo's vocabulary
        guidance = _GENERATE.bind(self, seed, prompt, *args, **kwargs).arguments.get(
            "guidance", _GENERATE.parameters["guidance"].default
        )
        concurrent = self.concurrent_cfg and cpu_concurrency_helps(guidance)
        with float32_precision(), concurrent_branches(concurrent):
            return super().generate_image(seed, prompt, *args, **kwargs)

    def _prepare_img2img_latents(
        self, *, seed: int, config: Any
    ) -> tuple[mx.array, mx.array, int, int]:
        """mflux's ``Flux2Klein._prepare_img2img_latents`` with the codec as the encoder: the same
        noise, the picture's tokens, blended at the strength's sigma."""
        from mflux.models.common.latent_creator.latent_creator import LatentCreator
        from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator

        noise, latent_ids, latent_height, latent_width = Flux2LatentCreator.prepare_packed_latents(
            seed=seed, height=config.height, width=config.width, batch_size=1
        )
        vae = cast(DemoVAE, self.vae)
        clean = vae.encode_picture(config.image_path, config.height, config.width)
        sigma = config.scheduler.sigmas[config.init_time_step]
        latents = LatentCreator.add_noise_by_interpolation(
            clean=clean.astype(noise.dtype), noise=noise, sigma=sigma
        )
        return latents, latent_ids, latent_height, latent_width

    def decode_preview(self, latents: mx.array, height: int, width: int) -> np.ndarray:
        """A step's predicted clean latents as the exact image (the decoder is cheap, a few
        milliseconds): the same reshape, decode and conversion ``generate_image`` applies to the
        final latents."""
        from mflux.utils.image_util import ImageUtil

        packed = latents.reshape(latents.shape[0], height // PATCH, width // PATCH, -1)
        decoded = self.vae.decode_packed_latents(packed.transpose(0, 3, 1, 2))
        return np.asarray(ImageUtil.to_pil(decoded).convert("RGB"), dtype=np.uint8)

    def encode_text(self, text: str) -> mx.array:
        """(1, MAX_TOKENS, 128) prompt embedding; blank text is the unconditional input."""
        tokens = mx.array([tokenize(text)], dtype=mx.int32)
        return self.text_model(tokens)


def _encode_prompt_pair_factory(pipe: DemoFlux2Klein) -> Any:
    def encode_prompt_pair(
        *, prompt: str, negative_prompt: str | None, guidance: float
    ) -> tuple[mx.array, mx.array, mx.array | None, mx.array | None]:
        positive = pipe.encode_text(prompt)
        negative = negative_ids = None
        if guidance is not None and guidance > 1.0 and negative_prompt is not None:
            negative = pipe.encode_text(negative_prompt)
            negative_ids = text_ids(negative)
        return positive, text_ids(positive), negative, negative_ids

    return encode_prompt_pair


def load_demo_pipeline(variant_id: str, resources: Path | None = None) -> DemoFlux2Klein:
    """Build the demo (``"demo"`` or ``"demo-turbo"``) as a Flux2Klein shell, weights loaded."""
    from mflux.callbacks.callback_registry import CallbackRegistry
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision
    from mlx import nn

    if variant_id not in VARIANT_FILES:
        raise ValueError(
            f"unknown demo variant {variant_id!r}; choose one of {list(VARIANT_FILES)}"
        )
    folder = resources or DEMO_DIR
    model = load_model(folder / VARIANT_FILES[variant_id])
    pipe = DemoFlux2Klein.__new__(DemoFlux2Klein)
    nn.Module.__init__(pipe)
    pipe.model_config = demo_model_config(variant_id)
    pipe.callbacks = CallbackRegistry()
    pipe.tiling_config = None
    pipe.prompt_cache = {}
    pipe.bits = None
    pipe.lora_paths = None
    pipe.lora_scales = None
    pipe.compute_precision = ComputePrecision(None)
    pipe.tokenizers = {}
    pipe.small_decoder = False
    pipe.small_text_encoder = False
    pipe.transformer = model.transformer
    pipe.text_encoder = None  # mflux's Qwen3 slot stays empty; ours is text_model
    pipe.text_model = model.text_encoder
    pipe.vae = DemoVAE(  # type: ignore[assignment]
        load_codec(folder / CODEC_FILE), load_decoder(folder / DECODER_FILE)
    )
    pipe.demo_variant = variant_id
    pipe._encode_prompt_pair = _encode_prompt_pair_factory(pipe)  # type: ignore[method-assign]
    pipe._predict = eager_predict  # type: ignore[method-assign]
    return pipe


assert GRID * PATCH == 128
