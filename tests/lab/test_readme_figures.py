"""README.md's measured figures are the committed result files' (``lab.readme_figures``): every
table and every figure in the prose around it equals what its file renders, a figure changed by
hand is caught, and the claims the words make about those figures hold in the files.

After a re-measurement: ``uv run python -m lab.readme_figures --write`` carries the new figures
into README.md; where a claim below then fails, the README's words need rewriting too."""

from __future__ import annotations

import shlex
import statistics
from pathlib import Path

import numpy as np
import pytest

from app.engine.timing import MAX_TOLERANCE
from lab.bench import preview_phase, previews, window_timing
from lab.gates import compare
from lab.readme_figures import (
    README,
    Block,
    Passage,
    all_figures,
    differences,
    fixed,
    rewrite,
)
from lab.target import readme_examples

TEXT = README.read_text(encoding="utf-8")
FIGURES = all_figures()


def test_the_readme_holds_every_figure_as_its_file_renders_it() -> None:
    problems = differences(TEXT, FIGURES)
    assert not problems, (
        "README.md's figures differ from the committed results; run "
        "`uv run python -m lab.readme_figures --write`:\n" + "\n".join(problems)
    )
    assert rewrite(TEXT, FIGURES) == TEXT


def _fields() -> list[tuple[str, Passage, str]]:
    """Every place a figure sits in the README's prose: (label, passage, its group)."""
    found = []
    for passage in (f for f in FIGURES if isinstance(f, Passage)):
        for group in passage.pattern().groupindex:
            found.append((f"{Path(passage.source).stem}:{group}", passage, group))
    return found


FIELDS = _fields()


@pytest.mark.parametrize(("where", "passage", "group"), FIELDS, ids=[f[0] for f in FIELDS])
def test_each_figure_changed_by_hand_is_caught_and_rewritten(
    where: str, passage: Passage, group: str
) -> None:
    match = passage.pattern().search(TEXT)
    assert match is not None, where
    start, end = match.span(group)
    edited = TEXT[:start] + "9" + TEXT[start:end] + TEXT[end:]  # 0.994 -> 90.994
    assert differences(edited, FIGURES), where
    assert rewrite(edited, FIGURES) == TEXT


BLOCKS = [f for f in FIGURES if isinstance(f, Block)]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_a_table_changed_by_hand_is_caught_and_rewritten(block: Block) -> None:
    match = block.pattern().search(TEXT)
    assert match is not None and match["body"] == block.text
    cell = block.text.rindex(".")  # the last figure's last decimal
    body = block.text[:cell] + ".9" + block.text[cell + 1 :]
    start, end = match.span("body")
    edited = TEXT[:start] + body + TEXT[end:]
    assert differences(edited, FIGURES) and rewrite(edited, FIGURES) == TEXT


def test_a_passage_takes_each_number_whole_and_keeps_the_line_breaks() -> None:
    passage = Passage("x.json", "skips {skipped} of {steps} steps, local difference {local}.", {
        "skipped": "9", "steps": "28", "local": "0.048"
    })  # fmt: skip
    text = "It skips 10 of 28\n  steps, local difference 0.83. Then 0.5."
    match = passage.pattern().search(text)
    assert match is not None and match["local"] == "0.83" and match["skipped"] == "10"
    assert passage.problems(text) == [
        "x.json: README.md says '10' where it gives '9'",
        "x.json: README.md says '0.83' where it gives '0.048'",
    ]
    assert passage.written(text) == "It skips 9 of 28\n  steps, local difference 0.048. Then 0.5."
    assert passage.problems(text + text)  # twice: not one place to hold it


def test_a_figure_is_rounded_half_up_from_the_number_the_file_shows() -> None:
    # 3.55 is stored as 3.5499…, which f"{:.1f}" shows as 3.5; a reader of the JSON rounds to 3.6.
    assert (fixed(3.55, 1), fixed(1.505, 2), fixed(0.9944980642, 3)) == ("3.6", "1.51", "0.994")
    assert (fixed(5.0, 1), fixed(743.96 / 60, 0)) == ("5.0", "12")


# -- the claims the words make ---------------------------------------------------------------------


