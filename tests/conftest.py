"""Test-wide setup: OpenBLAS before MLX, each worker its own MLX compile folder, Qt offscreen, no
user files touched."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

from app.blas import preload_openblas
from app.compile_cache import use_private_compile_cache

preload_openblas()
# The xdist workers compile the same kernels at once: in MLX's one shared folder, one worker loaded
# another's half-written library on a cold cache (issue #39); app/compile_cache.py says why.
use_private_compile_cache()

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Time is never asserted in a unit test, Hypothesis's included: no per-example deadline and no
# "input generation is slow" health check, both of which fail on a loaded machine (seen on the
# shared 2-core box: 5 inputs in 1.05 s failed a property test in tests/gate).
settings.register_profile("teacache", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("teacache")

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


@pytest.fixture
def on_a_mac(monkeypatch: pytest.MonkeyPatch) -> None:
    """The messages name the operating system they run on ("macOS", "this Mac"); tests that
    assert the Mac's wording pin the platform, so they read the same on a Linux CI machine."""
    from app import hardware

    monkeypatch.setattr(hardware, "on_mac", lambda: True)


@pytest.fixture
def on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    from app import hardware

    monkeypatch.setattr(hardware, "on_mac", lambda: False, raising=False)
    monkeypatch.setattr(hardware.platform, "system", lambda: "Linux")


@pytest.fixture
def restored_app(qapp):  # type: ignore[no-untyped-def]
    """The shared QApplication, put back as it was after configure_application changed it."""
    from PySide6.QtWidgets import QApplication

    saved = (
        qapp.windowIcon(),
        qapp.styleSheet(),
        qapp.style().name(),
        QApplication.applicationName(),
        QApplication.organizationName(),
        QApplication.applicationVersion(),
    )
    yield qapp
    icon, sheet, style, name, organisation, version = saved
    qapp.setWindowIcon(icon)
    qapp.setStyleSheet(sheet)
    qapp.setStyle(style)
    QApplication.setApplicationName(name)
    QApplication.setOrganizationName(organisation)
    QApplication.setApplicationVersion(version)
