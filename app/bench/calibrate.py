"""Calibration from the command line: capture (signal, output) rel-L1 pairs, fit, write.

Capture: vanilla runs through the engine's observe pass — every step computes, and each
``StepEvent`` carries the gate signal's change against the previous step (``rel_l1``, x) and the
transformer output's change (``output_rel_l1``, y). One chunk per prompt, persisted as it
finishes, so Ctrl-C keeps the prompts done and a rerun resumes.

Fit: degree 4, free and through the origin, with ``app.gate.fit``: coefficients and R² on every
pair, and a held-out R² from a refit without the last prompts, scored on those prompts. The split
is by prompt, because the pairs of one trajectory are strongly correlated and a split by pair
would flatter the fit.

Write: a user calibration (``app.variants.user``) that the registry offers as
``<variant>+<name>``, with its provenance and the raw pairs.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.chunks import ChunkStore
from app.engine.request import GenerationRequest

FIT_MODES = ("free", "origin", "both")

# Fixed prompt lists, as the reference recipe does (research §8): one for the demo's closed
# vocabulary, one for real models (the mlx-teacache list).
DEMO_PROMPTS = (
    "a red circle on a blue background",
    "two small yellow stars at the left on a black background",
    "a large green square at the centre on a white background",
    "three small blue triangles at the top on a yellow background",
    "a purple star at the right on a green background",
    "a large orange circle at the bottom on a purple background",
    "two white squares at the right on a black background",
    "a black triangle at the centre on a white background",
    "a small striped red star at the top on a green background",
    "a large dotted blue circle at the left on a yellow background",
)
REAL_PROMPTS = (
    "a red apple on a wooden table",
    "a mountain landscape at sunset",
    "a portrait of an old man with a beard",
    "abstract colorful circles",
    'a sign with the text saying "HELLO"',
    "a futuristic city skyline at night",
    "a watercolor painting of a cat",
    "a steampunk airship above the clouds",
    "a macro photo of a butterfly on a flower",
    "a neon-lit rainy street",
)


def default_prompts(variant_id: str) -> tuple[str, ...]:
    from app.variants import get_variant

    # the embedded demo draws only its own vocabulary
    return DEMO_PROMPTS if get_variant(variant_id).embedded else REAL_PROMPTS


def read_prompts(path: Path) -> tuple[str, ...]:
    """One prompt per line; blank lines and lines starting with ``#`` are ignored."""
    text = path.read_text(encoding="utf-8")
    prompts = [line.strip() for line in text.splitlines()]
    return tuple(p for p in prompts if p and not p.startswith("#"))


@dataclass(frozen=True, slots=True)
class CalibrateConfig:
    """One calibration: the vanilla request every prompt runs with (its prompt: the first of
    ``prompts``; its variant a registry id, a user calibration's base, never
    ``"<base>+<name>"``), the prompts, and how the fit is made and named."""

    request: GenerationRequest
    name: str
    prompts: tuple[str, ...]
    holdout: float = 0.3
    mode: str = "both"

    def capture_settings(self) -> dict[str, Any]:
        """What the captured pairs depend on (the fit settings may change between reruns)."""
        r = self.request
        return {
            "variant": r.variant_id,
            "prompts": list(self.prompts),
            "seed": r.seed,
            "steps": r.steps,
            "width": r.width,
            "height": r.height,
            "guidance": r.guidance,
            "quantize": r.quantize,
        }


def split_prompts(count: int, holdout: float) -> tuple[list[int], list[int]]:
    """Fit and held-out prompt indices: the last ``round(holdout × count)`` prompts are held out
    (at least one when ``holdout > 0`` and there are two or more prompts; never all of them)."""
    if holdout <= 0 or count < 2:
        return list(range(count)), []
    held = min(count - 1, max(1, round(holdout * count)))
    return list(range(count - held)), list(range(count - held, count))


class Capturer:
    """Vanilla observe passes through the real engine, one prompt at a time, in this process."""

    def __init__(self, config: CalibrateConfig) -> None:
        from app.blas import preload_openblas

        preload_openblas()
        from app.engine.engine import Engine

        self.config = config
        self.engine = Engine()
        self._cancel = threading.Event()

    def capture(self, prompt: str) -> dict[str, Any]:
        from app.engine.events import Pass
        from app.gate.kinds import observer_params

        request = replace(self.config.request, prompt=prompt, threshold=0.0)
        variant = request.variant
        pipeline = self.engine.pipeline(variant, request, _ignore, self._cancel)
        result = self.engine.run_pass(
            1,
            Pass.vanilla,
            pipeline,
            request,
            observer_params(variant, request.gate, 0.0),
            _ignore,
            self._cancel,
            capture_output=True,
        )
        steps, xs, ys = [], [], []
        for event in result.events:
            x, y = event.rel_l1, event.output_rel_l1
            if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
                continue
            steps.append(event.index)
            xs.append(float(x))
            ys.append(float(y))
        return {
            "prompt": prompt,
            # MagCache's calibration data: the residual's magnitude ratio at every step.
            "mag_ratio": [event.mag_ratio for event in result.events],
            # The first-block probe's: each step's change against the previous steps.
            "block_changes": [
                None if event.block_changes is None else list(event.block_changes)
                for event in result.events
            ],
            "step": steps,
            "x": xs,
            "y": ys,
            "active_steps": len(result.events),
            "loop_seconds": result.loop_seconds,
        }

    def close(self) -> None:
        self.engine.close()


