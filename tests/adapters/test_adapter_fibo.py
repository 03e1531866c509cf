"""FIBO and FIBO Lite on a tiny random-weight shell of mflux's own classes running mflux's real
``generate_image`` (one block of each kind at FIBO's hard-coded 3072 width, 64² pixels: 16 image
tokens beside 12 caption tokens).

mflux runs FIBO eagerly, so vanilla and the gated re-walk share one numerical path and compare bit
for bit. With classifier-free guidance mflux runs both branches in one transformer call as a batch
of two (``[negative, positive]``): one decision a step, read on the conditional rows, and one
residual over the batch whose rows are each branch's own.

Until the family kit's generic tests take ``RandomWeights.cases``, the cases are listed here.
"""

from __future__ import annotations

import inspect
from typing import Any

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig

from app.adapters import common, install_gate
from app.adapters.common import COND
from app.adapters.fibo import CAPTION, FiboAnatomy, shell
from app.adapters.previews import family_projection
from app.families import get_family
from app.families.fibo import CAPTION_LAYERS, FIBO_FULL, FIBO_TINY
from app.gate import Decision, TeaCacheParams, Verdict
from tests.fakes import probes

OFF = TeaCacheParams(coefficients=(0.0, 0.0, 0.0, 0.0, 1.0), rel_l1_thresh=0.0)
# A constant prediction under the threshold: skip, compute, skip… between the computed ends.
ALTERNATE = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
STEPS = 5
SIZE = {"num_inference_steps": STEPS, "height": 64, "width": 64, "prompt": CAPTION}
# (model, guidance): FIBO with CFG (mflux's command-line default 5) and without (guidance 1: the
# positive caption alone); FIBO Lite, which mflux runs at guidance 1 whatever is asked.
CASES = {
    "fibo-cfg": ("fibo", 5.0),
    "fibo-no-cfg": ("fibo", 1.0),
    "fibo-lite": ("fibo-lite", None),
}

pytestmark = pytest.mark.usefixtures("float32", "eager")  # tests/adapters/conftest.py


@pytest.fixture(scope="module")
def pipeline() -> Any:
    with common.use_precision(mx.float32):
        return shell("fibo")


def _kwargs(pipeline: Any, case: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The case's ``generate_image`` keywords; FIBO Lite is FIBO's shell under its own config
    (the same transformer classes: mflux reads the variant off ``model_config.aliases``)."""
    model, guidance = CASES[case]
    monkeypatch.setattr(pipeline, "model_config", ModelConfig.from_name(model_name=model))
    return SIZE if guidance is None else {**SIZE, "guidance": guidance}


@pytest.mark.parametrize("case", list(CASES))
def test_threshold_zero_and_observe_are_bit_exact_to_vanilla(
    pipeline: Any, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs = _kwargs(pipeline, case, monkeypatch)
    vanilla = probes.generate_latents(pipeline, **kwargs)
    off = probes.RecordingGate(OFF)
    with install_gate(pipeline, off):
        gated = probes.generate_latents(pipeline, **kwargs)
    trace = probes.recorder(calibrating=True)
    with install_gate(pipeline, trace):
        observed = probes.generate_latents(pipeline, **kwargs)

    assert mx.array_equal(gated, vanilla).item()
    assert mx.array_equal(observed, vanilla).item()
    # Threshold 0 is mflux's own call: no signal, nothing stored or reused.
    assert off.pattern == "C" * STEPS and off.signals == [] and off.stored == {}
    # The observing pass measured the signal and the output change on every step after the first.
    assert trace.skipped == 0 and len(trace.events) == STEPS
    assert all(
        probes.figure(e, "teacache", "rel_l1") is not None
        and probes.figure(e, "teacache", "output_rel_l1") is not None
        for e in trace.events[1:]
    )


class _SignalRecorder(probes.RecordingGate):
    """Also keeps each step's signal (the conditional rows' modulated input)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.signal_values: list[mx.array] = []

    def decide(self, signal: mx.array | None, measured: mx.array | None = None) -> Verdict:
        if signal is not None:
            self.signal_values.append(signal)
        return super().decide(signal, measured)


