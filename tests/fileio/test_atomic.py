"""Crash-safe writes keep the permissions a plain write gives (#27 item 20: exports and history
files were created owner-only, 0600, by mkstemp)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.fileio.atomic import atomic_write_bytes, atomic_write_text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_own(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # this test's only thread; restored below
    try:
        plain = tmp_path / "plain.png"
        plain.write_bytes(b"x")  # what open() gives: 0o666 under the umask
        atomic = tmp_path / "atomic.png"
        atomic_write_bytes(atomic, b"png")
        assert _mode(atomic) == _mode(plain) == 0o644
        assert atomic.read_bytes() == b"png"
        os.umask(0o077)
        private = tmp_path / "private.json"
        atomic_write_text(private, "{}")
        assert _mode(private) == 0o600  # a stricter umask is the user's choice, kept
    finally:
        os.umask(old_umask)
    atomic.chmod(0o640)
    atomic_write_bytes(atomic, b"again")
    assert _mode(atomic) == 0o640 and atomic.read_bytes() == b"again"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.png", "plain.png", "private.json"]
