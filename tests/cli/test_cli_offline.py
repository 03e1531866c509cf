"""``generate`` with a real variant and no network: the real Hugging Face client meets a refused
port, a host name that never resolves, or a server that never answers, and the command prints one
sentence (size and what to do instead), no traceback, and exits 1 like every failed run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.network import UNREACHABLE_REASONS, unreachable_endpoint

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", sorted(UNREACHABLE_REASONS))
def test_generate_without_network_says_so_in_one_line(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with unreachable_endpoint(kind) as endpoint:
        # huggingface_hub reads these at import: the command runs in a fresh interpreter.
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")  # the silent server: give up after 1 s
        monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "app",
                "generate",
                "--variant",
                "flux2-klein-4b",
                "--quantize",
                "4",  # the memory check, which runs first, passes on any test machine
                "--prompt",
                "a red circle",
                "--out",
                str(tmp_path / "out"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("teacache-studio:")]
    headline = "Hugging Face is not answering" if kind == "silent" else "No internet connection"
    assert errors == [
        f"teacache-studio: {headline}: cannot download FLUX.2 Klein 4B (16.0 GB) from Hugging "
        f"Face ({UNREACHABLE_REASONS[kind]}); go online and try again, or pick a variant that is "
        "already on disk or the embedded demo"
    ]
    assert not (tmp_path / "out" / "report.json").exists()
