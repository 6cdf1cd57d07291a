"""Atomic outputs: build a folder or a file beside its destination, then rename, so nothing half-written looks
complete; files are created without following symbolic links (a link planted where benchbuild writes is replaced,
never written through)."""

from __future__ import annotations

import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from benchbuild.errors import BenchbuildError


class OutputExistsError(FileExistsError):
    """The destination exists and the user did not ask to overwrite it."""


def check_writable(out: Path, overwrite: bool) -> None:
    """Fail before any work when `out` exists and may not be replaced."""
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out} already exists: pass --overwrite to replace it")


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a killed process its parent has not yet reaped is a zombie:
    ended, on Linux, where /proc says so)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def remove_abandoned(out: Path, kind: str = "partial") -> None:
    """Delete `.{out.name}.{kind}-<pid>-…` folders or files left beside `out` by a build that was killed (its process
    no longer exists); `kind` is "partial" (unfinished outputs) or "work" (builders' work folders)."""
    for leftover in out.parent.glob(f".{out.name}.{kind}-*"):
        pid = leftover.name.rsplit(f".{kind}-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not running(int(pid)):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def _temporary_beside(path: Path) -> Path:
    return path.parent / f".{path.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Yield a new file beside `path` open for writing (`mode` "w" or "wb"); on success it replaces `path` in one
    rename, on failure it is removed. `path` is never opened: a symbolic link there is replaced, not written
    through, and a killed writer leaves the old file whole (its temporary file is removed by the next writer)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise BenchbuildError(f"{path} is a folder: give a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(path)
    tmp = _temporary_beside(path)
    # The creation and the rename inside too: a Ctrl-C at any point, even between creating the file and the next
    # line, leaves no temporary file behind (its name is this call's own: nobody else's file is removed).
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_file(path: str | Path, content: str | bytes) -> None:
    """Replace `path` with `content` atomically, without following a symbolic link at `path`."""
    with atomic_file(path, "wb" if isinstance(content, bytes) else "w") as handle:
        handle.write(content)


def append_line(path: str | Path, line: str) -> None:
    """Append `line` (and a newline) to `path`, creating it; a symbolic link at `path` is refused, not followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if Path(path).is_symlink():
            raise BenchbuildError(f"{path} is a symbolic link: benchbuild never writes through a link in a folder "
                                  "it owns; remove the link and rerun") from None
        raise BenchbuildError(f"cannot write {path}: {error.strerror or error}") from None
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@contextmanager
def work_directory(out: str | Path) -> Iterator[Path]:
    """Yield a fresh work folder beside `out` (same disk, found by the next build if this one is killed), removed on
    exit; work folders of killed earlier builds for the same `out` are removed first."""
    out = Path(out)
    created = [parent for parent in out.parents if not parent.exists()]  # removed again if left empty
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(out, "work")
    work = out.parent / f".{out.name}.work-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for parent in created:
            try:
                parent.rmdir()
            except OSError:
                break


@contextmanager
def atomic_directory(out: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside `out`; on success it becomes `out`, on failure it is removed.

    The old `out` (with `overwrite`) is moved aside first and deleted only after the new one is in place,
    so an interruption at any point leaves either the old complete folder or the new complete folder.
    """
    out = Path(out)
    check_writable(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(out)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = out.parent / f".{out.name}.partial-{tag}"
    try:  # the creation inside too, as in `atomic_file`
        tmp.mkdir()
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    aside = None
    if out.exists():
        check_writable(out, overwrite)
        aside = out.parent / f".{out.name}.replaced-{tag}"
        os.replace(out, aside)
    os.replace(tmp, out)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
