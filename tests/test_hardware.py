"""The machine facts every figure carries: the commit measured comes from this checkout."""

import subprocess

from app.hardware import REPO_ROOT, git_commit


def test_the_commit_is_this_checkouts_head(monkeypatch):
    monkeypatch.delenv("TEACACHE_GIT_COMMIT", raising=False)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (REPO_ROOT / "app" / "hardware.py").is_file()
    assert git_commit() == {"commit": head, "dirty": git_commit()["dirty"], "source": "git"}
