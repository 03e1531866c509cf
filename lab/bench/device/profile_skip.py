"""Where a step's time goes on the split-compiled gated path (issues #17, #30), per part, in
isolation and inside mflux's loop.

For FLUX.2 Klein 4B (1024², 512²) and Z-Image (1024²) shells with random weights, bfloat16: the
untouched mflux compiled predict (a computed step's transformer work), and the parts of a gated
step (app/adapters/step.py, compiled): the compiled prelude, the compiled measurement (rel-L1), the
host read of an evaluated measurement (what the decision costs now: no sync), the compiled tail
(the residual added inside), the compiled body+tail, the scheduler step, an empty sync (launch
floor), and ``skipped_step_graph``: everything a skipped step evaluates in its one sync (tail,
scheduler step, the next step's prelude and measurement). Z-Image adds ``caption`` (the caption
refiner and rotary tables, once per generation and caption). MagCache's skipped step
(``magcache_skip_graph``: its prelude without a signal, the tail, the scheduler step).
Each part is timed N times after warm-up, each time to completion (``mx.eval``); medians in ms.

Then the same parts *inside mflux's loop* (``loop`` in each row, TeaCache; ``loop_magcache``,
MagCache): one warm-up generation, then one timed generation with a forced pattern
(``FSCSCS…F``; MagCache ``FFSCSC…``) and one untouched (vanilla) generation, with host-side
timers around each phase of a step (exclusive times, so a phase that waits on the device holds
the device time of what was launched before it): ``prelude``, ``measure``, ``body``, ``tail``
(launches of the compiled parts; ``look_ahead`` the rest of building the next step's prelude at
this step's end), ``decide`` (the gate's Python; no sync where the measurement was evaluated with
the previous step's latents), ``scheduler_step`` (launch), ``latents_eval`` (the step's one sync:
waits for everything launched), ``end_step`` (the gate's bookkeeping and telemetry) and ``glue``
(the rest of the step: mflux's loop, the predict wrapper, the callbacks' dispatch). Their sum is
the step as the gate times it; medians over the skipped and the computed steps (step 0 left
out). With ``PROFILE_LONG_CAPTION=1`` (always in the CPU dry run), a Z-Image row with a long
caption (``caption_tokens`` 80 against the negative's 16: they pad apart, so each branch runs its
own noise refiner) shows the other case of the shared refiner. ``PROFILE_CALLS`` (20): the timed
calls per part.

    export PYTHONPATH=/opt/mlxsite:$PWD
    python3 lab/bench/device/profile_skip.py "$OUT/profile-skip.json"
    TINY=1 python lab/bench/device/profile_skip.py /tmp/p.json   # CPU dry run

The README's profile tables render from the committed report (``lab.bench.device_figures``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from app.blas import preload_openblas
from app.fileio.jsonio import dumps_json
from app.hardware import git_commit, gpu_names

preload_openblas()
import mlx.core as mx  # noqa: E402
from mflux.models.common.config.model_config import ModelConfig  # noqa: E402
from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator  # noqa: E402

from app.adapters import common, flux2, shells, z_image  # noqa: E402
from app.adapters.base import GateLifecycle  # noqa: E402
from app.adapters.compiled import LookAhead  # noqa: E402
from app.adapters.step import GatedStep  # noqa: E402
from app.families.flux2 import FLUX2_KLEIN_4B, FLUX2_TINY  # noqa: E402
from app.families.z_image import Z_IMAGE_FULL, Z_IMAGE_TINY  # noqa: E402
from app.gate import MagCacheGate, MagCacheParams, TeaCacheGate, TeaCacheParams  # noqa: E402
from app.gate.live import LiveGate, read_ratio  # noqa: E402

TINY = os.environ.get("TINY") == "1"
N = 5 if TINY else int(os.environ.get("PROFILE_CALLS", "20"))
# PROFILE_LONG_CAPTION=1: the Z-Image row whose captions pad apart (a noise refiner each).
LONG_CAPTION = TINY or os.environ.get("PROFILE_LONG_CAPTION") == "1"
DTYPE = mx.float32 if TINY else mx.bfloat16
LOOP_STEPS = 8 if TINY else 12
FORCED = TeaCacheParams(
    coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
)
# A flat table accumulates no error: every step after the retained ones skips, one at a time.
MAG_FORCED = MagCacheParams(
    ratios=(1.0,) * LOOP_STEPS, threshold=0.5, retention_ratio=0.2, max_consecutive_skips=1
)


def _state(gate: LiveGate) -> common.GateState:
    return common.GateState(gate, GateLifecycle(gate))


def _step(anatomy: Any, gate: LiveGate) -> GatedStep:
    """A compiled gated step over ``anatomy`` for ``gate``, as a generation builds it."""
    step = GatedStep(anatomy, _state(gate), compiled=True, combine=anatomy.combine)
    gate.begin(LOOP_STEPS)
    return step


def _time(fn: Callable[[], Any], n: int = N) -> float:
    for _ in range(3):
        mx.eval(fn())
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        out = fn()
        mx.eval(out)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _sync(fn: Callable[[], Any], n: int = N) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def profile_flux2(size: int) -> dict[str, Any]:
    dims = FLUX2_TINY if TINY else FLUX2_KLEIN_4B
    with common.use_precision(DTYPE):
        pipe = flux2.shell("flux2-klein-4b", dims=dims, dtype=DTYPE)
        tr = pipe.transformer
        embeds, ids = pipe._encode_prompt_pair.table[shells.DEFAULT_PROMPT]
        latents, latent_ids, _, _ = Flux2LatentCreator.prepare_packed_latents(
            seed=0, height=size, width=size, batch_size=1
        )
        latents = latents.astype(DTYPE)
        timestep = mx.array(700.0)
        vanilla = type(pipe)._predict(tr)  # mflux's own, mx.compile'd off M1/M2
        kw = dict(
            latents=latents, latent_ids=latent_ids, prompt_embeds=embeds, text_ids=ids,
            negative_prompt_embeds=None, negative_text_ids=None, guidance=1.0, timestep=timestep,
        )  # fmt: skip
        rest = (latent_ids, embeds, ids)
        anatomy = flux2.Flux2Anatomy(tr)
        split = _step(anatomy, TeaCacheGate(FORCED))
        pre = split.prelude(latents, timestep, rest)
        signal = pre["signal"]
        anchor = signal * 1.01
        mx.eval(pre, anchor)
        pair = split.measure(signal, anchor)
        _, residual = split.body(pre, rest, None, None, 1.0)
        mx.eval(pair, residual)
        mag = _step(anatomy, MagCacheGate(MAG_FORCED))
        step = _scheduler(latents.shape)

        def skipped_graph() -> Any:
            noise = split.tail(pre, rest, residual, None, None, None, 1.0)
            following = step(noise, latents)
            nxt = split.prelude(following, timestep, rest)
            return following, nxt, split.measure(nxt["signal"], signal)

        def magcache_skip() -> Any:
            p = mag.prelude(latents, timestep, rest)
            return step(mag.tail(p, rest, residual, None, None, None, 1.0), latents)

        parts = {
            "vanilla_predict": _time(lambda: vanilla(**kw)),
            "prelude": _time(lambda: split.prelude(latents, timestep, rest)),
            "measure": _time(lambda: split.measure(signal, anchor)),
            "host_read_evaluated": _sync(lambda: read_ratio(pair)),
            "tail": _time(lambda: split.tail(pre, rest, residual, None, None, None, 1.0)),
            "body_and_tail": _time(lambda: split.body(pre, rest, None, None, 1.0)),
            "scheduler_step": _time(lambda: step(residual[..., :128], latents)),
            "skipped_step_graph": _time(skipped_graph),
            "magcache_skip_graph": _time(magcache_skip),
            "empty_sync": _sync(lambda: mx.eval(mx.array(1.0) + 1)),
        }
        run = {"num_inference_steps": LOOP_STEPS, "height": size, "width": size, "guidance": 1.0}
        loop = profile_loop(pipe, run, lambda: TeaCacheGate(FORCED))
        loop_magcache = profile_loop(pipe, run, lambda: MagCacheGate(MAG_FORCED))
    return {
        "family": "flux2-klein-4b",
        "size": size,
        "ms": parts,
        "loop": loop,
        "loop_magcache": loop_magcache,
    }


def _scheduler(shape: tuple[int, ...]) -> Callable[[mx.array, mx.array], mx.array]:
    """mflux's compiled (shapeless) flow-match Euler step, as the loop calls it."""
    from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import _step

    sigmas = mx.linspace(1.0, 0.0, 21)
    mx.eval(sigmas)
    return lambda noise, latents: _step(noise.reshape(latents.shape), latents, sigmas[3], sigmas[4])


