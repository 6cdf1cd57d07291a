"""The formats `benchbuild report` writes, and the check of a `--format` value naming some of them (light: the
command line imports it at start)."""

from __future__ import annotations

import typer

from benchbuild.errors import BenchbuildError

FORMATS = ("md", "csv", "tex", "html")


def parse_formats(text: str) -> tuple[str, ...]:
    """`md,csv,tex,html` (any subset, any order) as a tuple in FORMATS order."""
    asked = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in asked if part not in FORMATS]
    if unknown or not asked:
        raise BenchbuildError(f"give a comma-separated list of {', '.join(FORMATS)}"
                              + (f" ({unknown[0]!r} is none of them)" if unknown else ""))
    return tuple(name for name in FORMATS if name in asked)


def format_option(value: str) -> str:
    """Typer callback of `--format`: a bad value is a usage error naming the option, found while parsing (so also
    when `benchbuild run` plans a pipeline)."""
    try:
        parse_formats(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None
    return value
