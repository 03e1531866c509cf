"""What a model family is: everything the app knows of one family of models, as one value.

Plain data and small functions: importing this module or any family module imports no MLX and
no mflux. A family names

- mflux's classes through its own small functions that import them on first call (``Mflux``), so
  pyright checks each import and PyInstaller collects each module;
- this app's modules that carry its integration (the gate's adapter, the random-weight shell
  builder; a loader and prompt check of its own) by dotted path, loaded with ``load`` by the
  layer that uses them (``app.adapters``, ``app.engine``), so the families sit below every other
  package and import none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mlx.core as mx

Size = tuple[int, int]
RGBFactors = tuple[tuple[float, float, float], ...]
# The sizes the window offers after a variant's own, where a family states no others.
GENERAL_SIZES: tuple[Size, ...] = (
    (1024, 1024),
    (768, 768),
    (512, 512),
    (1024, 768),
    (768, 1024),
    (1344, 768),
)


class FamilyError(LookupError):
    """A family lacks what was asked of it (an mflux class, a preview, random weights)."""


class UnknownFamilyError(FamilyError, KeyError):
    """No family has this id (or no family's mflux class is this pipeline's)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, eq=False)
class Mflux:
    """mflux's classes for the family, each imported on first call."""

    pipeline: Callable[[], type]  # the text-to-image pipeline class, mflux's constructor
    weight_definition: Callable[[], type]  # its download patterns and tokenizers
    lora_mapping: Callable[[], type] | None  # its LoRA key mapping (``get_mapping()``); None: none
    # The mflux package the classes above live in ("mflux.models.flux2"): the bundle collects it
    # whole (packaging/hooks/hook-mflux.py), since mflux imports model code lazily
    package: str
    # mflux's model name → the files of its Hub repo that mflux's loader reads by name, where
    # they are not the weight definition's download layout (Anima's ComfyUI single files, one
    # transformer per variant): what a download fetches and a snapshot must hold. Plain data (a
    # download names them without importing mflux on its thread). None: the weight definition's
    # download patterns and tokenizers.
    hub_files: Mapping[str, tuple[str, ...]] | None = None
    # Where mflux's weight definition names no tokenizers (it has no ``get_tokenizers``): why,
    # in a sentence (Lens's comes with its text encoder's own repo, which mflux fetches itself at
    # the first load); a download then fetches none. None: the definition names them, and a
    # download fetches them beside the weights.
    tokenizers_elsewhere: str | None = None

    def tokenizers(self) -> list[Any]:
        """mflux's tokenizer definitions for the family's repo (none where it names none)."""
        definition: Any = self.weight_definition()
        return [] if self.tokenizers_elsewhere else definition.get_tokenizers()


@dataclass(frozen=True, eq=False)
class LatentPreview:
    """A live step preview by a linear latent→RGB projection (``app.adapters.previews``)."""

    # mflux's unpacking of the loop's latents: (latents, height, width) → (1, C, H/8, W/8)
    unpack: Callable[[mx.array, int, int], mx.array]
    factors: RGBFactors  # C rows of (r, g, b): ``rgb = latent · factors + bias``, in [-1, 1]
    bias: tuple[float, float, float]
    # Channels of one 2×2-packed token (mflux's ``unpack_latents`` layout), projected without
    # unpacking; None where the loop's latents are not packed so.
    packed_channels: int | None
    # Where mflux's loop steps with a scheduler of its own instead of ``config.scheduler`` (FLUX.3's
    # flow map) and hands callbacks no clean prediction: the sigmas of its Euler updates for a
    # run's config (steps + 1 values), so each step's velocity is read off two consecutive
    # latents. None: the loop steps ``config.scheduler`` or passes ``denoised`` (the previewer
    # reads those).
    loop_sigmas: Callable[[Any], mx.array] | None = None