def test_the_gate_comparison_claims_hold() -> None:
    document = compare.load()
    tea = document["summary"]["teacache"]
    for row in document["summary"]["magcache"]:
        # "MagCache loses at every matched skip count": TeaCache's curve, read at MagCache's
        # skip count, keeps a higher mean SSIM (wherever the two overlap).
        xs = [r["mean_skipped"] for r in tea]
        if not xs[0] <= row["mean_skipped"] <= xs[-1]:
            continue
        teacache_there = float(np.interp(row["mean_skipped"], xs, [r["mean_ssim"] for r in tea]))
        assert teacache_there > row["mean_ssim"], row
    # "skips more but keeps less": the FLUX.1-dev recipe at the demo's default threshold.
    default = {r["threshold"]: r for r in document["summary"]["magcache"]}[0.02]
    flux = {r["threshold"]: r for r in document["summary"]["magcache-flux-recipe"]}[0.02]
    assert flux["mean_skipped"] > default["mean_skipped"]
    assert flux["mean_ssim"] < default["mean_ssim"] and flux["min_ssim"] < default["min_ssim"]
    # "TeaCache keeps more of the image than the probe at every matched skip count, with a
    # local difference under half the probe's; the probe keeps more than MagCache."
    for row in document["matched"]:
        tea, mag, probe = (row[line] for line in ("teacache", "magcache", "firstblock"))
        assert tea["ssim"] > probe["ssim"] and 2 * tea["local_diff"] < probe["local_diff"], row
        if mag["ssim"] is not None:
            assert probe["ssim"] > mag["ssim"] and probe["local_diff"] < mag["local_diff"], row
    # "lies on or under the ideal curve": every gate's median speed-up at most its ideal, or
    # above it only inside its own prompts' range (min_speedup below the ideal).
    for rows in document["speed_summary"].values():
        for r in rows:
            assert r["median_speedup"] <= r["mean_ideal_speedup"] or (
                r["min_speedup"] <= r["mean_ideal_speedup"]
            ), r
    # "the first-block probe at 0.86–0.89": below TeaCache's points, the cost of its block.
    probe = [r["median_over_ideal"] for r in document["speed_summary"]["firstblock"]]
    tea_ratio = [r["median_over_ideal"] for r in document["speed_summary"]["teacache"]]
    assert max(probe) < min(tea_ratio)


def _readme_commands() -> set[tuple[str, ...]]:
    """Every `teacache-studio generate … --target-ssim` command the README shows, less --out."""
    joined = TEXT.replace("\\\n", " ")
    found = set()
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("uv run teacache-studio generate") and "--target-ssim" in line:
            words = shlex.split(line)[3:]
            out = words.index("--out")
            found.add(tuple(words[:out] + words[out + 2 :]))
    return found


def test_the_target_search_records_are_the_readmes_commands_and_its_story() -> None:
    assert {tuple(readme_examples.argv(g)) for g in readme_examples.GATES} <= _readme_commands()
    for gate in readme_examples.GATES:
        report = readme_examples.load(gate)["report"]
        tried = report["target_search"]
        assert report["gate"] == gate and report["target_met"] and report["target_complete"]
        chosen = [t for t in tried if t["chosen"]]
        assert len(chosen) == 1 and chosen[0]["threshold"] == report["threshold"]
        assert report["skipped"] == chosen[0]["skipped"] > 0  # engagement
        assert report["ssim"] >= report["target_ssim"] and chosen[0]["met"]
        assert all(t["skipped"] <= report["skipped"] for t in tried if t["met"])
    # TeaCache's first pass, the slider's 0.1, "a circle lost": rejected on the local bound.
    teacache = readme_examples.load("teacache")["report"]
    first = teacache["target_search"][0]
    assert first["threshold"] == 0.1 and not first["met"]
    assert first["local_diff"] > teacache["target_max_local_diff"]


def test_the_preview_cost_claims_hold() -> None:
    h200 = previews.load(previews.H200)
    assert all(r["skipped"] > 0 for r in h200["runs"])  # engagement next to every time
    pairs = previews.wall_differences_ms(h200)
    assert len(pairs) == h200["reps"]
    # "unpaired cold processes cannot resolve a 1 ms difference": the pairs straddle it.
    assert min(pairs) < 0 < 1 < max(pairs)
    # The queued design costs less than the first, blocking one.
    blocking = previews.load(previews.H200_BLOCKING)
    assert h200["summary"]["median_preview_seconds"] < blocking["summary"]["median_preview_seconds"]
    assert statistics.median(pairs) > 0
    modes = preview_phase.parse(preview_phase.H200.read_text(encoding="utf-8"))
    assert list(modes) == ["off", "blocking", "queued"]
    assert modes["queued"]["waits"] == 0 and modes["blocking"]["waits"] == 1


def test_the_window_timing_claims_hold() -> None:
    for path in (window_timing.TABLE_RUN, window_timing.PREVIEWS_RUN):
        report = window_timing.load(path)
        # "10 of 28 steps skipped in every run", window, `generate` and bench alike.
        assert {r["skipped"] for r in report["runs"]} == {report["skipped"]}
        assert report["cli_skipped"] == [report["skipped"]] and report["skipped"] > 0
    # "missed by runs none" (#30's window band, and the bench's) and "The bench read 1.55×
    # against the 1.56× … can give at most": within what skipping can deliver.
    table = window_timing.load(window_timing.TABLE_RUN)
    low, high = window_timing.CLI_RATIO_BAND
    assert all(low <= r["cli_speedup_ratio"] <= high for r in table["runs"])
    assert table["meets_targets"] is True
    assert table["bench_speedup"] <= table["bench_ideal_speedup"] * (1 + MAX_TOLERANCE)
