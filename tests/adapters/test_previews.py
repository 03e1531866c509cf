"""Step previews on tiny random-weight shells running mflux's real loops (float32, eager).

Oracles. The clean prediction: mflux's Krea2 loop passes ``latents − sigmas[t]·v`` as
``denoised`` (mflux/models/krea2/variants/txt2img/krea2.py), so ``clean_prediction`` must equal that
formula bit for bit in float32; and, independently of the seam, every step's prediction must
follow from two consecutive latents the loop reported (``v = (x_next − x) / (σ_next − σ)``), to a
float32 tolerance. The picture: the last step's preview is the preview of the final latents, and
each family's projection equals its factor table summed in NumPy over mflux's own unpacking of the
loop's latents. The families run are their preview cases (``ShellTest.preview``); FLUX.1's
projection (no preview case: its shell is 3072 wide) is checked in test_adapter_flux1.py.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from app.adapters import common, install_gate, previews, shells
from app.adapters.shells import case_shell, random_weight_shell
from app.families import FAMILIES, Family, ShellCase, ShellTest, get_family, latent_rgb, shell_cases
from app.gate import Decision, TeaCacheGate, TeaCacheParams

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py

SIZE = 128
STEPS = 5
# x0 from two consecutive float32 latents divides a difference of O(1) values by a sigma gap of
# about 0.2; float32 rounding of x (1.2e-7 relative) becomes ~1e-6 of |x|/|Δσ| after that.
# 1e-4 absolute is that bound with two orders of margin on these O(1) shells.
DERIVED_ATOL = 1e-4
# ALTERNATE: a decision rule that skips every other eligible step (max one in a row).
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)


class LoopRecorder:
    """Records the latents mflux hands to callbacks: the initial ones and after every step."""

    def __init__(self) -> None:
        self.latents: list[np.ndarray] = []
        self.sigmas: np.ndarray | None = None
        self.config: Any = None
        self.final: mx.array | None = None

    def call_before_loop(self, seed: int, prompt: str, latents: mx.array, config: Any, **_: Any):
        self.latents = [np.array(latents)]
        self.sigmas = np.array(config.scheduler.sigmas)
        self.config = config

    def call_in_loop(
        self, t: int, seed: int, prompt: str, latents: mx.array, config: Any, **_: Any
    ):
        self.latents.append(np.array(latents))

    def call_after_loop(self, seed: int, prompt: str, latents: mx.array, config: Any, **_: Any):
        self.final = latents


def _run(pipeline: Any, gate: TeaCacheGate | None = None, **kwargs: Any):
    """One generation with a previewer whose decode keeps each step's clean latents."""
    cleans: dict[int, np.ndarray] = {}
    images: dict[int, np.ndarray] = {}
    projection = previews.preview_decoder(pipeline)

    def decode(x0: mx.array, height: int, width: int) -> np.ndarray | mx.array:
        cleans[len(cleans)] = np.array(x0)
        return projection(x0, height, width)

    recorder = LoopRecorder()
    previewer = previews.StepPreviewer(decode, images.__setitem__, gate=gate)
    with common.attached(pipeline, recorder), common.attached(pipeline, previewer):
        args = {"seed": 0, "prompt": shells.DEFAULT_PROMPT, "num_inference_steps": STEPS}
        pipeline.generate_image(**args, height=SIZE, width=SIZE, **kwargs)
    return cleans, images, recorder, projection


@pytest.fixture(scope="module")
def flux2() -> Any:
    with common.use_precision(mx.float32):
        return random_weight_shell(get_family("flux2"), "flux2-klein-base-4b")


def test_clean_prediction_is_what_mflux_passes_as_denoised() -> None:
    keys = mx.random.split(mx.random.key(7), 2)
    x = mx.random.normal((1, 64, 128), key=keys[0])
    v = mx.random.normal((1, 64, 128), key=keys[1])
    sigmas = mx.array([1.0, 0.73, 0.41, 0.0], dtype=mx.float32)
    for t in range(3):
        krea2 = x - sigmas[t] * v  # mflux 0.24 krea2.py: denoised = latents - sigmas[t] * v
        assert mx.array_equal(previews.clean_prediction(x, v, sigmas[t]), krea2).item()


# Every family's preview case (``ShellTest.preview``), run non-square so a transposed layout shows.
CASES = shell_cases(ShellTest.preview)
HEIGHT, WIDTH = 128, 96