class ShellTest(StrEnum):
    """The generic tests that run a family's shell cases (``ShellCase.tests``): each iterates
    every family's cases that name it, so a new family is tested by its data alone."""

    # threshold 0 and the observing pass bit-exact to vanilla, eager
    # (tests/adapters/test_adapter_parity.py)
    parity = "parity"
    # the first-block probe on the anatomy: a forced pattern skips, each branch reuses its own
    # residual (tests/adapters/test_adapter_firstblock.py)
    probe = "probe"
    # the observing pass's residual spans the body a skip stands in for, eager and compiled, at
    # 64² (tests/adapters/test_adapter_observed_residual.py), and a skipped step adds the
    # forecast fill over the loop's own sigmas (tests/adapters/test_adapter_forecast.py): one
    # case a family, with CFG where it has it
    residual = "residual"
    # through the engine, as the variant whose mflux name is the case's (its guidance the
    # variant's default): bit-exact at threshold 0, scripted engagement, resume bit-exact
    # (tests/engine/test_engine_families.py)
    engine = "engine"
    # a LoRA for the family's mflux key mapping is baked where mflux maps it and changes the
    # output, over 4 steps (tests/adapters/test_lora.py)
    lora = "lora"
    # installing and removing a gate restores the pipeline exactly, rolls back a failure, finds
    # the family by class (tests/adapters/test_adapter_install.py): the family's first case
    # that names it, a fresh shell per test
    install = "install"
    # each step's preview is its clean prediction at the seam the loop offers, and the family's
    # table on mflux's unpacking, over 5 steps at 128×96 (tests/adapters/test_previews.py)
    preview = "preview"
    # from a picture (image-to-image, ``Family.img2img``): the loop runs only the steps after
    # the strength's, the gate counts those, threshold 0 stays bit-exact to vanilla from the same
    # picture, forced skips engage among them (tests/adapters/test_adapter_img2img.py): one case
    # a family that takes a picture
    img2img = "img2img"


# What a case runs by default: the gate's no-op, the probe and the installation's checks.
GATE_TESTS = frozenset({ShellTest.parity, ShellTest.probe, ShellTest.install})


@dataclass(frozen=True)
class ShellCase:
    """One tiny run of the family's random-weight shell (``RandomWeights``) that generic tests
    make: mflux's real ``generate_image`` on the shell of ``model_name``."""

    name: str  # unique test id, e.g. "flux2-cfg"
    model_name: str  # mflux's model name for the shell
    steps: int
    guidance: float | None  # None: the family takes no guidance argument
    seed: int = 0  # the shell's (its random weights and prompt table)
    negative_prompt: str | None = None  # a caption of its own for the unconditional branch
    # the prompt where the family reads no plain sentence (FIBO's JSON caption); None: the
    # shells' default prompt (``app.adapters.shells.DEFAULT_PROMPT``)
    prompt: str | None = None
    # attributes set on the shell's transformer for the run (another path of mflux's forward),
    # e.g. (("use_text_cache", False),)
    transformer_attrs: tuple[tuple[str, Any], ...] = ()
    # two branches a step, the unconditional keeping its own residual (CFG as one batch of two,
    # ERNIE-Image's and FIBO's, is one branch to the gate: each row of its residual a branch's)
    cfg: bool = False
    size: int = 128  # the image's side in pixels
    tests: frozenset[ShellTest] = GATE_TESTS  # the generic tests that run it
    # Steps of the engine's first-block resume test where ``steps`` are too few for the probe to
    # engage (random weights: the first block may change more than any threshold allows)
    probe_resume_steps: int | None = None

    def generate_kwargs(
        self, *, size: int | None = None, steps: int | None = None
    ) -> dict[str, Any]:
        """``generate_image``'s keywords for the case (the seed is the caller's; the prompt is
        the case's where it has one of its own)."""
        side = size or self.size
        run: dict[str, Any] = {
            "num_inference_steps": steps or self.steps,
            "height": side,
            "width": side,
        }
        if self.prompt is not None:
            run["prompt"] = self.prompt
        if self.negative_prompt is not None:
            run["negative_prompt"] = self.negative_prompt
        if self.guidance is not None:
            run["guidance"] = self.guidance
        return run