def _ignore(event: object) -> None:
    """Capture runs headless: the engine's events are not needed beyond its return value."""


def capture_pairs(
    config: CalibrateConfig,
    chunks: Path,
    *,
    capture: Any = None,
    progress: bool = True,
    max_chunks: int | None = None,
    fresh: bool = False,
) -> tuple[list[dict[str, Any]] | None, int]:
    """Every prompt's pairs, resuming from ``chunks``; (None, done) when stopped early."""
    from tqdm import tqdm

    store = ChunkStore(chunks, config.capture_settings(), fresh=fresh)
    keys = [f"prompt{i:03d}" for i in range(len(config.prompts))]
    done = sum(store.done(k) for k in keys)
    capturer: Capturer | None = None
    bar = tqdm(
        total=len(keys),
        initial=done,
        desc=f"calibrate {config.request.variant_id}",
        unit="prompt",
        file=sys.stderr,
        disable=not progress,
    )
    ran = 0
    try:
        for key, prompt in zip(keys, config.prompts, strict=True):
            if store.done(key):
                continue
            if max_chunks is not None and ran >= max_chunks:
                break
            if capture is None:
                capturer = capturer or Capturer(config)
                capture = capturer.capture
            bar.set_postfix_str(prompt[:40])
            store.save(key, capture(prompt))
            ran += 1
            done += 1
            bar.update(1)
    finally:
        bar.close()
        if capturer is not None:
            capturer.close()
    if done < len(keys):
        return None, done
    return [store.load(k) or {} for k in keys], done


def fit_report(chunks: list[dict[str, Any]], holdout: float, mode: str) -> dict[str, Any]:
    """Fit the requested mode(s) with ``app.gate.fit``: coefficients and R² on every pair;
    held-out R² from a refit without the held-out prompts, scored on them."""
    from app.gate import fit as polynomial

    fit_idx, held_idx = split_prompts(len(chunks), holdout)
    xs = [x for c in chunks for x in c["x"]]
    ys = [y for c in chunks for y in c["y"]]
    groups = [i for i, c in enumerate(chunks) for _ in c["x"]]
    minimum = polynomial.DEGREE + 1
    if len(xs) < minimum or sum(len(chunks[i]["x"]) for i in fit_idx) < minimum:
        raise ValueError(
            f"only {len(xs)} (signal, output) pairs; a degree-4 fit needs at least {minimum} on "
            "the fitting prompts — use more prompts or more steps"
        )
    modes: tuple[str, ...] = ("free", "origin") if mode == "both" else (mode,)
    fits = {
        name: polynomial.fit(xs, ys, mode=name, groups=groups, heldout=held_idx)  # type: ignore[arg-type]
        for name in modes
    }
    chosen = polynomial.choose(fits).mode if mode == "both" else mode
    return {
        "fit_prompts": fit_idx,
        "heldout_prompts": held_idx,
        "fit_pairs": len(xs),
        "heldout_pairs": sum(len(chunks[i]["x"]) for i in held_idx),
        "fits": {
            name: {
                "coefficients": list(fit.coefficients),
                "r2": fit.r2,
                "heldout_r2": fit.heldout_r2,
            }
            for name, fit in fits.items()
        },
        "chosen": chosen,
        "choice_rule": "app.gate.fit.choose: origin unless free is better on held-out R² by "
        "more than 0.02"
        if mode == "both"
        else f"--mode {mode}",
    }