@pytest.mark.parametrize(("family", "case"), CASES, ids=[family.id for family, _ in CASES])
def test_each_step_previews_its_clean_prediction(family: Family, case: ShellCase) -> None:
    """Each step's preview is its clean prediction, read at the seam the family's loop offers:
    where the loop hands callbacks ``denoised`` (Krea 2), that, bit for bit; elsewhere the Euler
    step to σ = 0 that two consecutive latents imply, on the sigmas the loop steps on (its own,
    ``LatentPreview.loop_sigmas``, as FLUX.3's flow map, else ``config.scheduler``'s). The last
    step's is the final latents; every preview is the family's table applied to mflux's own
    unpacking of the latents."""
    preview = family.require_preview()
    with common.use_precision(mx.float32):
        pipeline = case_shell(family, case)
        kwargs = {**case.generate_kwargs(steps=STEPS), "height": HEIGHT, "width": WIDTH}
        denoised = DenoisedRecorder()
        with common.attached(pipeline, denoised):
            cleans, images, recorder = _run_family(pipeline, **kwargs)
    assert sorted(images) == list(range(STEPS))  # one preview per step
    assert recorder.config is not None and recorder.final is not None
    final = np.array(recorder.final)
    if denoised.denoised:
        assert len(denoised.denoised) == STEPS
        for t in range(STEPS):
            assert np.array_equal(cleans[t], np.array(denoised.denoised[t]))
        assert np.array_equal(cleans[STEPS - 1], final)  # the sampler's last step returns it
    else:
        own = preview.loop_sigmas
        sig = np.array(
            own(recorder.config) if own is not None else recorder.config.scheduler.sigmas
        )
        lat = recorder.latents
        for t in range(STEPS):
            velocity = (lat[t + 1] - lat[t]) / (sig[t + 1] - sig[t])
            derived = lat[t] - sig[t] * velocity
            np.testing.assert_allclose(cleans[t], derived, rtol=0, atol=DERIVED_ATOL)
        if own is None:  # σ = 0 on the loop's own scheduler: the final latents, bit for bit
            assert np.array_equal(cleans[STEPS - 1], final)
        else:  # read off two latents: x + (x_next − x) to float32 rounding
            np.testing.assert_allclose(cleans[STEPS - 1], final, rtol=0, atol=1e-6)
    # The picture: the family's factor table on mflux's unpacking (an independent NumPy sum).
    projection = previews.family_projection(family)
    final_projection = previews.to_host(projection(recorder.final, HEIGHT, WIDTH))
    assert np.array_equal(images[STEPS - 1], final_projection)
    latent = np.array(preview.unpack(recorder.final, HEIGHT, WIDTH))[0]
    want = _expected(latent, preview.factors, preview.bias)
    assert final_projection.shape == want.shape == (*latent.shape[1:], 3)
    assert latent.shape[1] * WIDTH == latent.shape[2] * HEIGHT  # the image's aspect, not swapped
    # float32 sums in a different order: a value at a .5 boundary may round the other way
    assert int(np.abs(final_projection.astype(int) - want.astype(int)).max()) <= 1
    assert np.mean(final_projection == want) > 0.99
    image = images[0]
    assert image.dtype == np.uint8 and image.shape == want.shape and image.flags.c_contiguous


def test_skipped_steps_preview_the_reused_residuals_prediction(flux2: Any) -> None:
    """On a skipped step the loop's noise comes from the gate's reused residual; the preview is
    that step's clean prediction, so it differs from vanilla's where the skip changed it."""
    vanilla_cleans, _, _, _ = _run(flux2, guidance=4.0)
    gate = TeaCacheGate(ALTERNATE)
    with install_gate(flux2, gate):
        gated_cleans, images, recorder, _ = _run(flux2, gate, guidance=4.0)
    skipped = [e.index for e in gate.events if e.decision is Decision.skipped]
    assert skipped, gate.pattern  # engagement: the gate did skip
    sig, lat = recorder.sigmas, recorder.latents
    assert sig is not None
    first = skipped[0]
    velocity = (lat[first + 1] - lat[first]) / (sig[first + 1] - sig[first])
    np.testing.assert_allclose(
        gated_cleans[first], lat[first] - sig[first] * velocity, rtol=0, atol=DERIVED_ATOL
    )
    # Up to the first skip the trajectories are one; at it, the reused residual shows.
    assert all(np.array_equal(gated_cleans[i], vanilla_cleans[i]) for i in range(first))
    assert not np.array_equal(gated_cleans[first], vanilla_cleans[first])
    assert sorted(images) == list(range(STEPS))


def test_previews_leave_the_scheduler_and_the_numbers_as_they_were(flux2: Any) -> None:
    recorder = LoopRecorder()
    with common.attached(flux2, recorder):
        flux2.generate_image(
            seed=0,
            prompt=shells.DEFAULT_PROMPT,
            num_inference_steps=STEPS,
            height=SIZE,
            width=SIZE,
            guidance=4.0,
        )
    _, _, with_previews, _ = _run(flux2, guidance=4.0)
    assert recorder.final is not None and with_previews.final is not None
    assert mx.array_equal(recorder.final, with_previews.final).item()


