"""``teacache-studio compare`` on the embedded demo: the files, compare.json, clean failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from app.cli.main import main

PROMPT = "a red circle on a blue background"


def test_compare_writes_every_threshold_and_one_vanilla(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    request = ["--variant", "demo", "--prompt", PROMPT, "--steps", "10", "--seed", "3"]
    code = main(["compare", *request, "--thresholds", "0.3,0.05,0.2,0.1", "--out", str(out)])
    assert code == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["thresholds"] == [0.05, 0.1, 0.2, 0.3] and data["complete"] is True
    assert data["hardware"]
    entries = data["entries"]
    assert [e["threshold"] for e in entries] == [0.05, 0.1, 0.2, 0.3]
    assert max(e["skips"] for e in entries) > 0  # engagement
    assert Image.open(out / "vanilla.png").size == (128, 128)
    digests = {e["report"]["vanilla_latents_sha256"] for e in entries}
    assert len(digests) == 1  # one vanilla for every entry
    for entry in entries:
        assert Image.open(out / entry["image"]).size == (128, 128)
        assert entry["report"]["resumed_from_step"] is not None  # resumed from that vanilla
        assert entry["speedup_label"] == entry["report"]["speedup_label"]
    err = capsys.readouterr().err
    assert err.count("vanilla pass: 10 steps\n") == 1  # computed once, then "(cached)"


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ("0.1,0.2", "compare 4 to 8 thresholds, got 2"),
        ("0.1,0.2,0.2,0.3", "threshold 0.2 appears twice"),
        ("0.1,x,0.2,0.3", "'x' is not a number"),
    ],
)
def test_a_bad_list_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], thresholds: str, message: str
) -> None:
    out = tmp_path / "out"
    request = ["--variant", "demo", "--prompt", PROMPT]
    code = main(["compare", *request, "--thresholds", thresholds, "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("teacache-studio: ") and message in err and "\n" not in err
    assert not out.exists()


def test_compare_with_magcache_defaults_to_thresholds_that_skip_distinct_counts(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    request = ["--variant", "demo", "--prompt", PROMPT, "--steps", "12", "--seed", "3"]
    code = main(["compare", *request, "--gate", "magcache", "--out", str(out)])
    assert code == 0
    data = json.loads((out / "compare.json").read_text())
    assert data["request"]["gate"] == "magcache" and data["complete"] is True
    skips = [e["skips"] for e in data["entries"]]
    assert len(skips) >= 4 and min(skips) > 0  # engagement at every default threshold
    assert len(set(skips)) == len(skips)  # measured: each default skips a different count
    assert all(e["report"]["gate"] == "magcache" for e in data["entries"])
