"""Per-step work of a generation, *counted* (not timed): host syncs, graph nodes, Python calls.

The CPU this project develops on is shared and noisy, and the costs in question (a few percent of
a GPU step) are invisible in CPU wall time. Counts are deterministic, so they can be compared
between conditions (untouched mflux, our adapter at threshold 0, the gated path) and asserted in
tests. For each step of one ``generate_image`` on a random-weight shell:

- ``evals``: ``mx.eval`` calls that had work (an unevaluated array among their arguments);
  ``idle_evals``: calls that found everything evaluated (no sync);
- ``nodes``: primitives those evals ran (MLX's own graph, via ``mx.export_to_dot``); a compiled
  function's call counts as its one ``Compiled`` node;
- ``conversions``: host reads of an array through our gate's code (``read_ratio``'s ``tolist``)
  that had to wait: the array read was not evaluated yet (a read of a value the step's latents
  evaluation already produced is no sync, and is not counted). MLX's own conversions
  (``item``/``tolist``) are nanobind calls that no Python hook sees, so mflux's (Qwen-Image's
  rotary embeddings read two ``item()`` per step) are not in this count and are the same in
  every condition;
- ``python_calls``: Python function calls (``sys.setprofile``), total and by function.

A step's bucket runs from the evaluation of the previous step's latents to (and including) the
evaluation of its own: the build of its graph, its callbacks, its one real sync. The probe learns
each step's latents from an in-loop callback registered before anything else, so the attribution
is the same whether mflux's loop or our gate's lifecycle evaluates them.

    python -m lab.bench.step_work                    # every family, tiny shells, a table
    python -m lab.bench.step_work --family flux1 --steps 4 --json out.json
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx

_SELF = __file__


@dataclass
class StepWork:
    evals: int = 0
    idle_evals: int = 0
    nodes: int = 0
    conversions: int = 0
    python_calls: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    decision: str = "C"

    @property
    def syncs(self) -> int:
        """Host waits on the device: evaluations with work plus our gate's host reads."""
        return self.evals + self.conversions


def graph_nodes(*arrays: Any) -> int:
    """Primitives MLX would run to evaluate ``arrays`` (0 when all are evaluated)."""
    flat = [a for a in _flatten(arrays) if isinstance(a, mx.array)]
    if not flat:
        return 0
    buffer = io.StringIO()
    mx.export_to_dot(buffer, *flat)
    return buffer.getvalue().count("shape=rectangle")


def _flatten(items: Any) -> Iterator[Any]:
    for item in items:
        if isinstance(item, list | tuple):
            yield from _flatten(item)
        elif isinstance(item, dict):
            yield from _flatten(item.values())
        else:
            yield item


# Python functions whose call is a host read of an MLX array, in our code, and the argument read:
# a sync where that array is not evaluated yet.
_CONVERSIONS = {("live.py", "read_ratio"): "pair"}


class _Probe:
    """Counts into the current step's bucket; registered first on ``pipeline.callbacks``."""

    def __init__(self) -> None:
        self.steps: list[StepWork] = [StepWork()]
        self.pending_latents: mx.array | None = None
        self.in_loop = False

    @property
    def bucket(self) -> StepWork:
        return self.steps[-1]

    # mflux callback protocol --------------------------------------------------------------
    def call_before_loop(self, *args: Any, **kwargs: Any) -> None:
        self.in_loop = True

    def call_in_loop(self, *args: Any, latents: Any = None, **kwargs: Any) -> None:
        self.pending_latents = latents

    def call_after_loop(self, *args: Any, **kwargs: Any) -> None:
        self.in_loop = False

    def call_interrupt(self, *args: Any, **kwargs: Any) -> None:
        self.in_loop = False

    # hooks ------------------------------------------------------------------------------------
    def on_eval(self, arrays: tuple[Any, ...]) -> None:
        if not self.in_loop:
            return
        nodes = graph_nodes(*arrays)
        bucket = self.bucket
        if nodes:
            bucket.evals += 1
            bucket.nodes += nodes
        else:
            bucket.idle_evals += 1
        latents = self.pending_latents
        if latents is not None and any(a is latents for a in _flatten(arrays)):
            self.pending_latents = None  # this step's sync: the next work is the next step's
            self.steps.append(StepWork())

    def on_call(self, frame: Any) -> None:
        code = frame.f_code
        if not self.in_loop or code.co_filename == _SELF:
            return
        name = f"{Path(code.co_filename).name}:{code.co_name}"
        bucket = self.bucket
        bucket.python_calls += 1
        bucket.calls[name] += 1
        read = _CONVERSIONS.get((Path(code.co_filename).name, code.co_name))
        if read is not None and graph_nodes(frame.f_locals[read]):
            bucket.conversions += 1


