"""The committed strength measurement (``lab/img2img/results/strength-demo.json``) is what its
script says it is: the shipped sketch, every strength and run, the steps mflux runs at each
strength, and the gate engaged among them (skips beside every quality figure)."""

from __future__ import annotations

import hashlib

from app.paths import DEMO_SKETCH
from app.variants.schedule import steps_left_out
from lab.img2img import strength

DOCUMENT = strength.load()


def test_it_measured_the_shipped_sketch_at_every_strength() -> None:
    assert DOCUMENT["picture"]["sha256"] == hashlib.sha256(DEMO_SKETCH.read_bytes()).hexdigest()
    assert [row["strength"] for row in DOCUMENT["rows"]] == list(strength.STRENGTHS)
    runs = {(p, s) for p in strength.PROMPTS for s in strength.SEEDS}
    for row in DOCUMENT["rows"]:
        assert {(run["prompt"], run["seed"]) for run in row["runs"]} == runs


def test_each_strength_ran_the_steps_mflux_leaves_and_the_gate_skipped_among_them() -> None:
    sigmas = []
    for row in DOCUMENT["rows"]:
        left_out = steps_left_out(row["steps"], row["strength"])
        assert row["steps_left_out"] == left_out
        ran = row["steps"] - left_out
        for run in row["runs"]:
            assert len(run["pattern"]) == ran == run["computed"] + run["skipped"]
            assert run["pattern"][0] == "F"  # the first step that runs is always computed
            assert run["skipped"] > 0 and 0.0 < run["ssim"] <= 1.0
        sigmas.append(row["start_sigma"])
    assert sigmas == sorted(sigmas, reverse=True) and sigmas[0] == 1.0


def test_the_readme_table_has_a_row_per_strength() -> None:
    table = strength.readme_table(DOCUMENT).splitlines()
    assert len(table) == 2 + len(strength.STRENGTHS)
    assert [line.split("|")[1].strip() for line in table[2:]] == [
        f"{s:g}" for s in strength.STRENGTHS
    ]
