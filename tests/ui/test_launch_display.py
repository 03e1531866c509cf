"""A real window on Linux: a missing display or X11 library gives one clear sentence."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from app.ui import launch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux-only check")


def test_no_display_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    problem = launch.linux_display_problem()
    assert problem is not None and "DISPLAY is not set" in problem


def test_missing_xcb_libraries_name_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setenv("DISPLAY", ":99")
    present = {"xcb-cursor", "xkbcommon-x11"}
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: name if name in present else None)
    problem = launch.linux_display_problem()
    assert problem == (
        "Qt's X11 window support needs system libraries that are missing: "
        "sudo apt-get install libxcb-icccm4 libxcb-keysyms1"
    )


def test_offscreen_or_complete_x11_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.delenv("DISPLAY", raising=False)
    assert launch.linux_display_problem() is None
    monkeypatch.delenv("QT_QPA_PLATFORM")
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so")
    assert launch.linux_display_problem() is None


def test_launch_refuses_cleanly_without_a_display(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert launch.launch() == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("teacache-studio: no display")
