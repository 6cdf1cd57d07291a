"""Saving a built benchmark, the only thing the commands save themselves, with the command line that built it: this
process's own, or inside `benchbuild run` the step's."""

from __future__ import annotations

import shlex
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from benchbuild.engine import without_engine_options

if TYPE_CHECKING:
    from benchbuild.benchmark import Benchmark

# The argv of the command being run inside `benchbuild run` (a step's own); None: this process's own argv.
STEP_ARGV: ContextVar[tuple[str, ...] | None] = ContextVar("step_argv", default=None)


def recorded_command_line() -> str:
    """The build command as it was given: `benchbuild <command> <its arguments>`, for build.json, less the engine
    options (where it ran never changes what it wrote, so either engine gives the same folder)."""
    argv = STEP_ARGV.get()
    return command_line_of(sys.argv[1:] if argv is None else argv)


def save_benchmark(benchmark: Benchmark, out_dir: Path, format: str, overwrite: bool) -> Path:
    """Write a built benchmark folder (the CLI is the only place that saves one), recording its command line."""
    benchmark.info.command_line = recorded_command_line()
    return benchmark.save(out_dir, format=format, overwrite=overwrite)


def command_line_of(argv: list[str] | tuple[str, ...]) -> str:
    """`benchbuild` and `argv` as one shell line, less the engine options."""
    return shlex.join(["benchbuild", *without_engine_options(argv)])