def _expected(latent: np.ndarray, factors: Any, bias: Any) -> np.ndarray:
    rgb = np.einsum("chw,cr->hwr", latent, np.array(factors)) + np.array(bias)
    return np.round(np.clip(rgb / 2 + 0.5, 0, 1) * 255).astype(np.uint8)


def test_thumbnails_are_bounded_and_box_averaged() -> None:
    rgb = mx.array(np.linspace(-1, 1, 600 * 300 * 3, dtype=np.float32).reshape(600, 300, 3))
    thumb = np.array(previews.to_thumbnail(rgb))
    assert thumb.shape == (200, 100, 3)  # 600 / 3 ≤ 256
    expected = np.array(rgb).reshape(200, 3, 100, 3, 3).mean(axis=(1, 3))
    expected = np.round(np.clip(expected / 2 + 0.5, 0, 1) * 255)
    assert int(np.abs(thumb.astype(int) - expected.astype(int)).max()) <= 1
    small = np.array(previews.to_thumbnail(mx.zeros((16, 16, 3))))
    assert small.shape == (16, 16, 3) and (small == 128).all()  # 0 maps to mid-grey


def test_each_factor_table_is_for_the_latent_space_mflux_holds() -> None:
    """The tables were fitted on ComfyUI's sampler latents (comfy/latent_formats.py at commit
    9a9a69fd745de98e89b0f1a629cd3bc43d513a42): FLUX.1 and Z-Image shifted by 0.1159 and scaled by
    0.3611, Qwen-Image normalized by Wan 2.1's per-channel mean and std. mflux's VAEs undo exactly
    those transforms before decoding, so its loop holds the same space."""
    from mflux.models.flux.model.flux_vae.vae import VAE as FluxVAE
    from mflux.models.qwen.model.qwen_vae.qwen_vae import QwenVAE
    from mflux.models.z_image.model.z_image_vae.vae import VAE as ZImageVAE

    for vae in (FluxVAE, ZImageVAE):
        assert (vae.scaling_factor, vae.shift_factor) == (0.3611, 0.1159)
    wan21_mean = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                  0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921]  # fmt: skip
    wan21_std = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                 3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160]  # fmt: skip
    np.testing.assert_array_equal(QwenVAE.LATENTS_MEAN, np.array(wan21_mean, dtype=np.float32))
    np.testing.assert_array_equal(QwenVAE.LATENTS_STD, np.array(wan21_std, dtype=np.float32))
    assert len(latent_rgb.FLUX1_FACTORS) == 16 and len(latent_rgb.WAN21_FACTORS) == 16
    assert len(latent_rgb.FLUX2_FACTORS) == 32  # the unpatchified FLUX.2 latent


def test_a_steps_preview_is_queued_and_picked_up_at_the_next_steps_end(flux2: Any) -> None:
    """No step waits on its own preview: step k's thumbnail is evaluated asynchronously and
    reaches ``on_preview`` during step k + 1's callbacks; the last one after the loop, before
    ``generate_image`` returns."""
    recorder = LoopRecorder()
    delivered: list[tuple[int, int, bool]] = []  # (index, latents the loop had reported, done)

    def on_preview(index: int, image: np.ndarray) -> None:
        assert isinstance(image, np.ndarray) and image.dtype == np.uint8
        delivered.append((index, len(recorder.latents), recorder.final is not None))

    previewer = previews.StepPreviewer(previews.preview_decoder(flux2), on_preview)
    with common.attached(flux2, recorder), common.attached(flux2, previewer):
        flux2.generate_image(
            seed=0,
            prompt=shells.DEFAULT_PROMPT,
            num_inference_steps=STEPS,
            height=SIZE,
            width=SIZE,
            guidance=4.0,
        )
    assert [d[0] for d in delivered] == list(range(STEPS))
    # in step t's callbacks the recorder holds t + 2 latents (the initial ones and t + 1 steps)
    assert all(seen == index + 3 and not done for index, seen, done in delivered[:-1])
    assert delivered[-1][2]  # the last step's preview: after the loop


# -- the seams a family's loop offers: ``denoised`` (Krea 2), its own sigmas (FLUX.3) ------------


class DenoisedRecorder:
    """Keeps what mflux hands in-loop callbacks that name ``denoised`` (Krea 2's loop does)."""

    def __init__(self) -> None:
        self.denoised: list[mx.array] = []
        self.final: mx.array | None = None

    def call_in_loop(
        self,
        t: int,
        seed: int,
        prompt: str,
        latents: mx.array,
        config: Any,
        time_steps: Any = None,
        denoised: mx.array | None = None,
        **_: Any,
    ) -> None:
        if denoised is not None:  # the loops that name it (Krea 2's)
            self.denoised.append(denoised)

    def call_after_loop(self, seed: int, prompt: str, latents: mx.array, config: Any, **_: Any):
        self.final = latents


