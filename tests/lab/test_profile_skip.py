"""The in-loop phase clock of lab/bench/device/profile_skip.py, on a scripted clock: a phase's
time is exclusive of the phases nested in it, and each lands in the step it started in."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "lab" / "bench" / "device" / "profile_skip.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profile_skip", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nested_phases_are_exclusive_and_bucketed_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    profile = _module()
    ticks = itertools.count()  # every perf_counter() call is one second later
    monkeypatch.setattr(profile.time, "perf_counter", lambda: float(next(ticks)))
    clock = profile._PhaseClock()
    step = 0
    clock.step_of = lambda: step
    inner = clock.wrap("latents_eval", lambda: None)
    outer = clock.wrap("in_loop", lambda: inner())
    outer()  # outer: ticks 0 and 3 (3 s), inner: ticks 1 and 2 (1 s)
    step = 1
    inner()
    assert clock.by_step == {0: {"latents_eval": 1.0, "in_loop": 2.0}, 1: {"latents_eval": 1.0}}
