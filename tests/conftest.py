"""Test-wide setup: OpenBLAS before MLX, Qt offscreen, no user files touched."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

from app.blas import preload_openblas

preload_openblas()

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point every platformdirs location at a per-test folder so tests never see real settings."""
    root = tmp_path_factory.mktemp("userdirs")
    monkeypatch.setenv("TEACACHE_STUDIO_HOME", str(root))