def _run_family(pipeline: Any, **kwargs: Any) -> tuple[dict[int, np.ndarray], dict, Any]:
    """One generation (``kwargs``: ``generate_image``'s, the seed and prompt given here) with the
    pipeline's own previewer (``previewer_for``), its decode wrapped to keep each step's clean
    latents."""
    cleans: dict[int, np.ndarray] = {}
    images: dict[int, np.ndarray] = {}
    previewer = previews.previewer_for(pipeline, images.__setitem__)
    projection = previewer.decode

    def decode(x0: mx.array, height: int, width: int) -> np.ndarray | mx.array:
        cleans[len(cleans)] = np.array(x0)
        return projection(x0, height, width)

    previewer.decode = decode
    recorder = LoopRecorder()
    with common.attached(pipeline, recorder), common.attached(pipeline, previewer):
        pipeline.generate_image(seed=0, prompt=shells.DEFAULT_PROMPT, **kwargs)
    return cleans, images, recorder


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES.values() if f.preview is not None], ids=lambda f: f.id
)
def test_each_familys_previews_step_on_its_loops_own_sigmas(family: Family) -> None:
    """A previewer reads the sigmas the family's loop steps on where it steps outside
    ``config.scheduler`` (FLUX.3's flow map: ``LatentPreview.loop_sigmas``), and the scheduler's
    or ``denoised`` for every other family."""
    cls: Any = family.require_mflux().pipeline()
    pipeline = cls.__new__(cls)  # the family is found by class
    sigmas = previews.previewer_for(pipeline, lambda i, image: None).loop_sigmas
    assert sigmas is family.require_preview().loop_sigmas


def test_this_years_tables_are_for_the_latent_spaces_their_loops_hold() -> None:
    """FLUX.3 decodes with FLUX.2's VAE, weights mapped as FLUX.2's (its README: identical
    weights); Krea 2 with Qwen-Image's (Wan 2.1 statistics, checked above); Qwen-Image 2.1 with its
    own, whose per-channel statistics are ComfyUI's ``QwenImage21`` ones (75399d78) to 1%."""
    from mflux.models.flux2.model.flux2_vae.vae import Flux2VAE
    from mflux.models.flux2.weights.flux2_weight_mapping import Flux2WeightMapping
    from mflux.models.flux3.variants.flux3_klein_core import _Flux3KleinCore
    from mflux.models.flux3.weights.flux3_weight_mapping import Flux3WeightMapping
    from mflux.models.krea2.variants.txt2img.krea2 import Krea2
    from mflux.models.qwen.model.qwen_vae.qwen_vae import QwenVAE
    from mflux.models.qwen21.model.qwen21_vae.qwen21_vae import Qwen21VAE
    from mflux.models.qwen21.variants.txt2img.qwen_image_21 import QwenImage21

    assert _Flux3KleinCore.__annotations__["vae"] is Flux2VAE
    flux3 = [t.to_pattern for t in Flux3WeightMapping.get_vae_mapping()]
    assert flux3 == [t.to_pattern for t in Flux2WeightMapping.get_vae_mapping()]
    assert Krea2.__annotations__["vae"] is QwenVAE
    assert QwenImage21.__annotations__["vae"] is Qwen21VAE
    comfy_mean = [0.5126, 0.7721, -0.0631, 1.3506, -0.7855, -2.1025, -0.3458, 1.3722,
                  1.8873, -1.7177, -0.6510, 0.2732, 0.7562, -0.6163, -1.0277, 3.8363,
                  2.0210, 0.0472, 0.9320, 2.0087, 2.4954, -0.1391, -1.4249, 1.8464,
                  -0.5236, 1.2826, 3.7046, -1.3035, 2.7286, -1.4518, -1.9036, -1.9955,
                  -0.0342, -1.0265, -0.7636, 3.0555, 0.0746, -3.0751, -0.1076, 1.7376,
                  -1.0914, -1.9435, -0.2784, -1.3680, 0.4809, -0.4433, 0.3764, 0.5729,
                  -2.0595, 1.0960, -1.3260, -2.0211, -5.0179, 0.5275, 4.0162, 1.8505,
                  0.3026, 1.9373, 1.4937, 0.2632, 0.5547, -1.7121, -0.1562, 0.0304]  # fmt: skip
    np.testing.assert_allclose(Qwen21VAE.LATENTS_MEAN, comfy_mean, rtol=0.01, atol=1e-3)
    assert len(latent_rgb.QWEN_IMAGE21_FACTORS) == len(comfy_mean) == 64
