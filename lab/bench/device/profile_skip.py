"""Where a step's time goes on the split-compiled gated path (issue #17), per part, in isolation.

For FLUX.2 Klein 4B (1024², 512²) and Z-Image (1024²) shells with random weights, bfloat16: the
untouched mflux compiled predict (a computed step's transformer work), and the parts of a gated
step: the compiled prelude, the host sync of the gate's rel-L1, the eager residual add, the
compiled tail, the compiled body+tail, the scheduler step, and an empty sync (launch floor).
Each part is timed N times after warm-up, each time to completion (``mx.eval``); medians in ms.

Then the same parts *inside mflux's loop* (``loop`` in each row): one warm-up generation, then one
timed generation with a forced pattern (``FSCSCS…F``) and one untouched (vanilla) generation, with
host-side timers around each phase of a step (exclusive times, so a phase that waits on the device
holds the device time of what was launched before it): the compiled ``prelude`` call (launch),
``decide`` (the rel-L1 and its host sync: waits for the prelude), ``residual_add`` and ``tail``
(launches), ``body`` (launch, computed steps), ``scheduler_step`` (launch), ``latents_eval`` (the
step's sync: waits for everything after the decision), ``end_step`` (the gate's bookkeeping and
telemetry) and ``glue`` (the rest of the step: mflux's loop, the predict wrapper, the callbacks'
dispatch). Their sum is the step as the gate times it; medians over the skipped and the computed
steps (step 0 left out).

    export PYTHONPATH=/opt/mlxsite:$PWD
    python3 lab/bench/device/profile_skip.py "$OUT/profile-skip.json"
    TINY=1 python lab/bench/device/profile_skip.py /tmp/p.json   # CPU dry run
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from app.blas import preload_openblas
from app.fileio.jsonio import dumps_json

preload_openblas()
import mlx.core as mx  # noqa: E402
from mflux.models.common.config.model_config import ModelConfig  # noqa: E402
from mflux.models.flux2.latent_creator.flux2_latent_creator import Flux2LatentCreator  # noqa: E402

from app.adapters import common, flux2, shells, z_image  # noqa: E402
from app.gate.live import rel_l1  # noqa: E402

TINY = os.environ.get("TINY") == "1"
N = 5 if TINY else 30
DTYPE = mx.float32 if TINY else mx.bfloat16


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


def _scheduler_step(shape: tuple[int, ...]) -> float:
    """mflux's compiled (shapeless) flow-match Euler step."""
    from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import _step

    sigmas = mx.linspace(1.0, 0.0, 21)
    latents = mx.random.normal(shape).astype(DTYPE)
    noise = mx.random.normal(shape).astype(DTYPE)
    return _time(lambda: _step(noise, latents, sigmas[3], sigmas[4]))


def profile_flux2(size: int) -> dict[str, Any]:
    dims = shells.FLUX2_TINY if TINY else shells.FLUX2_KLEIN_4B
    with common.use_precision(DTYPE):
        pipe = shells.flux2_shell("flux2-klein-4b", dims=dims, dtype=DTYPE)
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
        split = flux2._CompiledFlux2(tr, Counter())
        hs, temb, mod_img, signal = split.prelude(latents, timestep)
        mx.eval(hs, temb, mod_img, signal)
        anchor = signal * 1.01
        mx.eval(anchor)
        _, out_img = split.body(hs, temb, mod_img, latent_ids, embeds, ids, None, None, 1.0)
        residual = out_img - hs
        mx.eval(residual)
        parts = {
            "vanilla_predict": _time(lambda: vanilla(**kw)),
            "prelude": _time(lambda: split.prelude(latents, timestep)),
            "host_sync_rel_l1": _sync(lambda: rel_l1(signal, anchor)),
            "residual_add": _time(lambda: hs + residual),
            "tail": _time(lambda: split.tail(temb, hs + residual, None, 1.0)),
            "body_and_tail": _time(
                lambda: split.body(hs, temb, mod_img, latent_ids, embeds, ids, None, None, 1.0)
            ),
            "scheduler_step": _scheduler_step(latents.shape),
            "empty_sync": _sync(lambda: mx.eval(mx.array(1.0) + 1)),
        }
        run = {"num_inference_steps": LOOP_STEPS, "height": size, "width": size, "guidance": 1.0}
        loop = profile_loop(pipe, flux2._CompiledFlux2, run)
    return {"family": "flux2-klein-4b", "size": size, "ms": parts, "loop": loop}


def profile_z_image(size: int) -> dict[str, Any]:
    from mflux.models.z_image.latent_creator.z_image_latent_creator import ZImageLatentCreator

    dims = shells.Z_IMAGE_TINY if TINY else shells.Z_IMAGE_FULL
    with common.use_precision(DTYPE):
        pipe = shells.z_image_shell("z-image", dims=dims, dtype=DTYPE)
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
        split = z_image._CompiledZImage(tr, Counter())
        signal, t_emb, unified, freqs, first, nu, nf = split.prelude(
            latents, timestep, sigmas, cap, neg
        )
        mx.eval(signal, t_emb, unified, freqs, first, nu, nf)
        anchor = signal * 1.01
        mx.eval(anchor)
        x_len, x_size = z_image._geometry(tr, latents)
        _, out_c, out_u = split.body(t_emb, unified, freqs, first, nu, nf, 4.0, x_len, x_size)
        rc, ru = out_c - unified[:, :x_len], out_u - nu[:, :x_len]
        mx.eval(rc, ru)
        parts = {
            "vanilla_predict": _time(lambda: vanilla(**kw)),
            "prelude": _time(lambda: split.prelude(latents, timestep, sigmas, cap, neg)),
            "host_sync_rel_l1": _sync(lambda: rel_l1(signal, anchor)),
            "residual_add": _time(lambda: (unified[:, :x_len] + rc, nu[:, :x_len] + ru)),
            "tail": _time(
                lambda: split.tail(t_emb, unified[:, :x_len] + rc, nu[:, :x_len] + ru, 4.0, x_size)
            ),
            "body_and_tail": _time(
                lambda: split.body(t_emb, unified, freqs, first, nu, nf, 4.0, x_len, x_size)
            ),
            "scheduler_step": _scheduler_step(latents.shape),
            "empty_sync": _sync(lambda: mx.eval(mx.array(1.0) + 1)),
        }
        run = {"num_inference_steps": LOOP_STEPS, "height": size, "width": size, "guidance": 4.0}
        loop = profile_loop(pipe, z_image._CompiledZImage, run)
    return {"family": "z-image", "size": size, "guidance": 4.0, "ms": parts, "loop": loop}


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


