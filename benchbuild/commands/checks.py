"""Checks of command-line values made before a command runs: option callbacks that refuse a bad `--max-minutes`,
`--device` or `--stack` as a usage error, and the refusal of an empty argument."""

from __future__ import annotations

import math

import typer

from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_path_text


def positive_minutes(value: float | None) -> float | None:
    """`--max-minutes`: none, or a positive and finite number of minutes, refused as a usage error."""
    if value is not None and not (value > 0 and math.isfinite(value)):  # inf would reach run.json as `Infinity`
        raise typer.BadParameter(f"must be a positive, finite number of minutes; got {value}")
    return value


def optional_device(value: str | None) -> str | None:
    """`--device` of a command whose default is the recorded device: checked like every `--device` when given."""
    from benchbuild.device import check_device

    if value is None:
        return None
    try:
        return check_device(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None


def stack_option(value: str) -> str:
    """`--stack`: a number of runs of at least 1, or auto (`sweep.stacks.parse_stack`), refused as a usage error."""
    from benchbuild.sweep.stacks import parse_stack

    try:
        parse_stack(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None
    return value


def check_no_empty_argument(argv: list[str] | tuple[str, ...]) -> None:
    """Refuse an empty option value or argument (`--out ""`, `--out=`): an unset shell variable, which a path option
    would read as the current folder."""
    for position, argument in enumerate(argv):
        if argument.startswith("--") and argument.endswith("=") and len(argument) > 3:
            check_path_text("", argument[:-1])
        if not argument.strip():
            previous = argv[position - 1] if position else ""
            check_path_text(argument, previous if previous.startswith("-") else f"argument {position}")