def _z_image_shell(caption_tokens: int) -> Any:
    dims = Z_IMAGE_TINY if TINY else Z_IMAGE_FULL
    pipe = z_image.shell("z-image", dims=dims, dtype=DTYPE)
    if caption_tokens != 16:  # the shell's captions have 16 tokens: the negative keeps them
        feats = mx.random.normal((caption_tokens, dims.cap_feat_dim), key=mx.random.key(7))
        pipe._encode_prompts.table[shells.DEFAULT_PROMPT] = feats.astype(DTYPE)
    return pipe


def profile_z_image(size: int, caption_tokens: int = 16, *, parts: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {
        "family": "z-image",
        "size": size,
        "guidance": 4.0,
        "caption_tokens": caption_tokens,
        "negative_caption_tokens": 16,
    }
    with common.use_precision(DTYPE):
        pipe = _z_image_shell(caption_tokens)
        if parts:
            row["ms"] = _z_image_parts(pipe, size)
        run = {"num_inference_steps": LOOP_STEPS, "height": size, "width": size, "guidance": 4.0}
        row["loop"] = profile_loop(pipe, run, lambda: TeaCacheGate(FORCED))
        if parts:
            row["loop_magcache"] = profile_loop(pipe, run, lambda: MagCacheGate(MAG_FORCED))
    return row


def _z_image_parts(pipe: Any, size: int) -> dict[str, float]:
    from mflux.models.z_image.latent_creator.z_image_latent_creator import ZImageLatentCreator

    tr = pipe.transformer
    cap = pipe._encode_prompts.table[shells.DEFAULT_PROMPT]
    neg = pipe._encode_prompts.table[" "]
    latents = ZImageLatentCreator.create_noise(seed=0, height=size, width=size).astype(DTYPE)
    sigmas = mx.linspace(1.0, 0.0, 21)
    timestep = (1 - sigmas[3]).reshape((1,))
    vanilla = type(pipe)._predict(tr)
    kw = dict(
        latents=latents, timestep=timestep, sigmas=sigmas, text_encodings=cap,
        negative_encodings=neg, guidance=4.0,
    )  # fmt: skip
    anatomy = z_image.ZImageAnatomy(tr)
    split = _step(anatomy, TeaCacheGate(FORCED))
    call = anatomy.step_call(latents, timestep, sigmas, cap, neg, 4.0)
    rest, urest = call.cond, call.uncond
    pre = split.prelude(latents, timestep, rest)
    signal = pre["signal"]
    anchor = signal * 1.01
    mx.eval(pre, anchor)
    upre = {"head": pre["head"]}  # the shell's captions pad alike: the branches share it
    pair = split.measure(signal, anchor)
    _, rc, ru = split.body(pre, rest, upre, urest, 4.0)
    mx.eval(pair, rc, ru)
    mag = _step(anatomy, MagCacheGate(MAG_FORCED))
    step = _scheduler(latents.shape)

    def tail(p: Any, up: Any) -> mx.array:
        return split.tail(p, rest, rc, up, urest, ru, 4.0)

    def skipped_graph() -> Any:
        following = step(tail(pre, upre), latents)
        nxt = split.prelude(following, timestep, rest)
        return following, nxt, split.measure(nxt["signal"], signal)

    def magcache_skip() -> Any:
        p = mag.prelude(latents, timestep, rest)
        return step(tail(p, {"head": p["head"]}), latents)  # the captions pad alike: shared

    def caption() -> Any:
        return z_image._caption(tr, latents, cap)

    return {
        "vanilla_predict": _time(lambda: vanilla(**kw)),
        "caption": _time(caption),
        "prelude": _time(lambda: split.prelude(latents, timestep, rest)),
        "measure": _time(lambda: split.measure(signal, anchor)),
        "host_read_evaluated": _sync(lambda: read_ratio(pair)),
        "tail": _time(lambda: tail(pre, upre)),
        "body_and_tail": _time(lambda: split.body(pre, rest, upre, urest, 4.0)),
        "scheduler_step": _time(lambda: step(latents, latents)),
        "skipped_step_graph": _time(skipped_graph),
        "magcache_skip_graph": _time(magcache_skip),
        "empty_sync": _sync(lambda: mx.eval(mx.array(1.0) + 1)),
    }


class _PhaseClock:
    """Exclusive host time per named phase, bucketed by the gate's step index at phase start."""

    def __init__(self) -> None:
        self.by_step: dict[int, dict[str, float]] = {}
        self.step_of: Callable[[], int] = lambda: 0
        self._stack: list[list[float]] = []  # [start, child time]

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            step = self.step_of()
            self._stack.append([time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                start, child = self._stack.pop()
                elapsed = time.perf_counter() - start
                phases = self.by_step.setdefault(step, {})
                phases[name] = phases.get(name, 0.0) + elapsed - child
                if self._stack:
                    self._stack[-1][1] += elapsed

        return timed


def _patched(clock: _PhaseClock) -> list[tuple[Any, str, Any]]:
    """Wrap the phases of a gated step (and mx.eval, the scheduler) with the clock; returns the
    undo list ``(owner, attribute, original)``."""
    from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import (
        FlowMatchEulerDiscreteScheduler,
    )
    from mflux.models.common.schedulers.linear_scheduler import LinearScheduler

    undo: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)
        undo.append((owner, attr, original))
        setattr(owner, attr, clock.wrap(name, original))

    patch(TeaCacheGate, "decide", "decide")
    patch(MagCacheGate, "decide", "decide")
    patch(LiveGate, "end_step", "end_step")
    patch(LookAhead, "look_ahead", "look_ahead")
    patch(FlowMatchEulerDiscreteScheduler, "step", "scheduler_step")
    patch(LinearScheduler, "step", "scheduler_step")
    patch(mx, "eval", "latents_eval")
    original_init = GatedStep.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._look_ahead = self.look_ahead  # the wrapped one
        for part in ("prelude", "measure", "body", "tail", "cond_body", "cond_tail"):
            setattr(self, part, clock.wrap(part.removeprefix("cond_"), getattr(self, part)))

    undo.append((GatedStep, "__init__", original_init))
    GatedStep.__init__ = init  # type: ignore[method-assign]
    return undo


def profile_loop(
    pipe: Any, run: dict[str, Any], make_gate: Callable[[], LiveGate]
) -> dict[str, Any]:
    """Per-step phase times of a forced-skip generation and the mean step of a vanilla one,
    inside mflux's own loop (see the module docstring)."""
    from app.adapters import install_gate
    from app.bench.worker import _LoopTimer

    run = {"seed": 0, "prompt": shells.DEFAULT_PROMPT, **run}

    def generate(gate: LiveGate | None, callback: Any) -> None:
        if gate is None:
            pipe.callbacks.register(callback)
            try:
                pipe.generate_image(**run)
            finally:
                common_unregister(pipe, callback)
            return
        with install_gate(pipe, gate):
            pipe.callbacks.register(callback)
            try:
                pipe.generate_image(**run)
            finally:
                common_unregister(pipe, callback)

    generate(make_gate(), _LoopTimer())  # warm-up: traces the compiled parts
    generate(None, _LoopTimer())
    clock = _PhaseClock()
    gate = make_gate()
    clock.step_of = lambda: gate.step_index
    undo = _patched(clock)
    try:
        generate(gate, _LoopTimer())
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)
    stamps = _Stamps()
    generate(None, stamps)
    rows: dict[str, list[dict[str, float]]] = {"skipped": [], "computed": []}
    for event in gate.events[1:]:
        phases = clock.by_step.get(event.index, {})
        row: dict[str, float] = {k: v * 1000 for k, v in phases.items()}
        row["step"] = event.seconds * 1000
        row["glue"] = row["step"] - sum(v for k, v in row.items() if k != "step")
        rows["skipped" if event.decision.letter == "S" else "computed"].append(row)

    def medians(items: list[dict[str, float]]) -> dict[str, float]:
        keys = sorted({k for item in items for k in item})
        return {k: statistics.median(item.get(k, 0.0) for item in items) for k in keys}

    skipped, computed = medians(rows["skipped"]), medians(rows["computed"])
    # Median interval between in-loop callbacks, the first two left out (the compiled
    # predict is traced on step 0 of every generation and its kernels built at its eval).
    vanilla_step = statistics.median(stamps.intervals()[2:]) * 1000
    pattern = gate.pattern
    active, done = len(pattern), sum(letter != "S" for letter in pattern)
    gated_total = sum(e.seconds for e in gate.events[1:]) * 1000
    return {
        "gate": gate.gate_name,
        "pattern": pattern,
        "skipped_step_ms": skipped,
        "computed_step_ms": computed,
        "vanilla_step_ms": vanilla_step,
        "skipped_over_computed": skipped["step"] / computed["step"],
        # Steps 1.. of the gated loop against as many vanilla steps: measured / ideal inside
        # one process (the bench's cold processes are the figure of record).
        "measured_over_ideal_in_loop": (vanilla_step * (active - 1) / gated_total)
        / (active / done),
    }


class _Stamps:
    """Stamps the host clock at the start of the loop and at each in-loop callback."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def call_before_loop(self, *args: Any, **kwargs: Any) -> None:
        self.times = [time.perf_counter()]

    def call_in_loop(self, *args: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter())

    def intervals(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


def common_unregister(pipe: Any, callback: object) -> None:
    for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
        entries = getattr(pipe.callbacks, name)
        entries[:] = [entry for entry in entries if entry is not callback]


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "profile-skip.json"
    sizes = (64,) if TINY else (1024, 512)
    z_size = 64 if TINY else 1024
    rows = [profile_flux2(s) for s in sizes]
    rows.append(profile_z_image(z_size))
    if LONG_CAPTION:
        rows.append(profile_z_image(z_size, caption_tokens=80, parts=False))
    for row in rows:
        label = f"{row['family']} {row['size']} (caption {row.get('caption_tokens', '-')})"
        if "ms" in row:
            ms = row["ms"]
            share = ms["skipped_step_graph"] / ms["vanilla_predict"]
            row["skipped_graph_over_vanilla_predict"] = share
            print(label, {k: round(v, 3) for k, v in ms.items()}, f"skip graph {share:.2%}")
        for key in ("loop", "loop_magcache"):
            loop = row.get(key)
            if loop is None:
                continue
            for kind in ("skipped_step_ms", "computed_step_ms"):
                in_loop = {k: round(v, 3) for k, v in loop[kind].items()}
                print(f"  {loop['gate']} in the loop ({loop['pattern']}), {kind}: {in_loop}")
            print(
                f"  {loop['gate']}: skipped/computed {loop['skipped_over_computed']:.2%}, "
                f"vanilla step {loop['vanilla_step_ms']:.3f} ms, in-loop measured/ideal "
                f"{loop['measured_over_ideal_in_loop']:.3f}"
            )
    report = {
        "kind": "profile-skip",
        "dtype": str(DTYPE),
        "tiny": TINY,
        "n": N,
        "device": str(mx.default_device()),
        "gpus": gpu_names(),
        "git": git_commit(),
        "loop_steps": LOOP_STEPS,
        "precision": str(ModelConfig.precision),
        "command": "python3 lab/bench/device/profile_skip.py OUT.json",
        "rows": rows,
    }
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(dumps_json(report, indent=2))


if __name__ == "__main__":
    main()