def _patched(clock: _PhaseClock, split_cls: type) -> list[tuple[Any, str, Any]]:
    """Wrap the phases of a gated step (and mx.eval, the scheduler) with the clock; returns the
    undo list ``(owner, attribute, original)``."""
    from mflux.models.common.schedulers.flow_match_euler_discrete_scheduler import (
        FlowMatchEulerDiscreteScheduler,
    )
    from mflux.models.common.schedulers.linear_scheduler import LinearScheduler

    from app.gate.live import TeaCacheGate

    undo: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)
        undo.append((owner, attr, original))
        setattr(owner, attr, clock.wrap(name, original))

    patch(TeaCacheGate, "decide", "decide")
    patch(TeaCacheGate, "reuse", "residual_add")
    patch(TeaCacheGate, "end_step", "end_step")
    patch(FlowMatchEulerDiscreteScheduler, "step", "scheduler_step")
    patch(LinearScheduler, "step", "scheduler_step")
    patch(mx, "eval", "latents_eval")
    original_init = split_cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        for part in ("prelude", "body", "tail"):
            setattr(self, part, clock.wrap(part, getattr(self, part)))

    undo.append((split_cls, "__init__", original_init))
    split_cls.__init__ = init
    return undo


def profile_loop(pipe: Any, split_cls: type, run: dict[str, Any]) -> dict[str, Any]:
    """Per-step phase times of a forced-skip generation and the mean step of a vanilla one,
    inside mflux's own loop (see the module docstring)."""
    from app.adapters import install_gate
    from app.bench.worker import _LoopTimer
    from app.gate import TeaCacheGate, TeaCacheParams

    forced = TeaCacheParams(
        coefficients=(0.0, 0.0, 0.0, 0.0, 0.0), rel_l1_thresh=0.5, max_consecutive_skips=1
    )
    run = {"seed": 0, "prompt": shells.DEFAULT_PROMPT, **run}

    def generate(gate: TeaCacheGate | None) -> _LoopTimer:
        timer = _LoopTimer()
        if gate is None:
            pipe.callbacks.register(timer)
            try:
                pipe.generate_image(**run)
            finally:
                common_unregister(pipe, timer)
            return timer
        with install_gate(pipe, gate):
            pipe.callbacks.register(timer)
            try:
                pipe.generate_image(**run)
            finally:
                common_unregister(pipe, timer)
        return timer

    generate(TeaCacheGate(forced))  # warm-up: traces the compiled parts
    generate(None)
    clock = _PhaseClock()
    gate = TeaCacheGate(forced)
    clock.step_of = lambda: gate.step_index
    undo = _patched(clock, split_cls)
    try:
        generate(gate)
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)
    stamps = _Stamps()
    pipe.callbacks.register(stamps)
    try:
        generate(None)
    finally:
        common_unregister(pipe, stamps)
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

    return {
        "pattern": gate.pattern,
        "skipped_step_ms": medians(rows["skipped"]),
        "computed_step_ms": medians(rows["computed"]),
        # Median interval between in-loop callbacks, the first two left out (the compiled
        # predict is traced on step 0 of every generation and its kernels built at its eval).
        "vanilla_step_ms": statistics.median(stamps.intervals()[2:]) * 1000,
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


LOOP_STEPS = 8 if TINY else 12


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "profile-skip.json"
    sizes = (64,) if TINY else (1024, 512)
    rows = [profile_flux2(s) for s in sizes]
    rows.append(profile_z_image(64 if TINY else 1024))
    for row in rows:
        ms = row["ms"]
        skip = ms["prelude"] + ms["host_sync_rel_l1"] + ms["tail"]
        row["skipped_step_parts_ms"] = skip
        row["skipped_over_vanilla_predict"] = skip / ms["vanilla_predict"]
        share = row["skipped_over_vanilla_predict"]
        parts = {k: round(v, 3) for k, v in ms.items()}
        print(row["family"], row["size"], parts, f"prelude+sync+tail {skip:.3f} ms = {share:.2%}")
        loop = row["loop"]
        for kind in ("skipped_step_ms", "computed_step_ms"):
            in_loop = {k: round(v, 3) for k, v in loop[kind].items()}
            print(f"  in the loop ({loop['pattern']}), {kind}: {in_loop}")
        print(f"  vanilla step in the loop: {loop['vanilla_step_ms']:.3f} ms")
    report = {
        "kind": "profile-skip",
        "dtype": str(DTYPE),
        "tiny": TINY,
        "n": N,
        "device": str(mx.default_device()),
        "precision": str(ModelConfig.precision),
        "command": "python3 lab/bench/device/profile_skip.py OUT.json",
        "rows": rows,
    }
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(dumps_json(report, indent=2))


if __name__ == "__main__":
    main()
