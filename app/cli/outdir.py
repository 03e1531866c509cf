"""Output folders checked before any work, and left as they were when a command fails.

``generate --out /proc/x`` used to run the whole generation and only then fail, with a traceback,
and a failed run left an empty folder behind. ``OutputFolder`` creates the folder (and any missing
parents) and writes and removes a probe file *before* the command loads a model; if the command
then fails or is interrupted, it removes what it created — the files it was told about, then each
folder it made, only while empty. A folder that existed before is never removed, nor one that
holds anything else.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.cli.errors import UserError


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class OutputFolder:
    """A folder this command will write into, checked creatable and writable up front."""

    def __init__(self, path: Path, *, what: str = "output folder") -> None:
        self.path = path
        self.what = what
        self.created: list[Path] = []  # the folders this object made, outermost first
        self.files: list[Path] = []

    def prepare(self) -> OutputFolder:
        """Create and probe the folder; raise UserError (exit 2) with nothing left behind."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise UserError(f"the {self.what} {path} is a file, not a folder")
        missing = []
        probe = path
        while not probe.exists() and probe != probe.parent:
            missing.append(probe)
            probe = probe.parent
        try:
            for folder in reversed(missing):
                folder.mkdir()
                self.created.append(folder)
        except OSError as exc:
            self.remove_created()
            raise UserError(f"cannot create the {self.what} {path}: {_reason(exc)}") from None
        try:
            fd, name = tempfile.mkstemp(prefix=".teacache-write-check-", dir=path)
            try:
                os.write(fd, b"ok")
            finally:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(name)
        except OSError as exc:
            self.remove_created()
            raise UserError(f"cannot write into the {self.what} {path}: {_reason(exc)}") from None
        return self

    def track(self, name: str) -> Path:
        """The path of a file the command writes here, removed again if the command fails."""
        target = self.path / name
        self.files.append(target)
        return target

    def subfolder(self, name: str) -> Path:
        """A folder inside this one for tracked files; removed with them where this object made
        the folder it sits in."""
        target = self.path / name
        if not target.is_dir():
            target.mkdir()
            if self.created:
                self.created.append(target)
        return target

    def remove_created(self) -> None:
        """Undo what this object made: tracked files (only in a folder it created), then each
        created folder while it is empty. Existing folders and others' files stay."""
        if not self.created:
            return
        for target in self.files:
            with contextlib.suppress(OSError):
                target.unlink()
        for folder in reversed(self.created):
            try:
                folder.rmdir()
            except OSError:
                return  # not empty (or gone): leave it and its parents
        self.created.clear()


@contextlib.contextmanager
def output_folder(path: Path, *, what: str = "output folder") -> Iterator[OutputFolder]:
    """Check ``path`` before the work; on any failure or interrupt inside, remove what was made."""
    folder = OutputFolder(path, what=what).prepare()
    try:
        yield folder
    except BaseException:
        folder.remove_created()
        raise
