"""Adapter-test setup: the random-weight shells run in float32, on mflux's eager or compiled path.

mflux reads ``ModelConfig.precision`` at call time (bfloat16 by default), and
``AppleSiliconUtil.is_m1_or_m2()`` picks eager (True) or ``mx.compile`` (False). The files that
need them say so with ``pytestmark = pytest.mark.usefixtures(...)``.
"""

from __future__ import annotations

import mlx.core as mx
import pytest
from mflux.models.common.config.model_config import ModelConfig
from mflux.utils.apple_silicon import AppleSiliconUtil


@pytest.fixture
def float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """float32 shells: the measured tolerances in these files are float32 rounding, not bfloat16."""
    monkeypatch.setattr(ModelConfig, "precision", mx.float32)


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """mflux's eager path (what it runs on M1/M2): no ``mx.compile`` around the transformer."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: True))


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """mflux's compiled path (M3 and later): the transformer call goes through ``mx.compile``."""
    monkeypatch.setattr(AppleSiliconUtil, "is_m1_or_m2", staticmethod(lambda: False))