@dataclass(frozen=True, eq=False)
class RandomWeights:
    """A weight-less shell of mflux's own classes with random weights (``bench --random-weights``
    and the tests): ``builder(model_name, *, dims, prompts, dtype, seed)`` → a pipeline (the
    family's ``shell`` beside its anatomy in ``app.adapters``)."""

    builder: str  # "module:function", in app.adapters: "app.adapters.<module>:shell"
    model_name: str  # mflux's model name where a variant names none
    tiny: Any  # dimensions for CPU tests and dry runs
    full: Any  # the real dimensions, for timing on a GPU
    # The tiny runs the generic tests make of the family (``ShellTest``): with CFG where the
    # family has it and without, its distilled variants included
    cases: tuple[ShellCase, ...] = ()

    def cases_for(self, test: ShellTest) -> tuple[ShellCase, ...]:
        return tuple(case for case in self.cases if test in case.tests)


@dataclass(frozen=True, eq=False)
class FolderDetection:
    """How a model folder's transformer weights show the family (mflux-save and Hugging Face
    names alike): some name starts with one of ``prefixes`` and none with one of ``without``."""

    prefixes: tuple[str, ...]
    without: tuple[str, ...] = ()
    # (the family's built-in variant ids, weight name → shape) → the ids the weights fit;
    # None: any of them
    candidates: Callable[[tuple[str, ...], Mapping[str, Sequence[int]]], tuple[str, ...]] | None = (
        None
    )
    # Transformer weight names a folder of a built-in variant holds, where more than the first
    # prefix tells it apart (variant id → names): what the folder and snapshot tests write into
    # a stand-in of that variant's folder (``sample``), and what ``candidates`` must place it by
    samples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Folders of a copy of the family's Hub repo that hold its transformer's weights where they
    # are not in transformer/ (Anima's ComfyUI files, split_files/diffusion_models): the folder
    # check reads the weight names there too
    weight_dirs: tuple[str, ...] = ()

    def sample(self, variant_id: str) -> tuple[str, ...]:
        """A few transformer weight names a folder of ``variant_id`` holds."""
        return self.samples.get(variant_id) or (f"{self.prefixes[0]}weight",)

    def matches(self, keys: Mapping[str, Sequence[int]]) -> bool:
        return any(k.startswith(self.prefixes) for k in keys) and not (
            self.without and any(k.startswith(self.without) for k in keys)
        )

    def fits(self, members: tuple[str, ...], keys: Mapping[str, Sequence[int]]) -> tuple[str, ...]:
        return members if self.candidates is None else self.candidates(members, keys)


@dataclass(frozen=True, eq=False)
class PromptFormat:
    """What a family's prompts are, where it reads more than a plain sentence: the window shows
    ``note`` under the prompt and offers ``example`` to start from."""

    note: str  # one or two short sentences, shown under the prompt
    example: str | None = None  # a prompt in the format (where it comes from, written beside it)


