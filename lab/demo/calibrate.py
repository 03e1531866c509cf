"""Calibrate the TeaCache gate for the demo models and choose demo's default threshold.

    python -m lab.demo.calibrate   # calibrations → resources/demo; pairs, sweep → lab/demo/results

Capture: vanilla runs through the FLUX.2 adapter with the vanilla recorder, calibrating
(``app.gate.kinds.vanilla_recorder(..., calibrating=True)``): TeaCache's record holds per step the
rel-L1 change of the gate signal (modulated block-0 image input) and of the transformer output,
without skipping.
Fit: ``app.gate.fit`` (degree 4, free and through the origin, R², held-out R² on 3 of 12
prompts). Threshold: an SSIM sweep of gated against same-process vanilla runs on 10 other prompts.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from app.engine import threshold_rule
from app.fileio.jsonio import dumps_json
from app.gate.fit import PolynomialFit, choose, fit, minimum_on
from app.metrics import ssim
from lab.demo.reports import write_json
from lab.demo.scenes import caption, scene_from_seed
from lab.paths import DEMO_RESULTS

CALIBRATION_SEED_BASE = 800_000
SWEEP_SEED_BASE = 810_000
GENERATION_SEED = 42
HELDOUT = (9, 10, 11)  # prompt indices held out for the held-out R²
# The sweep's thresholds and the rule that reads it are the app's, which a user calibration
# applies to its own prompts (app.engine.threshold_rule).
THRESHOLDS = threshold_rule.GRID
SKIP_SHARE_TARGET = threshold_rule.SKIP_SHARE_BAND


def prompts(base: int, n: int) -> list[str]:
    return [caption(scene_from_seed(base + i)) for i in range(n)]


def _generate(pipe: Any, text: str, steps: int, guidance: float) -> Any:
    """One 128×128 generation at the calibration seed: captures, vanilla and gated runs alike."""
    return pipe.generate_image(
        seed=GENERATION_SEED,
        prompt=text,
        num_inference_steps=steps,
        height=128,
        width=128,
        guidance=guidance,
    )


def capture_pairs(
    pipe: Any, texts: list[str], steps: int, guidance: float = 1.0
) -> list[list[dict[str, float | int]]]:
    """Per prompt, per step ≥ 1: {index, x (signal rel-L1), y (output rel-L1)}."""
    from app.adapters import install_gate
    from app.gate.kinds import vanilla_recorder

    class Uncalibrated:  # the signal priced by the identity: the pairs are what is measured
        calibrations: dict[str, object] = {}  # noqa: RUF012

    out = []
    for text in texts:
        gate = vanilla_recorder(Uncalibrated(), calibrating=True)
        with install_gate(pipe, gate):
            _generate(pipe, text, steps, guidance)
        pairs = []
        for e in gate.events:
            x, y = (e.figures("teacache").get(k) for k in ("rel_l1", "output_rel_l1"))
            if isinstance(x, float) and isinstance(y, float):
                pairs.append({"index": e.index, "x": x, "y": y})
        out.append(pairs)
    return out


def fit_pairs(per_prompt: list[list[dict[str, float | int]]]) -> dict[str, PolynomialFit]:
    x = [p["x"] for pairs in per_prompt for p in pairs]
    y = [p["y"] for pairs in per_prompt for p in pairs]
    groups = [i for i, pairs in enumerate(per_prompt) for _ in pairs]
    heldout = [h for h in HELDOUT if h < len(per_prompt)]
    return {
        mode: fit(x, y, mode=mode, groups=groups, heldout=heldout) for mode in ("free", "origin")
    }


def _uint8(result: Any) -> np.ndarray:
    return np.asarray(result.image.convert("RGB"), dtype=np.uint8)


def sweep(
    pipe: Any,
    params: Any,
    texts: list[str],
    steps: int,
    thresholds: tuple[float, ...] = THRESHOLDS,
    guidance: float = 1.0,
) -> list[dict[str, Any]]:
    """Per threshold: skips and SSIM of gated against same-process vanilla, per prompt."""
    from app.adapters import install_gate
    from app.gate import TeaCacheGate

    vanilla = []
    for text in texts:
        vanilla.append(_uint8(_generate(pipe, text, steps, guidance)))
    rows = []
    for threshold in thresholds:
        skipped, scores, patterns = [], [], []
        for text, reference in zip(texts, vanilla, strict=True):
            gate = TeaCacheGate(replace(params, rel_l1_thresh=threshold))
            with install_gate(pipe, gate):
                image = _uint8(_generate(pipe, text, steps, guidance))
            skipped.append(gate.skipped)
            scores.append(ssim(reference, image))
            patterns.append(gate.pattern)
        rows.append(
            {
                "threshold": threshold,
                "mean_skipped": float(np.mean(skipped)),
                "skip_share": float(np.mean(skipped)) / steps,
                "mean_ssim": float(np.mean(scores)),
                "min_ssim": float(np.min(scores)),
                "skipped": skipped,
                "ssim": scores,
                "patterns": patterns,
            }
        )
    return rows


def choose_threshold(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Largest skip share inside the target band whose worst prompt keeps SSIM ≥ 0.90; if none
    lands in the band, the largest threshold that keeps the SSIM floor (app.engine.threshold_rule's
    ``choose``); where none keeps it, the smallest threshold."""
    picked = threshold_rule.choose(
        [
            threshold_rule.RuleRow(
                r["threshold"],
                r["mean_skipped"],
                r["skip_share"],
                r.get("mean_ssim", r["min_ssim"]),
                r["min_ssim"],
            )
            for r in rows
        ]
    )
    if picked is None:
        return min(rows, key=lambda r: r["threshold"])
    return next(r for r in rows if r["threshold"] == picked.threshold)