def calibration_document(
    config: CalibrateConfig,
    chunks: list[dict[str, Any]],
    report: dict[str, Any],
    default_threshold: float | None,
    versions: dict[str, str],
) -> dict[str, Any]:
    """The user-calibration file: coefficients, calibrated range, provenance and raw pairs."""
    xs = [x for c in chunks for x in c["x"]]
    ys = [y for c in chunks for y in c["y"]]
    chosen = report["chosen"]
    fit = report["fits"][chosen]
    metric, value = (
        ("held-out R²", fit["heldout_r2"]) if fit["heldout_r2"] is not None else ("R²", fit["r2"])
    )
    size = f"{config.request.width}×{config.request.height}"
    return {
        "base_variant": config.request.variant_id,
        "name": config.name,
        "coefficients": fit["coefficients"],
        "calibrated_range": [min(xs), max(xs)],
        "default_threshold": default_threshold,
        "provenance": {
            "source": f"teacache-studio calibrate ({chosen} fit), {dt.date.today().isoformat()}",
            "fit_metric": metric,
            "fit_value": value,
            "data_size": f"{len(xs)} pairs ({len(chunks)} prompts × {config.request.steps} steps, "
            f"{size}, seed {config.request.seed})",
            "notes": f"R² {fit['r2']:.3f} on all {report['fit_pairs']} pairs; held-out R² from "
            f"a refit without the last {len(report['heldout_prompts'])} prompts",
        },
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recipe": {
            "variant": config.request.variant_id,
            "steps": config.request.steps,
            "size": [config.request.width, config.request.height],
            "seed": config.request.seed,
            "guidance": config.request.guidance,
            "quantize": config.request.quantize,
            "prompts": list(config.prompts),
            "holdout": config.holdout,
            "split": "by prompt: the last prompts of the list are held out",
        },
        "fit": {
            "mode": config.mode,
            "chosen": chosen,
            "degree": 4,
            "coefficient_order": "high → low (numpy poly1d)",
            **{
                k: report[k]
                for k in (
                    "fit_prompts",
                    "heldout_prompts",
                    "fit_pairs",
                    "heldout_pairs",
                    "fits",
                    "choice_rule",
                )
            },
        },
        "x_range": [min(xs), max(xs)],
        "y_range": [min(ys), max(ys)],
        "pairs": {
            "x": xs,
            "y": ys,
            "prompt_index": [i for i, c in enumerate(chunks) for _ in c["x"]],
            "step": [s for c in chunks for s in c.get("step", [None] * len(c["x"]))],
        },
        "versions": versions,
    }


# MagCache recipe defaults for a new table: the reference's Qwen-Image recipe (retention 0.2,
# K 2), the more conservative of its two published image recipes (FLUX.1-dev: 0.1, K 5).
MAGCACHE_RETENTION = 0.2
MAGCACHE_MAX_SKIPS = 2


def magcache_document(
    config: CalibrateConfig,
    chunks: list[dict[str, Any]],
    base_coefficients: tuple[float, ...] | None,
    base_range: tuple[float, float] | None,
    teacache_threshold: float | None,
    threshold: float | None,
    versions: dict[str, str],
    *,
    retention_ratio: float = MAGCACHE_RETENTION,
    max_consecutive_skips: int = MAGCACHE_MAX_SKIPS,
) -> dict[str, Any]:
    """A user calibration that keeps the base variant's TeaCache numbers and adds a MagCache
    table: per step, the mean magnitude ratio over the prompts' vanilla runs (the reference's
    calibration measure, app.gate.live.magnitude_ratio). Raises ValueError on missing data."""
    from app.gate.decision import GateConfigError
    from app.gate.magcache import GATE_NAME, mean_ratio_table

    traces = []
    for chunk in chunks:
        if "mag_ratio" not in chunk:
            raise ValueError(
                "these captured prompts predate MagCache calibration; rerun with --fresh"
            )
        traces.append(chunk["mag_ratio"])
    try:
        table = mean_ratio_table(traces)
    except GateConfigError as exc:
        raise ValueError(str(exc)) from None
    spread = [max(t[i] for t in traces) - min(t[i] for t in traces) for i in range(1, len(table))]
    size = f"{config.request.width}×{config.request.height}"
    return {
        "base_variant": config.request.variant_id,
        "name": config.name,
        "coefficients": None if base_coefficients is None else list(base_coefficients),
        "calibrated_range": None if base_range is None else list(base_range),
        "default_threshold": teacache_threshold,
        "provenance": {
            "source": "the base variant's TeaCache fit, unchanged (this file adds MagCache)"
            if base_coefficients is not None
            else "no TeaCache calibration (this file holds MagCache's)",
        },
        GATE_NAME: {  # the MagCache section (``magcache_from_document`` reads it)
            "ratios": list(table),
            "default_threshold": threshold,
            "retention_ratio": retention_ratio,
            "max_consecutive_skips": max_consecutive_skips,
            "provenance": {
                "source": f"teacache-studio calibrate --gate magcache, {dt.date.today()}: mean "
                "over prompts of mean_tokens(|r_i| / |r_i-1|), r = body output − body input "
                "(Zehong-Ma/MagCache @ df81cb1, MagCache4FLUX magcache_calibration)",
                "data_size": f"{len(chunks)} prompts × {config.request.steps} steps, {size}, "
                f"seed {config.request.seed}, guidance {config.request.guidance}",
                "fit_metric": "largest spread of a step's ratio across prompts",
                "fit_value": round(max(spread), 5),
            },
        },
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recipe": {
            "variant": config.request.variant_id,
            "gate": GATE_NAME,
            "steps": config.request.steps,
            "size": [config.request.width, config.request.height],
            "seed": config.request.seed,
            "guidance": config.request.guidance,
            "quantize": config.request.quantize,
            "prompts": list(config.prompts),
        },
        "per_prompt_ratios": traces,
        "versions": versions,
    }


