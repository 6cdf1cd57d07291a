"""Folder locks: one benchbuild process works in a run folder (or a sweep) at a time.

The lock is an OS file lock (`flock`) on `.benchbuild.lock` inside the folder, held by the open file: the kernel
releases it when the process ends, however it ends, so a killed run never blocks its own resumption. The file holds
the holder's pid and command line, so the refused second process can say who has the folder.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from benchbuild.errors import BenchbuildError

LOCK_FILE = ".benchbuild.lock"


class FolderLock:
    """`with FolderLock(folder, what="run folder"):` holds `folder`'s lock, or raises a BenchbuildError naming the
    process that holds it. Re-entrant within one process: a nested claim of a folder this process holds passes."""

    _held: dict[str, int] = {}  # resolved folder -> how many claims of this process hold it

    def __init__(self, folder: str | Path, what: str = "folder"):
        self.folder = Path(folder)
        self.what = what
        self._fd: int | None = None
        self._key = ""

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._key = str(self.folder.resolve())
        if self._key in FolderLock._held:
            FolderLock._held[self._key] += 1
            return
        path = self.folder / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise BenchbuildError(f"cannot lock {self.folder} ({path}: {error.strerror or error}): "
                                  f"it is not a folder benchbuild can write in") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise _in_use(self.folder, holder, self.what) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} ({' '.join(['benchbuild', *sys.argv[1:]])[:300]})\n".encode(), 0)
        self._fd = fd
        FolderLock._held[self._key] = 1

    def release(self) -> None:
        if not self._key or self._key not in FolderLock._held:
            return
        FolderLock._held[self._key] -= 1
        if FolderLock._held[self._key] == 0:
            del FolderLock._held[self._key]
            if self._fd is not None:
                os.close(self._fd)  # closing the file releases the lock
                self._fd = None
        self._key = ""


def _in_use(folder: Path, holder: str, what: str) -> BenchbuildError:
    return BenchbuildError(f"{folder} is in use by benchbuild process {holder}: two commands never write one {what} "
                           "at once; wait for it to end (or stop it) and rerun")


def check_free(folder: str | Path, what: str = "folder") -> None:
    """Refuse now, as claiming it would, a `folder` another process holds; creates nothing (a folder that does not
    exist yet is free)."""
    if held(folder):
        try:
            holder = (Path(folder) / LOCK_FILE).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            holder = ""
        raise _in_use(Path(folder), holder or "another process", what)


def held(folder: str | Path) -> bool:
    """Whether another process holds `folder`'s lock now (this process's own claims do not count)."""
    path = Path(folder) / LOCK_FILE
    if str(Path(folder).resolve()) in FolderLock._held:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
