"""Test-wide setup: OpenBLAS before MLX, Qt offscreen, no user files touched."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

from app.blas import preload_openblas

preload_openblas()

import pytest  # noqa: E402

# The Hub fixtures (``online``, ``hub``) shared by the weights and loader tests.
pytest_plugins = ("tests.fakes.hub",)

if TYPE_CHECKING:
    from app.demo.pipeline import DemoFlux2Klein


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point every platformdirs location at a per-test folder so tests never see real settings."""
    root = tmp_path_factory.mktemp("userdirs")
    monkeypatch.setenv("TEACACHE_STUDIO_HOME", str(root))


@pytest.fixture(scope="session")
def demo_pipeline() -> DemoFlux2Klein:
    """The shipped demo (resources/demo) as a Flux2Klein shell, loaded once per session (about a
    second); tests that change its attributes do so through ``monkeypatch``, which restores them."""
    from app.demo.pipeline import load_demo_pipeline

    return load_demo_pipeline("demo")


@pytest.fixture(scope="session")
def turbo_pipeline() -> DemoFlux2Klein:
    """The shipped 4-step demo-turbo, loaded once per session."""
    from app.demo.pipeline import load_demo_pipeline

    return load_demo_pipeline("demo-turbo")
