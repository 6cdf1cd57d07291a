"""Atomic output folders: build beside the destination, then rename, so no half-written folder looks complete."""

from __future__ import annotations

import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class OutputExistsError(FileExistsError):
    """The destination exists and the user did not ask to overwrite it."""


def check_writable(out: Path, overwrite: bool) -> None:
    """Fail before any work when `out` exists and may not be replaced."""
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out} already exists: pass --overwrite to replace it")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_abandoned(out: Path, kind: str = "partial") -> None:
    """Delete `.{out.name}.{kind}-<pid>-…` folders left beside `out` by a build that was killed (its process no
    longer exists); `kind` is "partial" (unfinished outputs) or "work" (builders' work folders)."""
    for leftover in out.parent.glob(f".{out.name}.{kind}-*"):
        pid = leftover.name.rsplit(f".{kind}-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


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
    tmp.mkdir()
    try:
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