def test_forced_skips_reuse_each_branchs_own_residual_rows(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs = _kwargs(pipeline, "fibo-cfg", monkeypatch)
    gate = _SignalRecorder(ALTERNATE, capture_output=True)

    def released_before_decode() -> None:
        assert gate.cached_branches == (), "residuals must be released before the VAE decode"

    pipeline.vae.before_decode = released_before_decode
    try:
        with install_gate(pipeline, gate):
            forced = probes.generate_latents(pipeline, **kwargs)
    finally:
        pipeline.vae.before_decode = None
    vanilla = probes.generate_latents(pipeline, **kwargs)

    assert gate.pattern == "FSCSF" and gate.skipped == 2  # engagement
    assert not mx.array_equal(forced, vanilla).item()
    assert all(e.decision is not Decision.numerical_miss for e in gate.events)
    # One call a step: one branch as the gate sees it, its residual a batch of both branches.
    assert {branch for _, branch in gate.stored} == {COND}
    image_tokens = (64 // 16) ** 2
    for _, _, residual in gate.stored.values():
        assert residual.shape == (2, image_tokens, 3072)
        assert not mx.array_equal(residual[0], residual[1]).item()  # each row its branch's
    # The decision reads the conditional rows: one of the two.
    assert gate.signals == list(range(STEPS))
    assert all(s.shape == (1, image_tokens, 3072) for s in gate.signal_values)
    # A skip adds the residual the last computed step stored, row for row, to its own input.
    for event in gate.events:
        if event.decision is not Decision.skipped:
            continue
        previous = max(i for i, _ in gate.stored if i < event.index)
        _, _, residual = gate.stored[(previous, COND)]
        base, reused, result = gate.reused[(event.index, COND)]
        assert reused is residual and base.shape == residual.shape
        assert mx.array_equal(result, base + residual).item()


def test_the_anatomy_walks_mfluxs_forward_and_leaves_the_edit_path_alone(
    pipeline: Any,
) -> None:
    """The whole ungated forward of the anatomy against ``FiboTransformer.__call__`` on the
    inputs mflux's loop hands it (a CFG batch), bit for bit; a call with a conditioning image
    (FIBO Edit, #41) is not the anatomy's."""
    from mflux.models.common.config.config import Config
    from mflux.models.fibo.model.fibo_transformer.transformer import FiboTransformer

    tr = pipeline.transformer
    config = Config(
        width=64, height=64, guidance=5.0, num_inference_steps=STEPS,
        model_config=pipeline.model_config, scheduler="flow_match_euler_discrete",
    )  # fmt: skip
    key = mx.random.key(3)
    latents = mx.random.normal((1, 16, 48), key=key)
    embeds = mx.random.normal((2, 12, 4096), key=mx.random.split(key)[0])
    layers = [mx.random.normal((2, 12, 2048), key=k) for k in mx.random.split(key, CAPTION_LAYERS)]
    theirs = FiboTransformer.__call__(tr, 2, config, latents, embeds, layers)
    anatomy = FiboAnatomy(tr)
    call = anatomy.branch_call(
        t=2, config=config, hidden_states=latents, encoder_hidden_states=embeds,
        text_encoder_layers=layers,
    )  # fmt: skip
    assert call is not None
    ours = anatomy.forward(call.latents, call.timestep, call.cond)
    assert ours.shape == (2, 16, 48) and mx.array_equal(ours, theirs).item()
    edit = anatomy.branch_call(
        t=2, config=config, hidden_states=latents, encoder_hidden_states=embeds,
        text_encoder_layers=layers, conditioning_seq_len=16,
    )  # fmt: skip
    assert edit is None


def test_the_preview_projects_the_loops_wan22_latents(pipeline: Any) -> None:
    latents = mx.random.normal((1, 16, 48), key=mx.random.key(0))  # 64² pixels: 4 × 4 tokens
    thumbnail = family_projection(get_family("fibo"))(latents, 64, 64)
    assert thumbnail.shape == (4, 4, 3) and thumbnail.dtype == mx.uint8


def test_the_shells_dimensions_are_mfluxs() -> None:
    """The real size is ``FiboTransformer()``'s own (no config overrides FIBO's or FIBO Lite's);
    the tiny one changes only the block counts, which are all mflux's constructor takes."""
    from mflux.models.fibo.model.fibo_transformer.transformer import FiboTransformer

    defaults = {
        name: p.default
        for name, p in inspect.signature(FiboTransformer.__init__).parameters.items()
    }
    assert {k: defaults[k] for k in FIBO_FULL.kwargs()} == FIBO_FULL.kwargs()
    assert FIBO_FULL.blocks == CAPTION_LAYERS  # one caption layer per block of the real model
    assert FIBO_TINY.blocks < FIBO_FULL.blocks
    for name in ("fibo", "fibo-lite"):
        assert ModelConfig.from_name(model_name=name).transformer_overrides == {}, name
