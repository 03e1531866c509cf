"""Live step previews: each denoising step's predicted clean image, small and cheap.

The clean prediction, read at one of three seams, whichever the family's loop offers:

- ``denoised``: mflux 0.24 hands it to in-loop callbacks that name it
  (``mflux/callbacks/generation_context.py``) where the family's loop passes it — Krea 2 (and
  Anima, Iris) in the installed mflux: ``latents − sigmas[t]·v``, taken as it is.
- the scheduler: FLUX.1, FLUX.2, Z-Image, Qwen-Image and Qwen-Image 2.1 step with
  ``config.scheduler`` on sigmas (``FlowMatchEulerDiscreteScheduler.step``,
  ``LinearScheduler.step``, ``Qwen21TurboScheduler.step``: ``x_next = x + (σ_next − σ)·v``; the
  demo's eager copy is the same arithmetic), so the step's clean prediction is the Euler step to σ =
  0: ``x0 = x + (0 − σ)·v`` — what Krea 2 computes as ``latents − sigmas[t]·v``. The previewer wraps
  the generation's own ``config.scheduler.step`` (that scheduler instance only, for that generation
  only) to see the ``x`` and ``v`` the loop hands it: a computed noise prediction, one built from
  the gate's reused residual on a skipped step, or vanilla's saved one on a replayed step. On the
  last step σ_next is 0, so its preview is the preview of the final latents, bit for bit.
- the loop's own sigmas (``LatentPreview.loop_sigmas``): FLUX.3 steps an Euler update on a
  flow-map schedule of its own, outside ``config.scheduler``, and passes no ``denoised``; each
  step's velocity is read off the two latents around it, ``v = (x_next − x) / (σ_next − σ)``,
  and ``x0 = x − σ·v``. On the last step (σ_next = 0) that is ``x_next`` up to float rounding.

The picture. The demo decodes exactly (its PCA codec is a single small matrix product: the
pipeline's ``decode_preview``). Real families project the latent to RGB with a published linear
factor table per latent space (``app.families.latent_rgb``, each with its source; the family's
module names its table), at the latent's resolution (H/8; H/16 for Qwen-Image 2.1's unpatched
latents), on the device, then one small transfer of a uint8 thumbnail of at most ``MAX_SIDE``
pixels.

Timing: the work runs inside ``gate.untimed()``, so no step's seconds include it. No step waits on
a preview either: a step's thumbnail graph is queued with ``mx.async_eval`` right after the step
and picked up (its host transfer, then ``on_preview``) at the next step's end, or after the loop
for the last step — by then the device finished it long ago, so the pick-up is a copy, not a wait.
The preview of step k therefore arrives one step late (after step k + 1's ``StepDone``); every
step still gets exactly one, the last included, before the pass finishes. The queued device work
(a few small kernels) runs while the next step's graph is built; only where the device is still
busy with it when that step evaluates would it show in that step's seconds
(lab/bench/previews.py reports the computed step with previews on and off to catch that).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import mlx.core as mx
import numpy as np

from app.families import Family
from app.gate import LiveGate

MAX_SIDE = 256  # a thumbnail's long side at most; 2048-pixel images project at 256 already

# (packed x0, height, width) → uint8 RGB: on the host, or a lazy device array the previewer
# evaluates asynchronously and transfers one step later
Decode = Callable[[mx.array, int, int], "np.ndarray | mx.array"]


def clean_prediction(latents: mx.array, noise: mx.array, sigma: mx.array) -> mx.array:
    """The Euler step to σ = 0, in the scheduler's own dtype and operation order: ``x + (0 − σ)·v``
    (mflux's ``_step`` with ``s1 = 0``), so on the last step it equals the loop's final latents."""
    dt = (mx.zeros_like(sigma) - sigma).astype(latents.dtype)
    return latents + dt * noise.astype(latents.dtype)


def euler_clean_prediction(
    latents: mx.array, next_latents: mx.array, sigma: mx.array, next_sigma: mx.array
) -> mx.array:
    """The clean prediction of an Euler step seen only by its ends: ``x − σ·(x_next − x) /
    (σ_next − σ)`` (the velocity the step used, then the Euler step to σ = 0)."""
    velocity = (next_latents - latents) / (next_sigma - sigma).astype(latents.dtype)
    return latents - sigma.astype(latents.dtype) * velocity


def project_to_rgb(
    latents: mx.array, factors: tuple[tuple[float, float, float], ...], bias: tuple[float, ...]
) -> mx.array:
    """(1, C, h, w) latent → (h, w, 3) uint8 on the device: the linear factors, then the [-1, 1]
    → [0, 255] mapping, downsampled by an integer factor to at most ``MAX_SIDE`` pixels."""
    weights, offset = _device_factors(factors, bias)
    rgb = mx.einsum("chw,cr->hwr", latents[0].astype(mx.float32), weights)
    rgb = rgb + offset
    return to_thumbnail(rgb)


@functools.cache
def _device_factors(
    factors: tuple[tuple[float, float, float], ...], bias: tuple[float, ...]
) -> tuple[mx.array, mx.array]:
    """The tables as device arrays, made once: building them per step cost a host→device copy
    (and on CUDA a synchronizing one) for every preview."""
    weights, offset = mx.array(factors, dtype=mx.float32), mx.array(bias, dtype=mx.float32)
    mx.eval(weights, offset)
    return weights, offset


def to_thumbnail(rgb: mx.array) -> mx.array:
    """(h, w, 3) in [-1, 1] → uint8, box-averaged by the smallest integer factor that fits
    ``MAX_SIDE`` (a tail that does not fill a box is cropped: at most factor − 1 pixels)."""
    h, w, _ = rgb.shape
    k = -(-max(h, w) // MAX_SIDE)
    if k > 1:
        h, w = h // k * k, w // k * k
        rgb = rgb[:h, :w].reshape(h // k, k, w // k, k, 3).mean(axis=(1, 3))
    unit = mx.clip(rgb / 2 + 0.5, 0.0, 1.0)
    return mx.round(unit * 255).astype(mx.uint8)


def family_projection(family: Family) -> Callable[[mx.array, int, int], mx.array]:
    """The linear preview of one family's loop latents (``Family.preview``: mflux's unpacking and
    a published factor table, ``app.families.latent_rgb``). The result is the lazy uint8
    thumbnail on the device (``to_host`` makes it an image).

    Packed families (tokens of ``channels`` × 2 × 2 values, mflux's ``unpack_latents`` layout)
    project the tokens directly — one (tokens, 4·C) × (4·C, 12) matrix product — and rearrange
    only the 3-channel result: the same sums as unpacking first, without copying the whole
    latent twice. Anything else unpacks with mflux's helper, then projects."""
    preview = family.require_preview()
    channels = preview.packed_channels

    def decode(latents: mx.array, height: int, width: int) -> mx.array:
        h, w = height // 16, width // 16
        if channels is not None and latents.shape == (1, h * w, channels * 4):
            return project_packed_to_rgb(latents, h, w, preview.factors, preview.bias)
        unpacked = preview.unpack(latents, height, width)
        return project_to_rgb(unpacked, preview.factors, preview.bias)

    return decode


def project_packed_to_rgb(
    packed: mx.array,
    h: int,
    w: int,
    factors: tuple[tuple[float, float, float], ...],
    bias: tuple[float, ...],
) -> mx.array:
    """(1, h·w, C·4) tokens, each a (channel, row, column) 2×2 patch → the (2h, 2w, 3) uint8
    thumbnail ``project_to_rgb`` makes of the unpacked (1, C, 2h, 2w) latent."""
    weights, offset = _patch_factors(factors, bias)
    rgb = packed[0].astype(mx.float32) @ weights  # (h·w, 12): 3 colours for each patch pixel
    rgb = rgb.reshape(h, w, 2, 2, 3).transpose(0, 2, 1, 3, 4).reshape(2 * h, 2 * w, 3)
    return to_thumbnail(rgb + offset)


@functools.cache
def _patch_factors(
    factors: tuple[tuple[float, float, float], ...], bias: tuple[float, ...]
) -> tuple[mx.array, mx.array]:
    """The factor table spread over a 2×2 patch: token feature c·4 + p (p the patch pixel)
    feeds only output columns p·3 … p·3 + 2, with channel c's three factors."""
    table = np.asarray(factors, dtype=np.float32)
    channels = len(table)
    spread = np.zeros((channels, 4, 4, 3), dtype=np.float32)
    for pixel in range(4):
        spread[:, pixel, pixel, :] = table
    weights = mx.array(spread.reshape(channels * 4, 12))
    offset = mx.array(np.asarray(bias, dtype=np.float32))
    mx.eval(weights, offset)
    return weights, offset


def to_host(image: np.ndarray | mx.array) -> np.ndarray:
    """A decoded thumbnail as a C-contiguous uint8 NumPy image (the one host transfer)."""
    if isinstance(image, np.ndarray):
        return image
    return np.array(image, copy=True)


def previewer_for(
    pipeline: Any,
    on_preview: Callable[[int, np.ndarray], None],
    *,
    gate: LiveGate | None = None,
    reuse: Callable[[int], np.ndarray | None] | None = None,
) -> StepPreviewer:
    """The ``StepPreviewer`` for ``pipeline``: its decode (``preview_decoder``), and its family's
    loop sigmas where the loop steps outside ``config.scheduler``
    (``LatentPreview.loop_sigmas``)."""
    loop_sigmas = None
    if not callable(getattr(pipeline, "decode_preview", None)):
        from app.adapters import detect_family

        loop_sigmas = detect_family(pipeline).require_preview().loop_sigmas
    return StepPreviewer(
        preview_decoder(pipeline), on_preview, gate=gate, reuse=reuse, loop_sigmas=loop_sigmas
    )


def preview_decoder(pipeline: Any) -> Decode:
    """The pipeline's own exact ``decode_preview`` where it has one (the demo), else its
    family's linear projection."""
    own = getattr(pipeline, "decode_preview", None)
    if callable(own):
        return cast(Decode, own)
    from app.adapters import detect_family

    return family_projection(detect_family(pipeline))


class StepPreviewer:
    """An mflux callback that turns each step's clean prediction into a thumbnail.

    Register it after the gate's lifecycle callback (both orders are timed correctly: the work is
    charged to no step either way). ``reuse(index)`` may return an image already made for that
    step (a resumed pass's replayed steps: vanilla's); ``on_preview(index, image)`` receives every
    step's image as a NumPy uint8 array, index counted from the first active step, one step late
    (the last after the loop; none after an interrupt). ``loop_sigmas`` (a run's config → its
    Euler sigmas): for a loop that steps outside ``config.scheduler`` and passes no ``denoised``
    (the module's docstring).
    """

    def __init__(
        self,
        decode: Decode,
        on_preview: Callable[[int, np.ndarray], None],
        *,
        gate: LiveGate | None = None,
        reuse: Callable[[int], np.ndarray | None] | None = None,
        loop_sigmas: Callable[[Any], mx.array] | None = None,
    ) -> None:
        self.decode = decode
        self.on_preview = on_preview
        self.gate = gate
        self.reuse = reuse
        self.loop_sigmas = loop_sigmas
        self._scheduler: Any = None
        self._first_step = 0
        self._pending: tuple[int, mx.array, mx.array, mx.array] | None = None
        # the loop-sigmas seam: the schedule, and the latents entering the current step
        self._sigmas: mx.array | None = None
        self._previous: mx.array | None = None
        # the previous step's thumbnail, queued on the device, delivered at the next pick-up
        self._in_flight: tuple[int, np.ndarray | mx.array] | None = None

    # -- the scheduler seam ----------------------------------------------------------------------
    def call_before_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        self._restore()
        scheduler = config.scheduler
        own_step = scheduler.step  # bound: the class's step on this instance

        def step(noise: mx.array, timestep: int, latents: mx.array, **kw: Any) -> mx.array:
            sigmas = kw.get("sigmas", scheduler.sigmas)
            self._pending = (timestep, latents, noise, sigmas[timestep])
            return own_step(noise=noise, timestep=timestep, latents=latents, **kw)

        vars(scheduler)["step"] = step  # this generation's scheduler only
        self._scheduler = scheduler
        self._first_step = int(getattr(config, "init_time_step", 0) or 0)
        self._pending = None
        self._in_flight = None
        self._sigmas = self.loop_sigmas(config) if self.loop_sigmas is not None else None
        self._previous = latents if self._sigmas is not None else None

    def _restore(self) -> None:
        if self._scheduler is not None:
            vars(self._scheduler).pop("step", None)
            self._scheduler = None
        self._pending = None
        self._in_flight = None
        self._sigmas = None
        self._previous = None

    # -- per step --------------------------------------------------------------------------------
    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any = None,
        denoised: mx.array | None = None,  # named: mflux passes it where its loop has it
        **kwargs: Any,
    ) -> None:
        pending, self._pending = self._pending, None
        previous, self._previous = self._previous, (latents if self._sigmas is not None else None)
        clean: Callable[[], mx.array]
        if denoised is not None:
            index, clean = int(t) - self._first_step, lambda: denoised
        elif pending is not None:
            timestep, x, v, sigma = pending
            index = int(timestep) - self._first_step
            clean = lambda: clean_prediction(x, v, sigma)  # noqa: E731
        elif self._sigmas is not None and previous is not None:
            sigmas, step = self._sigmas, int(t)
            index = step - self._first_step
            clean = lambda: euler_clean_prediction(  # noqa: E731
                previous, latents, sigmas[step], sigmas[step + 1]
            )
        else:
            return
        with self._untimed():
            ready = self._pick_up()
            image = self.reuse(index) if self.reuse is not None else None
            if image is None:
                image = self.decode(clean(), config.height, config.width)
                if isinstance(image, mx.array):
                    mx.async_eval(image)  # runs on the device while the next step is built
            self._in_flight = (index, image)
        if ready is not None:
            self.on_preview(*ready)

    def _pick_up(self) -> tuple[int, np.ndarray] | None:
        """The previous step's thumbnail on the host (finished by now: no wait for the device)."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return None
        index, image = in_flight
        return index, to_host(image)

    @contextlib.contextmanager
    def _untimed(self) -> Iterator[None]:
        if self.gate is None:
            yield
            return
        with self.gate.untimed():
            yield

    def call_after_loop(
        self, seed: int, prompt: str, latents: mx.array, config: Any, **kwargs: Any
    ) -> None:
        with self._untimed():
            ready = self._pick_up()  # the last step's preview, before the pass finishes
        self._restore()
        if ready is not None:
            self.on_preview(*ready)

    def call_interrupt(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any = None,
        **kwargs: Any,
    ) -> None:
        self._restore()
