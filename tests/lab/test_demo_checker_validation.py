"""The checker's validation figures come from committed data
(lab/demo/results/checker-validation.json, ``python -m lab.demo.checker_validation``): its
summaries are the counts of its per-scene records, a slice recomputed now gives the same records,
and the figures the README quotes are the file's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab.demo import scenes as S
from lab.demo.checker_validation import (
    FIRST_SEED,
    KEYS,
    N_SCENES,
    SIGMAS,
    conditions,
    scene_records,
    summarise,
)
from lab.paths import DEMO_RESULTS

SLICE = 12  # scenes recomputed here (about 15 s); the file holds 300


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return json.loads((DEMO_RESULTS / "checker-validation.json").read_text(encoding="utf-8"))


def test_file_covers_the_documented_run(committed: dict[str, Any]) -> None:
    assert (committed["scenes"], committed["first_seed"]) == (N_SCENES, FIRST_SEED)
    assert committed["sigmas"] == list(SIGMAS)
    names = {"ground_truth", "codec_round_trip", *(f"blur_{s}" for s in SIGMAS)}
    assert set(committed["conditions"]) == names
    for name, condition in committed["conditions"].items():
        assert len(condition["per_scene"]) == N_SCENES, name


def test_summaries_are_recounted_from_the_per_scene_records(committed: dict[str, Any]) -> None:
    for name, condition in committed["conditions"].items():
        recounted = summarise(condition["per_scene"])
        assert {k: v for k, v in condition.items() if k != "per_scene"} == recounted, name
        for record in condition["per_scene"]:
            assert record["all"] == all(record[k] for k in KEYS[:-1]), (name, record)


def test_a_slice_recomputed_now_matches_the_file(committed: dict[str, Any]) -> None:
    # Renders, the codec and the blur are deterministic numpy/scipy: the same scenes give the
    # same verdicts, record for record.
    scenes = [S.scene_from_seed(FIRST_SEED + i) for i in range(SLICE)]
    specs = [S.prompt_of(s) for s in scenes]
    for name, images in conditions(S.render_batch(scenes)).items():
        expected = committed["conditions"][name]["per_scene"][:SLICE]
        assert scene_records(images, specs) == expected, name


def test_the_readmes_checker_figures_are_the_files(committed: dict[str, Any]) -> None:
    # README: shape right on 99% of ground-truth renders and 97% after the codec's round trip;
    # on renders blurred by a 1-px Gaussian the checker still reads 111 of 118 stars, other shapes
    # >= 98% throughout. At 1.5 px the README said 93 of 118; this measurement (2026-12-01) reads
    # 92, and the README is to cite the file.
    c = committed["conditions"]
    assert round(c["ground_truth"]["scores"]["shape"], 2) == 0.99
    assert round(c["codec_round_trip"]["scores"]["shape"], 2) == 0.97
    assert (c["blur_1.0"]["stars_right"], c["blur_1.0"]["stars"]) == (111, 118)
    assert (c["blur_1.5"]["stars_right"], c["blur_1.5"]["stars"]) == (92, 118)
    for sigma in SIGMAS:
        blurred = c[f"blur_{sigma}"]
        assert blurred["other_shapes_right"] >= 0.98 * blurred["other_shapes"], sigma
