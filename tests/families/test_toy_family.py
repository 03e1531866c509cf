"""Adding a family is its family data, its anatomy, its variant rows and its tests: a toy family
defined in this module alone, registered for the test (``app.families.registered``,
``app.variants.registry.registered``), runs through the engine's job runner on the one gated step,
eager and compiled, as any family does.

The toy is a tiny transformer of its own — a few MLX blocks called ``(latents, timestep,
caption)``, not FLUX.2's keywords — inside a pipeline built like the demo's (``app.demo.pipeline``):
a ``Flux2Klein`` subclass without mflux's constructor, running mflux's real FLUX.2 loop (scheduler,
callbacks, classifier-free guidance) through its own predict, which it ``mx.compile``s where mflux
compiles its own (off M1/M2). Its family names its loader by path, as the demo's does, so the
engine loads it as it loads a family that is not on the Hub; its anatomy is the class below, its
``install`` the two lines every predict family's is.

Oracles, on each path: threshold 0 is byte-exact to the vanilla pass (the same numbers: the toy's
own predict against the gated step's re-walk of it, op for op eager, and the compiled parts where
compiled: measured 0.0); a scripted polynomial engages the gate exactly where the simulator says
on the vanilla trace (skips > 0); a resumed pass equals the full one bit for bit, after replayed
steps.

Adding a gate is its kind module and its tests: a toy gate kind defined here alone (its
parameters, its rule on floats, its live gate deciding on the step's modulated input, its vanilla
recorder and its ``GateKind``), registered for the test (``app.gate.kinds.registered``), runs on
the toy family through the same engine on both paths, with the same oracles; nothing in ``app/``
names it.
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.models.flux2.model.flux2_text_encoder.prompt_encoder import Flux2PromptEncoder
from mflux.models.flux2.variants.txt2img.flux2_klein import Flux2Klein
from mflux.utils.apple_silicon import AppleSiliconUtil
from mlx import nn

from app.adapters import shells
from app.adapters.base import Installation
from app.adapters.common import use_precision
from app.adapters.compiled import is_compiled
from app.adapters.entries import PredictAnatomy, StepCall, install_predict
from app.adapters.step import GatedStep
from app.engine.engine import Engine
from app.engine.jobs import Generate, run_job
from app.engine.report import steps_from_json
from app.engine.request import make_request
from app.families import Family, FamilyError, Mflux, get_family, registered
from app.gate import Decision, LiveGate, Verdict, simulate
from app.gate.events import Figure, StepEvent
from app.gate.kinds.base import (
    Candidate,
    GateKind,
    PlotSpec,
    ScheduleFacts,
    format_figure,
    walk_candidates,
)
from app.gate.live import TapRecorder, read_ratio, rel_l1_pair
from app.gate.provenance import Provenance
from app.gate.signals import Signal, Tap
from app.gate.simulator import Engagement
from app.variants import Variant, get_variant
from app.variants import registry as variant_registry
from tests.fakes.params import teacache_params

# -- the toy transformer: its own blocks and call signature ---------------------------------------

CHANNELS = 128  # FLUX.2's packed latent tokens: the loop this pipeline runs hands it those
CAPTION = 32  # the toy caption's features per token
TIME = 32  # sinusoidal timestep features


def time_features(timestep: mx.array) -> mx.array:
    """Sinusoidal features of mflux's FLUX.2 timesteps (1000 → 0 over a generation)."""
    t = mx.array(timestep).reshape(-1).astype(mx.float32)
    freqs = mx.exp(-math.log(1000.0) * mx.arange(TIME // 2, dtype=mx.float32) / (TIME // 2))
    angles = t[:, None] * freqs[None, :]
    return mx.concatenate([mx.cos(angles), mx.sin(angles)], axis=-1)


class ToyBlock(nn.Module):
    """Modulated self-attention over the image tokens, with the caption's keys and values in
    front, then a modulated-norm MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim, affine=False, eps=1e-6)
        self.modulation = nn.Linear(dim, 2 * dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.caption_kv = nn.Linear(dim, 2 * dim)
        self.attn_out = nn.Linear(dim, dim)
        self.mlp_in = nn.Linear(dim, 4 * dim)
        self.mlp_out = nn.Linear(4 * dim, dim)

    def modulate(self, x: mx.array, temb: mx.array) -> mx.array:
        shift, scale = mx.split(self.modulation(temb)[:, None, :], 2, axis=-1)
        return self.norm(x) * (1 + scale) + shift

    def __call__(self, x: mx.array, temb: mx.array, caption: mx.array) -> mx.array:
        batch, tokens, dim = x.shape
        q, k, v = mx.split(self.qkv(self.modulate(x, temb)), 3, axis=-1)
        caption_k, caption_v = mx.split(self.caption_kv(caption), 2, axis=-1)
        k = mx.concatenate([caption_k, k], axis=1)
        v = mx.concatenate([caption_v, v], axis=1)

        def split_heads(a: mx.array) -> mx.array:
            return a.reshape(batch, a.shape[1], self.heads, -1).transpose(0, 2, 1, 3)

        attended = mx.fast.scaled_dot_product_attention(
            split_heads(q), split_heads(k), split_heads(v), scale=(dim // self.heads) ** -0.5
        )
        x = x + self.attn_out(attended.transpose(0, 2, 1, 3).reshape(batch, tokens, dim))
        return x + self.mlp_out(nn.gelu(self.mlp_in(self.norm(x))))


class ToyTransformer(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, depth: int = 3) -> None:
        super().__init__()
        self.image_in = nn.Linear(CHANNELS, dim)
        self.time_in = nn.Linear(TIME, dim)
        self.caption_in = nn.Linear(CAPTION, dim)
        self.blocks = [ToyBlock(dim, heads) for _ in range(depth)]
        self.norm_out = nn.LayerNorm(dim, affine=False, eps=1e-6)
        self.image_out = nn.Linear(dim, CHANNELS)

    def time_embedding(self, timestep: mx.array) -> mx.array:
        return nn.silu(self.time_in(time_features(timestep)))

    def __call__(self, latents: mx.array, timestep: mx.array, caption: mx.array) -> mx.array:
        temb = self.time_embedding(timestep)
        x = self.image_in(latents)
        context = self.caption_in(caption)
        for block in self.blocks:
            x = block(x, temb, context)
        return self.image_out(self.norm_out(x))


# -- the pipeline: mflux's FLUX.2 loop around the toy, built like the demo's ----------------------


class ToyPrompts:
    """The toy's text encoder: a caption of 8 tokens drawn from the prompt's CRC (the same
    prompt, the same caption, in any process); the negative only under CFG, as mflux's."""

    def __call__(
        self, *, prompt: str, negative_prompt: str | None, guidance: float
    ) -> tuple[mx.array, mx.array, mx.array | None, mx.array | None]:
        embeds = self.encode(prompt)
        if guidance is not None and guidance > 1.0 and negative_prompt is not None:
            negative = self.encode(negative_prompt)
            return (
                embeds,
                Flux2PromptEncoder.prepare_text_ids(embeds),
                negative,
                Flux2PromptEncoder.prepare_text_ids(negative),
            )
        return embeds, Flux2PromptEncoder.prepare_text_ids(embeds), None, None

    @staticmethod
    def encode(text: str) -> mx.array:
        key = mx.random.key(zlib.crc32(text.encode("utf-8")))
        return mx.random.normal((1, 8, CAPTION), key=key).astype(ModelConfig.precision)


class ToyPipeline(Flux2Klein):
    """mflux's FLUX.2 loop (``Flux2Klein.generate_image``) in float32 around the toy transformer,
    predicting through the toy's own call."""

    @staticmethod
    def _predict(transformer: Any) -> Any:  # type: ignore[override]
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
            noise = transformer(latents, timestep, prompt_embeds)
            if negative_prompt_embeds is not None:
                negative = transformer(latents, timestep, negative_prompt_embeds)
                noise = negative + guidance * (noise - negative)
            return noise

        # mflux's rule for its own predict: eager on M1/M2, compiled elsewhere
        return predict if AppleSiliconUtil.is_m1_or_m2() else mx.compile(predict)

    def generate_image(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        with use_precision(mx.float32):
            return super().generate_image(*args, **kwargs)


def toy_model_config() -> ModelConfig:
    """FLUX.2 Klein's scheduling rules (sigma shift from the image sequence length) under a name
    no downloader resolves, as the demo's."""
    return ModelConfig(
        priority=999,
        aliases=["toy"],
        model_name="teacache-studio/toy",
        base_model=None,
        controlnet_model=None,
        custom_transformer_model=None,
        num_train_steps=1000,
        max_sequence_length=8,
        supports_guidance=True,
        requires_sigma_shift=True,
        transformer_overrides=None,
        text_encoder_overrides=None,
    )


def load_toy_pipeline(variant_id: str) -> ToyPipeline:
    """The family's loader (``Family.loader``): random weights, seeded, built on the spot."""
    from mflux.models.common.compute_precision.compute_precision import ComputePrecision

    pipeline = shells._base_shell(ToyPipeline, toy_model_config())
    pipeline.prompt_cache = {}
    pipeline.compute_precision = ComputePrecision(None)
    pipeline.tokenizers = {}
    pipeline.text_encoder = None
    pipeline.small_decoder = False
    pipeline.small_text_encoder = False
    mx.random.seed(0)  # the modules' own init (biases) draws from the global key
    transformer = ToyTransformer()
    shells._init_weights(transformer, 0, mx.float32)
    pipeline.transformer = transformer
    pipeline._encode_prompt_pair = ToyPrompts()
    LOADED.append(pipeline)
    return pipeline


LOADED: list[ToyPipeline] = []


# -- its anatomy and install: what an app/adapters/<module>.py holds -------------------------------


class ToyAnatomy(PredictAnatomy):
    """``rest``: one branch's caption embeddings."""

    tr: ToyTransformer

    @property
    def num_blocks(self) -> int:
        return len(self.tr.blocks)

    def embed(self, latents: mx.array, timestep: Any, rest: Any) -> dict[str, mx.array]:
        return {"x": self.tr.image_in(latents), "temb": self.tr.time_embedding(timestep)}

    def stream_tokens(self, head: dict[str, mx.array], rest: Any) -> mx.array:
        return head["x"]

    def signal(self, head: dict[str, mx.array], ctx: Any, before: Any, after: Any) -> mx.array:
        # TeaCache's: block 0's modulated image input (caption-independent: one for both branches)
        return self.tr.blocks[0].modulate(head["x"], head["temb"])

    def context(self, head: dict[str, mx.array], rest: Any) -> dict[str, mx.array]:
        return {"temb": head["temb"], "caption": self.tr.caption_in(rest)}

    def stream(self, head: dict[str, mx.array], ctx: dict[str, mx.array]) -> mx.array:
        return head["x"]

    def blocks(self, ctx: dict[str, mx.array], state: mx.array, start: int, stop: int) -> mx.array:
        for block in self.tr.blocks[start:stop]:
            state = block(state, ctx["temb"], ctx["caption"])
        return state

    def tokens(self, ctx: dict[str, mx.array], state: mx.array) -> mx.array:
        return state

    def tail(self, head: dict[str, mx.array], tokens: mx.array, rest: Any) -> mx.array:
        return self.tr.image_out(self.tr.norm_out(tokens))

    @staticmethod
    def next_timestep(config: Any, t: int) -> mx.array:
        return config.scheduler.timesteps[t]  # as Flux2Klein.generate_image passes it

    def step_call(
        self,
        latents: mx.array,
        latent_ids: mx.array,
        prompt_embeds: mx.array,
        text_ids: mx.array,
        negative_prompt_embeds: mx.array | None,
        negative_text_ids: mx.array | None,
        guidance: float,
        timestep: mx.array,
    ) -> StepCall:
        return StepCall(latents, timestep, prompt_embeds, negative_prompt_embeds, guidance)

    def combine(self, cond: mx.array, uncond: mx.array, guidance: Any) -> mx.array:
        return uncond + guidance * (cond - uncond)


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_predict(pipeline, gate, family=get_family(TOY.id), anatomy=ToyAnatomy)


# -- its family data and variant row: what app/families/<module>.py and builtin.py hold ------------


def _no_weight_definition() -> type:
    raise FamilyError("the toy family's weights are built by its loader, not downloaded")


TOY = Family(
    id="toy",
    display_name="Toy family",
    short_name="Toy",
    order=900,
    activation_gb_per_megapixel=0.0,  # ``flat_working_gb`` states the toy's own figure
    memory_measured_on=None,
    mflux=Mflux(
        pipeline=lambda: ToyPipeline,  # found by class, before FLUX.2's (its base)
        weight_definition=_no_weight_definition,
        lora_mapping=None,
        package=__name__,
    ),
    adapter=__name__,  # this module's ``install``
    preview=None,  # none asked for here (requests without previews)
    random_weights=None,  # its loader builds random weights itself
    folders=None,
    sizes=((64, 64),),
    weights_shipped=True,
    loader=f"{__name__}:load_toy_pipeline",
    quantizable=False,
    fixed_size=True,
    flat_working_gb=0.1,
)
STEPS = 6
# A constant prediction of 0.01 a step: at 0.05 the gate skips until the accumulated prediction
# reaches it (scripted engagement, whatever the toy's signal).
SCRIPTED = (0.0, 0.0, 0.0, 0.0, 0.01)
TOY_VARIANT = Variant(
    id="toy",
    display_name="Toy",
    family=TOY,
    distilled=False,
    default_steps=STEPS,
    default_guidance=3.0,  # CFG: both branches run, each keeps its residual
    default_threshold=0.05,
    coefficients=SCRIPTED,
    provenance=Provenance(source="scripted for the test: a constant prediction a step"),
    hf_repo=None,
    params_billion=0.0002,
    cfg=True,
    default_size=(64, 64),
)

# -- the toy gate kind: what an app/gate/kinds/<module>.py holds, with its rule and live gate ------
# A rule of its own on the step's modulated input (``Tap.modulated_input``, through the kind's
# ``Signal``): add up the input's relative L1 change from step to step and skip while the sum stays
# under the threshold; the first ``warmup_steps`` and the last step compute.

TOY_GATE_NAME = "toy-gate"


@dataclass(frozen=True, slots=True)
class ToyGateParams:
    threshold: float
    warmup_steps: int = 2

    gate: ClassVar[str] = TOY_GATE_NAME

    @property
    def enabled(self) -> bool:
        return self.threshold > 0.0

    def with_threshold(self, threshold: float) -> ToyGateParams:
        return replace(self, threshold=threshold)

    def eligible_steps(self, num_steps: int) -> int:
        return max(0, num_steps - self.warmup_steps - 1)


@dataclass(frozen=True, slots=True)
class ToyGateSettings:
    """The toy gate's "calibration": its defaults, the same on every variant."""

    default_threshold: float

    gate: ClassVar[str] = TOY_GATE_NAME


def toy_rule(
    params: ToyGateParams, index: int, num_steps: int, change: float | None, total: float
) -> tuple[Verdict, float]:
    """One step's verdict and the running sum after it: the live gate's and the simulator's."""
    last = index == num_steps - 1
    if (
        not params.enabled
        or index < params.warmup_steps
        or last
        or change is None
        or not math.isfinite(change)
    ):
        stores = params.enabled and not last  # off, nothing is ever reused
        return Verdict(index, Decision.computed, change, store_residual=stores), 0.0
    total += change
    if total < params.threshold:
        return Verdict(index, Decision.skipped, change, accumulated=total), total
    return Verdict(index, Decision.computed, change, accumulated=total, store_residual=True), 0.0


def simulate_toy_gate(params: ToyGateParams, trace: Sequence[float | None]) -> list[Verdict]:
    verdicts, total = [], 0.0
    for index, change in enumerate(trace):
        verdict, total = toy_rule(params, index, len(trace), change, total)
        verdicts.append(verdict)
    return verdicts


class ToyGate(LiveGate):
    """Its live gate: the modulated input against the previous step's (consecutive anchoring, so
    a gated run's measured trace replays its own pattern in the simulator)."""

    gate_name = TOY_GATE_NAME
    signal = Signal.modulated_input  # DECIDES_ON: the step hands ``decide`` Tap.modulated_input
    params: ToyGateParams

    def __init__(self, params: ToyGateParams, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self._total = 0.0
        self._anchor: mx.array | None = None

    def begin(self, num_steps: int, positions: Sequence[float] | None = None) -> None:
        super().begin(num_steps, positions)
        self._total = 0.0

    def release(self) -> None:
        super().release()
        self._anchor = None

    @property
    def needs_signal(self) -> bool:
        return self.params.enabled

    @property
    def anchor(self) -> mx.array | None:
        return self._anchor

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if self._pending is not None:
            return self._pending  # the unconditional branch: the conditional one's verdict
        change = None
        if signal is not None and self.needs_signal:
            if self._anchor is not None:
                change = read_ratio(
                    self.measure(signal, self._anchor) if measured is None else measured
                )
            else:
                self._unevaluated.append(signal)  # evaluated with the step's latents
            self._anchor = signal
        verdict, self._total = toy_rule(
            self.params, self._index, self.num_steps, change, self._total
        )
        if not verdict.store_residual and verdict.decision.computes:
            self._residuals.clear()
        self._pending = verdict
        return verdict


class ToyGateRecorder(TapRecorder):
    """Its record of a vanilla step: the modulated input's change against the previous step's
    (``change``), what its simulator replays."""

    taps = frozenset({Tap.modulated_input})

    def __init__(self) -> None:
        self.kind = TOY_GATE_NAME
        self._previous: mx.array | None = None
        self._pair: mx.array | None = None

    def begin(self) -> None:
        self._previous, self._pair = None, None

    def release(self) -> None:
        self._previous = None

    def record(self, tap: Tap, value: mx.array) -> Sequence[mx.array]:
        if self._previous is not None:
            self._pair = rel_l1_pair(value, self._previous)
        self._previous = value
        return (value,) if self._pair is None else (value, self._pair)

    def figures(self) -> dict[str, Figure]:
        pair, self._pair = self._pair, None
        return {"change": None if pair is None else read_ratio(pair)}


class ToyGateKind(GateKind[ToyGateParams, ToyGateSettings, float]):
    name = TOY_GATE_NAME
    label = "Toy gate"
    threshold_meaning = "Toy gate: how much the step's input may move, summed, before a step runs"
    threshold_quantity = "summed input change"
    params_type = ToyGateParams
    calibration_type = ToyGateSettings
    uncalibrated = ToyGateSettings(default_threshold=0.1)  # runs on every variant
    signal = Signal.modulated_input
    calibration_method = None
    fallback_threshold = 0.1
    skips_at_onset = False
    exact_simulation = False  # exact up to the first skip; after it, on the run's own trace
    calibration_free = True
    plot = PlotSpec("input change", "input change against the previous step", "summed change")
    onset_source = "Measured on this run"
    onset_quantity = "input change"
    onset_noun = "input change"
    floor_source = "the input's change, measured on each run"
    no_default_reason = "the toy gate sets no default threshold"
    no_skip_reason = "the input changes by 1 or more at every step it could skip"

    def params(self, calibration: ToyGateSettings, threshold: float | None = None) -> ToyGateParams:
        return ToyGateParams(calibration.default_threshold if threshold is None else threshold)

    def default_threshold(self, calibration: ToyGateSettings) -> float | None:
        return calibration.default_threshold

    def verdict_figures(self, verdict: Verdict) -> dict[str, Figure]:
        return {"change": verdict.rel_l1}

    def recorder(
        self, calibration: ToyGateSettings | None, *, calibrating: bool = False
    ) -> TapRecorder:
        return ToyGateRecorder()

    def trace(self, steps: Sequence[StepEvent | None]) -> list[float | None]:
        found: list[float | None] = []
        for step in steps:
            change = None if step is None else step.figures(self.name).get("change")
            found.append(change if isinstance(change, float) else None)
        return found

    def traced(self, trace: Sequence[float | None]) -> bool:
        return any(change is not None for change in trace)

    def simulate(self, params: ToyGateParams, trace: Sequence[float | None]) -> list[Verdict]:
        return simulate_toy_gate(params, trace)

    def engagement(self, params: ToyGateParams, trace: Sequence[float | None]) -> Engagement:
        """Until the first skip every step computes, so the sum is one step's change: skipping
        begins above the smallest change of an eligible step."""
        n = len(trace)
        eligible = [
            (c, i)
            for i, c in enumerate(trace)
            if params.warmup_steps <= i < n - 1 and c is not None
        ]
        onset, step = min(eligible) if eligible else (None, None)
        return Engagement(params.eligible_steps(n), onset, step)

    def candidates(self, params: ToyGateParams, trace: Sequence[float | None]) -> list[Candidate]:
        return walk_candidates(
            lambda probe: simulate_toy_gate(params.with_threshold(probe), trace), lambda v: True
        )

    def live_class(self) -> type[LiveGate]:
        return ToyGate

    def schedule(self, params: ToyGateParams, steps: int) -> ScheduleFacts:
        eligible = params.eligible_steps(steps)
        return ScheduleFacts(eligible, 0.0 if eligible else None)

    def no_eligible_reason(self, params: ToyGateParams, steps: int) -> str:
        return f"{steps} steps leave no step the toy gate may skip"

    def floor_reason(self, params: ToyGateParams, steps: int, floor: float) -> str:
        return "threshold 0 turns the toy gate off"

    def eligible_reason(self, eligible: int, steps: int) -> str:
        return f"{eligible} of {steps} steps may be skipped by the toy gate"

    def calibration_says_skips(
        self, calibration: ToyGateSettings, steps: int, threshold: float
    ) -> bool:
        return threshold > 0.0 and self.params(calibration, threshold).eligible_steps(steps) > 0

    def plot_value(self, step: StepEvent) -> float | None:
        change = step.figures(self.name).get("change")
        return change if isinstance(change, float) else None

    def step_lines(self, step: StepEvent, gated: bool) -> list[str]:
        return [f"input change: {format_figure(self.plot_value(step))}"]

    def calibration_lines(self, calibration: ToyGateSettings) -> list[str]:
        return []

    def provenance_text(self, calibration: ToyGateSettings) -> str:
        return "A test's toy rule."

    def calibration_summary(self, calibration: ToyGateSettings) -> str:
        return "The toy gate needs no calibration."

    def threshold_hint(
        self,
        params: ToyGateParams,
        steps: int,
        *,
        measured: bool = False,
        onset: float | None = None,
    ) -> str:
        return self.eligible_reason(params.eligible_steps(steps), steps)


TOY_GATE = ToyGateKind()
# Entered beside the toy family in the ``toy`` fixture below (``app.gate.kinds.registered``).
TOY_GATE_KINDS: tuple[Any, ...] = (TOY_GATE,)


@pytest.fixture
def toy() -> Iterator[Family]:
    """The toy family, its variant row and its gate kinds registered for the test only."""
    from app.gate import kinds

    LOADED.clear()
    with ExitStack() as stack:
        family = stack.enter_context(registered(TOY))
        stack.enter_context(variant_registry.registered(TOY_VARIANT))
        for kind in TOY_GATE_KINDS:
            stack.enter_context(kinds.registered(kind))
        yield family
    LOADED.clear()


@pytest.fixture(params=["eager", "compiled"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """mflux's eager path (M1/M2) or its compiled one; records whether each generation's gated
    step was compiled."""
    eager = request.param == "eager"
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: eager))
    compiled: list[bool] = []
    original = GatedStep.__init__

    def recording(self: GatedStep, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        compiled.append(self.compiled)

    monkeypatch.setattr(GatedStep, "__init__", recording)
    yield request.param
    assert compiled and set(compiled) == {not eager}  # the step followed the pipeline's predict


def _run(
    engine: Engine,
    variant_id: str,
    threshold: float,
    *,
    resume: bool = False,
    gate: str | None = None,
) -> dict:
    """One Generate job through the job runner; its report as saved."""
    request = make_request(
        variant_id, shells.DEFAULT_PROMPT, seed=1, threshold=threshold, resume=resume, gate=gate
    )
    events: list[Any] = []
    report = run_job(engine, 1, Generate(request), events.append, threading.Event())
    assert report is not None, events[-1]
    return report.to_json()


def test_the_toy_family_is_registered_for_the_test_only(toy: Family) -> None:
    from app.adapters import detect_family
    from app.families import FAMILIES

    assert get_family("toy") is toy and list(FAMILIES)[-1] == "toy"  # the picker's order
    assert get_variant("toy").family is toy
    pipeline = load_toy_pipeline("toy")
    assert detect_family(pipeline) is toy  # its own class before FLUX.2's, its base
    with pytest.raises(FamilyError, match="registered already"), registered(TOY):
        pass


def test_registration_ends_with_the_block() -> None:
    from app.families import FAMILIES
    from app.variants import VARIANTS

    with registered(TOY), variant_registry.registered(TOY_VARIANT):
        assert "toy" in FAMILIES and "toy" in VARIANTS
    assert "toy" not in FAMILIES and "toy" not in VARIANTS


@pytest.mark.usefixtures("toy")
def test_the_toy_family_runs_through_the_engine(path: str) -> None:
    """Threshold 0 byte-exact to vanilla, the scripted gate engaging where the simulator says,
    and a resumed pass bit-exact to the full one, on the ``path`` step."""
    # The default loader: the family's own (``Family.loader``). No warm-up generation: it only
    # keeps one-time costs out of timed passes, and nothing here is timed.
    engine = Engine(warmup_steps=0)
    off = _run(engine, "toy", 0.0)
    assert off["skipped"] == 0 and off["max_abs_diff"] == 0.0
    assert off["gated_latents_sha256"] == off["vanilla_latents_sha256"]
    trace = off["vanilla_trace"]
    assert len(trace) == STEPS and all(x is not None for x in trace[1:])  # the signal measured

    gated = _run(engine, "toy", 0.05)
    expected = simulate(teacache_params(TOY_VARIANT, 0.05), trace)
    assert gated["pattern"] == "".join(v.decision.letter for v in expected)
    assert gated["skipped"] > 0 and gated["max_abs_diff"] > 0.0  # engaged, and it shows
    assert gated["vanilla_cached"]  # the same vanilla pass, cached

    # Resume: a polynomial whose first skip comes after replayed steps (predicted = C − k(x −
    # x₁)²: largest at step 1's measured change, so step 1 computes)
    x1, c = trace[1], 0.1
    k = 0.09 / max((x - x1) ** 2 for x in trace[2:])
    later = min(c - k * (x - x1) ** 2 for x in trace[2 : STEPS - 1])
    resuming = replace(
        TOY_VARIANT, id="toy-resume", coefficients=(0.0, 0.0, -k, 2 * k * x1, c - k * x1 * x1)
    )
    threshold = (c + later) / 2
    verdicts = simulate(teacache_params(resuming, threshold), trace)
    first_skip = next(v.index for v in verdicts if v.decision is Decision.skipped)
    assert first_skip >= 2
    with variant_registry.registered(resuming):
        full = _run(engine, "toy-resume", threshold)
        resumed = _run(engine, "toy-resume", threshold, resume=True)
    assert full["skipped"] > 0  # engagement: the comparison is not a no-op
    assert resumed["resumed_from_step"] == first_skip - 1
    assert resumed["pattern"] == full["pattern"]
    assert resumed["gated_latents_sha256"] == full["gated_latents_sha256"]
    # a pipeline a variant, loaded by the family's loader; its own predict compiled where
    # mflux's is (the gated step followed it: the ``path`` fixture)
    assert len(LOADED) == 2
    own = ToyPipeline._predict(LOADED[0].transformer)
    assert is_compiled(own) is (path == "compiled")


@pytest.mark.usefixtures("toy")
def test_a_toy_gate_runs_on_the_toy_family(path: str) -> None:
    """A gate kind of this module's own, registered for the test, through the engine on the
    ``path`` step: threshold 0 byte-exact to vanilla; the vanilla recorder asked it for its trace
    (its own section of each step); an engaging threshold skips where its simulator says on that
    trace up to the first skip, and everywhere on the run's own measured trace; a resumed pass
    bit-exact to the full one, after replayed steps."""
    from app.gate.kinds import GATE_KINDS
    from app.variants import VARIANTS

    assert GATE_KINDS[TOY_GATE.name] is TOY_GATE and TOY_GATE.name in VARIANTS["toy"].gates
    engine = Engine(warmup_steps=0)
    off = _run(engine, "toy", 0.0, gate=TOY_GATE.name)
    assert off["gate"] == TOY_GATE.name and off["pattern"] == "C" * STEPS
    assert off["max_abs_diff"] == 0.0
    assert off["gated_latents_sha256"] == off["vanilla_latents_sha256"]
    vanilla = steps_from_json(off, "vanilla_steps_detail")
    trace = TOY_GATE.trace(vanilla)
    assert len(trace) == STEPS and all(isinstance(x, float) and x > 0 for x in trace[1:])
    assert all("teacache" in step.signals for step in vanilla)  # every kind asked, not only it

    # The smallest threshold that skips on vanilla's trace; its first skip comes after the
    # warm-up, so a resumed pass replays at least one step.
    params = TOY_GATE.params(TOY_GATE.uncalibrated)
    chosen = TOY_GATE.candidates(params, trace)[0]
    first_skip = chosen.pattern.index("S")
    assert first_skip >= params.warmup_steps
    expected = simulate_toy_gate(params.with_threshold(chosen.threshold), trace)

    gated = _run(engine, "toy", chosen.threshold, gate=TOY_GATE.name)
    assert gated["skipped"] > 0 and gated["max_abs_diff"] > 0.0  # engaged, and it shows
    assert gated["vanilla_cached"]  # the vanilla pass of the run at threshold 0, cached
    # Up to its first skip the run is vanilla's, so the simulator on vanilla's trace is exact
    # there; after it, the run's own measured changes (its section of each step) replay it.
    assert gated["pattern"][: first_skip + 1] == chosen.pattern[: first_skip + 1]
    assert [v.decision.letter for v in expected][: first_skip + 1] == list(
        chosen.pattern[: first_skip + 1]
    )
    measured = TOY_GATE.trace(steps_from_json(gated))
    replayed = simulate_toy_gate(params.with_threshold(chosen.threshold), measured)
    assert gated["pattern"] == "".join(v.decision.letter for v in replayed)

    resumed = _run(engine, "toy", chosen.threshold, gate=TOY_GATE.name, resume=True)
    assert resumed["resumed_from_step"] == first_skip - 1 >= 1
    assert resumed["pattern"] == gated["pattern"]
    assert resumed["gated_latents_sha256"] == gated["gated_latents_sha256"]
