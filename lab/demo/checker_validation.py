"""How far the automatic checker can be trusted: its scores on ground-truth renders, on their codec
round trips, and on renders with softened edges, where every prompt is right by construction.

    python -m lab.demo.checker_validation --out lab/demo/results/checker-validation.json

Ground truth: 300 scenes (seeds 10,000+, a stream the evaluation and training never draw from)
rendered by ``lab.demo.scenes`` and checked against their own prompts. Codec round trip: each render
encoded and decoded by the shipped codec (what the model's latents can at best reproduce). Soft
edges: each render blurred by a Gaussian of sigma px per channel (generated objects have softer
edges than renders); star clauses are counted apart, as stars are what blur turns into squares.

Per-scene records are kept so that the summaries can be recounted and a slice recomputed
(tests/lab/test_demo_checker_validation.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from lab.demo import checker
from lab.demo import scenes as S
from lab.demo.reports import emit_json

FIRST_SEED = 10_000
N_SCENES = 300
SIGMAS = (0.7, 1.0, 1.5)
KEYS = ("colour", "shape", "position", "count", "all")


def conditions(images: np.ndarray, sigmas: tuple[float, ...] = SIGMAS) -> dict[str, np.ndarray]:
    """The images each condition checks, in [0, 1], keyed by condition name."""
    from scipy import ndimage

    from app.demo.codec import load_codec
    from app.demo.model import CODEC_FILE
    from app.paths import DEMO_DIR

    codec = load_codec(DEMO_DIR / CODEC_FILE)
    out = {
        "ground_truth": images,
        "codec_round_trip": (np.clip(codec.decode(codec.encode(images)), -1, 1) + 1) / 2,
    }
    for sigma in sigmas:
        out[f"blur_{sigma}"] = np.stack(
            [ndimage.gaussian_filter(im, sigma=(sigma, sigma, 0.0)) for im in images]
        )
    return out


def scene_records(images: np.ndarray, specs: list[S.PromptSpec]) -> list[dict[str, Any]]:
    """Per scene: the checker's verdict summary, and its star clauses read right / asked."""
    records = []
    for image, spec in zip(images, specs, strict=True):
        verdict = checker.check(image, spec)
        stars = [
            reading.shape
            for clause, reading in zip(spec.clauses, verdict.clauses, strict=True)
            if clause.shape == "star"
        ]
        other = [
            reading.shape
            for clause, reading in zip(spec.clauses, verdict.clauses, strict=True)
            if clause.shape not in (None, "star")
        ]
        records.append(
            {
                **{k: bool(v) for k, v in verdict.summary().items()},
                "stars_right": sum(stars),
                "stars": len(stars),
                "other_shapes_right": sum(other),
                "other_shapes": len(other),
            }
        )
    return records


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    return {
        "scores": {k: sum(r[k] for r in records) / n for k in KEYS},
        "stars_right": sum(r["stars_right"] for r in records),
        "stars": sum(r["stars"] for r in records),
        "other_shapes_right": sum(r["other_shapes_right"] for r in records),
        "other_shapes": sum(r["other_shapes"] for r in records),
    }


def validate(
    n: int = N_SCENES, first_seed: int = FIRST_SEED, sigmas: tuple[float, ...] = SIGMAS
) -> dict[str, Any]:
    scenes = [S.scene_from_seed(first_seed + i) for i in range(n)]
    specs = [S.prompt_of(s) for s in scenes]
    images = S.render_batch(scenes)
    result: dict[str, Any] = {
        "scenes": n,
        "first_seed": first_seed,
        "sigmas": list(sigmas),
        "conditions": {},
    }
    for name, batch in conditions(images, sigmas).items():
        records = scene_records(batch, specs)
        result["conditions"][name] = {**summarise(records), "per_scene": records}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=N_SCENES)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    emit_json(validate(args.n), args.out)


if __name__ == "__main__":
    main()
