"""The machine a figure was measured on (app/hardware.py): memory, and the commit measured."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app import hardware

ROOT = Path(__file__).resolve().parents[1]
GB = 1024**3


def test_physical_memory_is_known_here_and_is_the_hosts_ram() -> None:
    memory = hardware.physical_memory_bytes()
    assert memory is not None and memory > 1 * GB
    assert hardware.host_info()["ram_gb"] == round(memory / 2**30, 1)


def test_the_commit_measured_is_this_checkouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEACACHE_GIT_COMMIT", raising=False)
    assert hardware.REPO_ROOT == ROOT
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    expected = done.stdout.strip() if done.returncode == 0 else None
    assert hardware.git_commit()["commit"] == expected
    monkeypatch.setenv("TEACACHE_GIT_COMMIT", "abc123")
    assert hardware.git_commit() == {
        "commit": "abc123",
        "dirty": None,
        "source": "TEACACHE_GIT_COMMIT",
    }