@contextmanager
def counting(pipeline: Any) -> Iterator[_Probe]:
    """Count per-step work of every ``generate_image`` inside the block. The probe must be
    registered before a gate is installed (so it sees each step's latents first): enter this,
    then install the gate."""
    probe = _Probe()
    real_eval = mx.eval

    def eval_counted(*arrays: Any) -> None:
        probe.on_eval(arrays)
        real_eval(*arrays)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            probe.on_call(frame)

    pipeline.callbacks.register(probe)
    mx.eval = eval_counted  # mflux and our code call ``mx.eval`` through the module
    sys.setprofile(profile)
    try:
        yield probe
    finally:
        sys.setprofile(None)
        mx.eval = real_eval
        for name in ("before_loop", "in_loop", "after_loop", "interrupt"):
            entries = getattr(pipeline.callbacks, name)
            entries[:] = [entry for entry in entries if entry is not probe]


def count_steps(pipeline: Any, run: dict[str, Any], gate: Any | None = None) -> list[StepWork]:
    """One ``generate_image(**run)``, counted per step; ``gate`` installed (after the probe) when
    given."""
    from app.adapters import install_gate

    run = {"seed": 0, **run}
    run.setdefault("prompt", _prompt())
    with ExitStack() as stack:
        probe = stack.enter_context(counting(pipeline))  # first: it sees each step's latents
        if gate is not None:
            stack.enter_context(install_gate(pipeline, gate))
        pipeline.generate_image(**run)
    steps = probe.steps[: int(run["num_inference_steps"])]  # the last bucket: after the loop
    if gate is not None:
        for step, event in zip(steps, gate.events, strict=False):
            step.decision = event.decision.letter
    return steps


def _prompt() -> str:
    from app.adapters.shells import DEFAULT_PROMPT

    return DEFAULT_PROMPT


# -- the families on tiny shells ---------------------------------------------------------------

FAMILIES = ("flux1", "flux2", "z-image", "qwen-image", "qwen-image-2.1")


def tiny_case(family: str) -> tuple[Any, dict[str, Any]]:
    """A tiny random-weight shell of ``family`` (float32) and its generate keywords."""
    from app.adapters import flux1, flux2, qwen_image, qwen_image21, z_image
    from app.families.flux1 import Flux1Dims
    from app.families.flux2 import FLUX2_TINY
    from app.families.qwen_image import QWEN_TINY
    from app.families.qwen_image21 import QWEN21_TINY
    from app.families.z_image import Z_IMAGE_TINY

    if family == "flux1":
        return flux1.shell("dev", dims=Flux1Dims(1, 1)), {
            "num_inference_steps": 4, "height": 64, "width": 64, "guidance": 3.5,
        }  # fmt: skip
    if family == "flux2":
        return flux2.shell("flux2-klein-4b", dims=FLUX2_TINY), {
            "num_inference_steps": 4, "height": 64, "width": 64, "guidance": 1.0,
        }  # fmt: skip
    if family == "z-image":
        return z_image.shell("z-image", dims=Z_IMAGE_TINY), {
            "num_inference_steps": 4, "height": 64, "width": 64, "guidance": 4.0,
        }  # fmt: skip
    if family == "qwen-image":
        return qwen_image.shell("qwen-image", dims=QWEN_TINY), {
            "num_inference_steps": 4, "height": 64, "width": 64, "guidance": 4.0,
        }  # fmt: skip
    if family == "qwen-image-2.1":  # mflux's default: no CFG (a negative prompt turns it on)
        return qwen_image21.shell("qwen-image-2.1", dims=QWEN21_TINY), {
            "num_inference_steps": 4, "height": 64, "width": 64,
        }  # fmt: skip
    raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")