# The thresholds a probe calibration reports its simulated skips at (the published defaults
# 0.05 and 0.12 among them: diffusers, nunchaku/krita).
PROBE_CURVE = (0.03, 0.05, 0.08, 0.12, 0.16, 0.2, 0.3)


def probe_document(
    config: CalibrateConfig,
    chunks: list[dict[str, Any]],
    base: Any,
    threshold: float,
    versions: dict[str, str],
) -> dict[str, Any]:
    """A user calibration that keeps the base variant's TeaCache and MagCache numbers and records
    the first-block probe's default threshold for this model with its basis: the first block's
    change measured on every prompt's vanilla run, the probe's skips simulated on those traces at
    the default and along ``PROBE_CURVE`` (exact along each vanilla trajectory), and where
    skipping begins. Raises ValueError on missing data."""
    import statistics

    from app.gate.firstblock import GATE_NAME
    from app.gate.kinds import FIRSTBLOCK_KIND

    traces = []
    for chunk in chunks:
        changes = chunk.get("block_changes")
        if changes is None:
            raise ValueError(
                "these captured prompts predate the first-block probe; rerun with --fresh"
            )
        traces.append([None if c is None else tuple(float(x) for x in c) for c in changes])
    if not any(any(c for c in trace) for trace in traces):
        raise ValueError("the vanilla runs recorded no first-block change (too few steps?)")
    calibration = FIRSTBLOCK_KIND.calibration_of(base)
    params = FIRSTBLOCK_KIND.params(calibration, threshold)

    def skips(at: float) -> list[int]:
        return [FIRSTBLOCK_KIND.skipped(params.with_threshold(at), trace) for trace in traces]

    curve = []
    for at in sorted({*PROBE_CURVE, threshold}):
        found = skips(at)
        curve.append(
            {
                "threshold": at,
                "median_skipped": statistics.median(found),
                "min_skipped": min(found),
                "max_skipped": max(found),
            }
        )
    onsets = [FIRSTBLOCK_KIND.engagement(params, trace).onset_threshold for trace in traces]
    measured = [o for o in onsets if o is not None]
    at_default = skips(threshold)
    steps = config.request.steps
    size = f"{config.request.width}×{config.request.height}"
    onset_words = (
        f"skipping begins at {statistics.median(measured):.3g} (median over the prompts, "
        f"{min(measured):.3g}–{max(measured):.3g})"
        if measured
        else "no step was eligible"
    )
    return {
        "base_variant": config.request.variant_id,
        "name": config.name,
        "coefficients": None if base.coefficients is None else list(base.coefficients),
        "calibrated_range": None if base.calibrated_range is None else list(base.calibrated_range),
        "default_threshold": base.default_threshold,
        "provenance": (
            {"source": "the base variant's TeaCache fit, unchanged (this file adds the probe's)"}
            if base.coefficients is not None
            else {"source": "no TeaCache calibration (this file holds the first-block probe's)"}
        ),
        GATE_NAME: {  # the probe's section (``firstblock_from_document`` reads it)
            "default_threshold": threshold,
            "warmup_steps": params.warmup_steps,
            "max_consecutive_skips": params.max_consecutive_skips,
            "provenance": {
                "source": f"teacache-studio calibrate --gate firstblock, {dt.date.today()}: the "
                "first block's change measured on this model's vanilla runs",
                "data_size": f"{len(chunks)} prompts × {steps} steps, {size}, seed "
                f"{config.request.seed}, guidance {config.request.guidance}",
                "fit_metric": f"median skipped steps of {steps} at the default, simulated",
                "fit_value": statistics.median(at_default),
                "notes": f"at {threshold:g} the probe skips {statistics.median(at_default):g} of "
                f"{steps} steps (median; {min(at_default)}–{max(at_default)} across the prompts) "
                f"on these runs' own trajectories; {onset_words}",
            },
        },
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recipe": {
            "variant": config.request.variant_id,
            "gate": GATE_NAME,
            "steps": steps,
            "size": [config.request.width, config.request.height],
            "seed": config.request.seed,
            "guidance": config.request.guidance,
            "quantize": config.request.quantize,
            "prompts": list(config.prompts),
        },
        "skip_curve": curve,
        "onsets": onsets,
        "per_prompt_changes": [[None if c is None else list(c) for c in t] for t in traces],
        "versions": versions,
    }