def calibration_record(
    variant: str,
    chosen: PolynomialFit,
    fits: dict[str, PolynomialFit],
    steps: int,
    n_prompts: int,
    guidance: float,
    default_threshold: float | None,
    min_predicted: float | None,
    notes: str,
) -> dict[str, Any]:
    return {
        "variant": variant,
        "coefficients": list(chosen.coefficients),
        "calibrated_range": list(chosen.x_range),
        "default_threshold": default_threshold,
        "min_predicted_change": min_predicted,
        "provenance": {
            "source": f"lab.demo.calibrate: {chosen.mode} degree-4 fit on the demo's own vanilla "
            "runs (FLUX.2 adapter, observing gate)",
            "fit_metric": "R²",
            "fit_value": round(chosen.r2, 4),
            "data_size": f"{chosen.data_size} pairs ({n_prompts} prompts × {steps - 1} "
            f"consecutive-step pairs, 128², guidance {guidance:g}, seed {GENERATION_SEED}); "
            f"held-out "
            f"R² {chosen.heldout_r2:.3f} on prompts {list(HELDOUT)}",
            "reference": f"lab/demo/results/{variant}.calibration-pairs.json",
            "notes": notes
            + " Other fit: "
            + ", ".join(
                f"{m} R² {f.r2:.3f} / held-out {f.heldout_r2:.3f}"
                for m, f in fits.items()
                if f is not chosen
            ),
        },
    }


def write_calibration(path: Path, record: dict[str, Any]) -> None:
    """The TeaCache record into a variant's calibration file, keeping what other gates keep there
    (MagCache's section): the file is shared by the gate kinds."""
    import json

    previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    write_json(path, {**previous, **record})


def demo_guidance(variant: str) -> float:
    """Calibrate and sweep at the guidance the app samples with (the registry's default)."""
    from app.variants import get_variant

    guidance = get_variant(variant).default_guidance
    assert guidance is not None  # both demo variants take a guidance value
    return guidance


