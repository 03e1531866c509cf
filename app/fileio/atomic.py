"""Crash-safe writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, with the permissions a plain write gives it: an existing
    file's own, else the user's umask (``mkstemp``'s owner-only 0600 made exports and history
    files unreadable to anyone else)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_name = str(path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp_name, flags, 0o666)  # the kernel applies the umask, as open() does
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):  # a replaced file keeps its mode
            os.chmod(tmp_name, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not supported everywhere (e.g. Windows), hence best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
