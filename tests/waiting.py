"""Waiting in tests for what a process does, never for a length of time.

A test that needs a command to reach a state (its first checkpoint, its lock, its exit, its workers gone) waits for
that event, or for the process's end, whichever comes first: no deadline that a slow or loaded machine could miss. A
command that hangs is caught once for the whole suite by pytest-timeout's per-test limit (pyproject.toml), which
fails the test and names it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable

import psutil

# How long one wait on the process's end lasts before `ready` is looked at again: a file appearing is not an event
# a process's handle can wait on, the process ending is.
_BETWEEN_LOOKS = 0.01


def until(ready: Callable[[], object], process: subprocess.Popen, what: str) -> None:
    """Return once `ready()` is true; fail, naming `what`, if `process` ends first."""
    while not ready():
        try:
            process.wait(timeout=_BETWEEN_LOOKS)
        except subprocess.TimeoutExpired:
            continue
        if not ready():
            raise AssertionError(f"the command ended (exit {process.returncode}) before {what}")


def gone(processes: Iterable[psutil.Process]) -> None:
    """Return once every one of `processes` has ended (a zombie has: it ran its last instruction, and whether its
    parent reaps it is not the test's business)."""
    left = [process for process in processes if running(process)]
    while left:
        _, left = psutil.wait_procs(left, timeout=_BETWEEN_LOOKS)
        left = [process for process in left if running(process)]


def running(process: psutil.Process) -> bool:
    """Whether `process` still runs (a zombie does not)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