def run(
    resources: Path, n_calibration: int = 12, n_sweep: int = 10, results: Path = DEMO_RESULTS
) -> dict[str, Any]:
    from app.demo.pipeline import load_demo_pipeline
    from app.gate import TeaCacheParams, engagement, simulate

    summary: dict[str, Any] = {}
    cal_prompts = prompts(CALIBRATION_SEED_BASE, n_calibration)
    sweep_prompts = prompts(SWEEP_SEED_BASE, n_sweep)

    # demo: 28 steps
    t0 = time.perf_counter()
    pipe = load_demo_pipeline("demo", resources)
    guidance = demo_guidance("demo")
    pairs = capture_pairs(pipe, cal_prompts, 28, guidance)
    fits = fit_pairs(pairs)
    chosen = choose(fits)
    params = TeaCacheParams(
        coefficients=chosen.coefficients, rel_l1_thresh=0.0, calibrated_range=chosen.x_range
    )
    rows = sweep(pipe, params, sweep_prompts, 28, guidance=guidance)
    pick = choose_threshold(rows)
    record = calibration_record(
        "demo",
        chosen,
        fits,
        28,
        n_calibration,
        guidance,
        pick["threshold"],
        None,
        f"default threshold {pick['threshold']} from the SSIM sweep "
        f"(lab/demo/results/demo.threshold-sweep.json): {pick['mean_skipped']:.1f}/28 steps "
        f"skipped on average, SSIM mean {pick['mean_ssim']:.3f}, worst {pick['min_ssim']:.3f}.",
    )
    write_calibration(resources / "demo.calibration.json", record)
    write_json(
        results / "demo.calibration-pairs.json",
        {
            "variant": "demo",
            "steps": 28,
            "guidance": guidance,
            "prompts": cal_prompts,
            "pairs": pairs,
            "fits": {m: f.as_dict() for m, f in fits.items()},
            "chosen": chosen.mode,
        },
    )
    write_json(
        results / "demo.threshold-sweep.json",
        {
            "variant": "demo",
            "steps": 28,
            "guidance": guidance,
            "prompts": sweep_prompts,
            "coefficients": list(chosen.coefficients),
            "calibrated_range": list(chosen.x_range),
            "rows": rows,
            "chosen": pick["threshold"],
            "rule": choose_threshold.__doc__,
        },
    )
    summary["demo"] = {
        "fits": {m: f.as_dict() for m, f in fits.items()},
        "chosen": chosen.mode,
        "threshold": pick,
        "seconds": time.perf_counter() - t0,
    }

    # demo-turbo: 4 steps; its own fit, and the smallest prediction on its own steps
    t0 = time.perf_counter()
    turbo = load_demo_pipeline("demo-turbo", resources)
    turbo_guidance = demo_guidance("demo-turbo")
    turbo_pairs = capture_pairs(turbo, cal_prompts, 4, turbo_guidance)
    turbo_fits = fit_pairs(turbo_pairs)
    turbo_chosen = choose(turbo_fits)
    turbo_params = TeaCacheParams(
        coefficients=turbo_chosen.coefficients,
        rel_l1_thresh=0.5,
        calibrated_range=turbo_chosen.x_range,
    )
    predicted = [
        float(np.polyval(turbo_chosen.coefficients, p["x"])) for per in turbo_pairs for p in per
    ]
    on_range = minimum_on(turbo_chosen.coefficients, *turbo_chosen.x_range)
    traces = [[None] + [p["x"] for p in per] for per in turbo_pairs]
    simulated_skips = [
        sum(v.decision.value == "skipped" for v in simulate(turbo_params, tr)) for tr in traces
    ]
    # The smallest prediction on a step the gate may skip (never the first or last), per prompt:
    # the simulator's onset. The window's banner offers a threshold just above the smallest as a
    # guess before a run, so it must skip on the calibration prompt it came from (the last step's
    # prediction, 0.175, is below every prompt's onset: a guess from it skipped nowhere).
    onsets = [engagement(turbo_params, tr).onset_threshold for tr in traces]
    min_predicted = float(min(o for o in onsets if o is not None))
    live = sweep(
        turbo, turbo_params, cal_prompts[:6], 4, thresholds=(0.1, 0.3, 0.5), guidance=turbo_guidance
    )
    if min_predicted > 0.5:
        verdict = "above 0.5, so no threshold ≤ 0.5 can skip"
    else:
        verdict = (
            "BELOW 0.5: this turbo's outputs change little between its steps, so a gate "
            "calibrated on it can skip its middle steps (live skips at 0.1/0.3/0.5: "
            + "/".join(f"{r['mean_skipped']:.1f}" for r in live)
            + " of 4, SSIM "
            + "/".join(f"{r['mean_ssim']:.3f}" for r in live)
            + ")"
        )
    record = calibration_record(
        "demo-turbo",
        turbo_chosen,
        turbo_fits,
        4,
        n_calibration,
        turbo_guidance,
        None,
        round(min_predicted, 4),
        f"distilled to 4 steps: the smallest predicted change on a step the gate may skip is "
        f"{min_predicted:.3f} ({min_predicted:.3f}–{max(o for o in onsets if o is not None):.3f} "
        f"over the {len(onsets)} prompts; over all measured steps {min(predicted):.3f}, the "
        f"polynomial's minimum over the calibrated range {on_range:.3f}), "
        f"{verdict}; simulated skips at 0.5: {sum(simulated_skips)} over {len(traces)} runs.",
    )
    write_calibration(resources / "demo-turbo.calibration.json", record)
    write_json(
        results / "demo-turbo.calibration-pairs.json",
        {
            "variant": "demo-turbo",
            "steps": 4,
            "guidance": turbo_guidance,
            "prompts": cal_prompts,
            "pairs": turbo_pairs,
            "fits": {m: f.as_dict() for m, f in turbo_fits.items()},
            "chosen": turbo_chosen.mode,
            "predicted": predicted,
            "polynomial_minimum_on_range": on_range,
            "simulated_skips_at_0.5": simulated_skips,
            "live_sweep": live,
        },
    )
    summary["demo-turbo"] = {
        "fits": {m: f.as_dict() for m, f in turbo_fits.items()},
        "chosen": turbo_chosen.mode,
        "min_predicted": min_predicted,
        "minimum_on_range": on_range,
        "simulated_skips": simulated_skips,
        "seconds": time.perf_counter() - t0,
    }
    return summary


def main(argv: list[str] | None = None) -> None:
    from app.blas import preload_openblas

    preload_openblas()
    from app.paths import DEMO_DIR

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=Path, default=DEMO_DIR)
    parser.add_argument("--results", type=Path, default=DEMO_RESULTS)
    args = parser.parse_args(argv)
    summary = run(args.resources, results=args.results)
    print(dumps_json(summary, indent=1, default=str)[:4000])


if __name__ == "__main__":
    main()