@dataclass(frozen=True, eq=False)
class Family:
    """One model family. ``None`` entries are what the family does not have; only a family whose
    weights ship with the app may lack the mflux ones (``tests/families/test_family_registry.py``).
    What the family can do (its capabilities, last below) is what every other package asks, never
    which family it is."""

    id: str  # the one spelling: a variant's "family", the history, ``variants --json``
    display_name: str  # the picker's header and messages ("FLUX.2 Klein")
    short_name: str  # in sentences that list families ("FLUX.2")
    order: int  # the picker's order, ascending
    # Working memory of one generation per megapixel, an upper bound measured on MLX CUDA (see
    # ``app.variants.catalog.Variant.working_gb``), read from the committed H200 report of
    # ``memory_measured_on`` (resources/benchmarks/<variant>-1024-random-h200.json)
    activation_gb_per_megapixel: float
    memory_measured_on: str | None
    mflux: Mflux | None  # None: not an mflux model (the embedded demo)
    adapter: str | None  # the module in app.adapters whose ``install(pipeline, gate)`` gates it
    preview: LatentPreview | None  # None: the pipeline decodes its own previews (the demo)
    random_weights: RandomWeights | None
    folders: FolderDetection | None  # None: no model folders of this family
    sizes: tuple[Size, ...] = GENERAL_SIZES  # offered after a variant's own size
    # None: ``activation_gb_per_megapixel`` was measured on ``memory_measured_on``, one of this
    # family's variants (the one whose report measures most). A sentence: the figure is another
    # family's (``memory_measured_on`` names its variant), borrowed for the reason given until a
    # report of this family is committed (tests/variants/test_memory_estimate.py then fails).
    memory_basis: str | None = None

    # -- capabilities (the defaults: a model mflux loads from the Hub or a model folder) --------
    # The weights ship with the app: always on disk, nothing to download, no Hub repo, no memory
    # check (they count as no memory beside the app's own); tiny, so the engine keeps them loaded.
    weights_shipped: bool = False
    # "module:function" that builds the pipeline of a variant id (a user calibration's base id);
    # None: mflux's loader (``app.engine.loader.load_pipeline``), from the Hub or a model folder.
    loader: str | None = None
    quantizable: bool = True  # mflux can quantize its weights (``QUANTIZE_LEVELS``)
    # "module:function": ``(prompt) -> str | None``, the sentence saying why the family cannot draw
    # a prompt (a closed vocabulary), None where it can; None: every prompt is drawn.
    prompt_check: str | None = None
    calibration_prompts: tuple[str, ...] | None = None  # suggested; None: the general list
    # What its prompts are (JSON captions, say), shown under the prompt; None: plain text
    prompt_format: PromptFormat | None = None
    fixed_size: bool = False  # draws only its variants' own size (trained at that size)
    # Working memory of one generation whatever the size, where the family states it flat; None:
    # ``activation_gb_per_megapixel`` at the size.
    flat_working_gb: float | None = None
    # A run may start from a picture (image-to-image): mflux's ``generate_image`` takes
    # ``image_path`` and ``image_strength`` and starts its loop at the strength's step
    # (``Config.init_time_step``) from the picture noised to that step; the demo does the same
    # through its own codec. ``tests/families/test_family_registry.py`` holds it to mflux's
    # signatures.
    img2img: bool = False

    def __repr__(self) -> str:
        return f"Family({self.id!r})"

    @property
    def supports_lora(self) -> bool:
        return self.mflux is not None and self.mflux.lora_mapping is not None

    @property
    def mflux_packages(self) -> tuple[str, ...]:
        """The mflux packages the family's classes live in (none for a family mflux does not
        load): what the bundle must collect for it."""
        return () if self.mflux is None else (self.mflux.package,)

    def require_mflux(self) -> Mflux:
        if self.mflux is None:
            raise FamilyError(f"{self.display_name} is not an mflux model")
        return self.mflux

    def require_preview(self) -> LatentPreview:
        if self.preview is None:
            raise FamilyError(f"{self.display_name} has no latent preview projection")
        return self.preview

    def require_random_weights(self) -> RandomWeights:
        if self.random_weights is None:
            raise FamilyError(f"{self.display_name} has no random-weight shell")
        return self.random_weights


def load(path: str) -> Any:
    """The object a dotted path names: ``"package.module"`` or ``"package.module:attr.attr"``."""
    module_name, _, attributes = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for name in attributes.split(".") if attributes else ():
        target = getattr(target, name)
    return target


def join_names(names: Sequence[str], conjunction: str) -> str:
    """``["A", "B", "C"]`` → "A, B and C" (or "or")."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