OFF_COEFFICIENTS = (0.0, 0.0, 0.0, 0.0, 1.0)
FORCED = {"coefficients": (0.0, 0.0, 0.0, 0.0, 0.0), "max_consecutive_skips": 1}


def conditions() -> dict[str, Callable[[], Any]]:
    """Gate factories: None for untouched mflux, threshold 0, a forced skip pattern (TeaCache:
    a constant polynomial), and MagCache's forced pattern (a flat table: every step after the
    retained ones skips, one at a time; 4 steps: ``FSCS``), and the first-block probe's forced
    mode (``FSCF``)."""
    from app.gate import MagCacheGate, MagCacheParams, TeaCacheGate, TeaCacheParams
    from app.gate.firstblock import FirstBlockParams
    from app.gate.live import FirstBlockGate

    def magcache() -> MagCacheGate:
        return MagCacheGate(MagCacheParams(ratios=(1.0,) * 4, threshold=0.5, **MAG_FORCED))

    def probe() -> FirstBlockGate:
        return FirstBlockGate(
            FirstBlockParams(threshold=1.0, warmup_steps=1, max_consecutive_skips=1, forced=True)
        )

    return {
        "vanilla": lambda: None,
        "gate_off": lambda: TeaCacheGate(TeaCacheParams(OFF_COEFFICIENTS, rel_l1_thresh=0.0)),
        "forced_skips": lambda: TeaCacheGate(TeaCacheParams(rel_l1_thresh=0.5, **FORCED)),
        "magcache_forced": magcache,
        "probe_forced": probe,
    }


MAG_FORCED = {"retention_ratio": 0.2, "max_consecutive_skips": 1}


def summarize(steps: list[StepWork]) -> dict[str, Any]:
    """Per-step figures of a run: each step's, and the medians of its computed and skipped
    steps (step 0 left out: first calls trace compiled functions)."""
    import statistics

    def med(rows: list[StepWork], key: str) -> float | None:
        values = [getattr(s, key) for s in rows]
        return statistics.median(values) if values else None

    later = steps[1:]
    by = {
        "computed": [s for s in later if s.decision != "S"],
        "skipped": [s for s in later if s.decision == "S"],
    }
    keys = ("syncs", "evals", "idle_evals", "nodes", "conversions", "python_calls")
    return {
        "pattern": "".join(s.decision for s in steps),
        "steps": [{k: getattr(s, k) for k in keys} for s in steps],
        **{kind: {k: med(rows, k) for k in keys} for kind, rows in by.items() if rows},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--family", choices=FAMILIES, action="append")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from app.adapters.common import use_precision
    from app.fileio.jsonio import dumps_json

    report: dict[str, Any] = {}
    with use_precision(mx.float32):
        for family in args.family or FAMILIES:
            pipeline, run = tiny_case(family)
            report[family] = {}
            for name, make_gate in conditions().items():
                count_steps(pipeline, run, make_gate())  # warm: traces, first-call caches
                summary = summarize(count_steps(pipeline, run, make_gate()))
                report[family][name] = summary
                for kind in ("computed", "skipped"):
                    if kind in summary:
                        row = summary[kind]
                        print(
                            f"{family:10} {name:12} {kind:8} syncs {row['syncs']:>4} "
                            f"(idle evals {row['idle_evals']}) nodes {row['nodes']:>5} "
                            f"python calls {row['python_calls']:>5}  {summary['pattern']}"
                        )
    if args.json:
        args.json.write_text(dumps_json(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
