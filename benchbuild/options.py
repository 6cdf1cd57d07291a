"""Command-line options declared once: each field of a parameters dataclass carries its own Typer option.

A field such as `pool_size: Annotated[int, typer.Option("--pool-size", help="…")] = 60_000` is at once the typed
parameter a builder reads and the `--pool-size` option of its command (name, type, default, help, `min`/`max`,
`Literal` choices). `with_parameters` puts a dataclass's fields into a command's signature in place of the one
parameter annotated with it, and calls the command with the dataclass built from the parsed values. The options
several commands share are declared here too.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Annotated, Any, Callable, Literal

import typer
from typer.models import OptionInfo

from benchbuild.device import check_device
from benchbuild.errors import BenchbuildError

FormatOption = Annotated[Literal["arrow", "parquet", "jsonl"],
                         typer.Option("--format", help="Output layout: arrow (save_to_disk), parquet (Hub-ready) or jsonl.")]
OverwriteOption = Annotated[bool, typer.Option("--overwrite", help="Replace an existing output folder.")]
MAX_SEED = 2 ** 32 - 1  # numpy's and torch's seeds: 0 to 2^32 - 1
SeedOption = Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of every sampled split rule.")]
EncodingErrorsOption = Annotated[Literal["strict", "replace"], typer.Option(
    "--encoding-errors", help="Invalid UTF-8: stop with an error, or replace and count it.")]


def _device_option(value: str) -> str:
    try:
        return check_device(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None


def DeviceOption(what: str):  # noqa: N802 - an option type, named like the others
    """The `--device` option of every command that runs torch: auto, cpu, cuda or cuda:N (see benchbuild.device)."""
    return Annotated[str, typer.Option("--device", callback=_device_option, metavar="auto|cpu|cuda|cuda:N",
                                       help=f"{what}: auto (a GPU when there is one), cpu, cuda or cuda:N.")]


def key_values(items: list[str], option: str) -> dict[str, Any]:
    """`KEY=VALUE` option values as a dict, each value read as TOML (`500`, `true`, `"x"`) or else kept as text."""
    import tomllib

    values = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BenchbuildError(f"{option} {item!r}: expected KEY=VALUE")
        try:
            values[key.strip()] = tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError:
            values[key.strip()] = raw
    return values


def option_parameters(cls: type) -> list[inspect.Parameter]:
    """The fields of parameters dataclass `cls` as keyword parameters of a command, in field order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    parameters = []
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        if typing.get_origin(annotation) is not Annotated or not any(
                isinstance(meta, OptionInfo) for meta in annotation.__metadata__):
            raise TypeError(f"{cls.__name__}.{field.name} declares no typer.Option: every field is an option")
        if field.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name} has no plain default (a command option needs one)")
        parameters.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default,
                                            annotation=annotation))
    return parameters


def check_ranges(parameters: Any) -> None:
    """Raise a BenchbuildError naming the option of the first field of `parameters` (a parameters dataclass) whose
    value lies outside its declared `min`/`max`: the command line's range check, for values built in Python too."""
    hints = typing.get_type_hints(type(parameters), include_extras=True)
    for field in dataclasses.fields(parameters):
        option = next(meta for meta in hints[field.name].__metadata__ if isinstance(meta, OptionInfo))
        value = getattr(parameters, field.name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = option.param_decls[0] if option.param_decls else f"--{field.name.replace('_', '-')}"
        if option.min is not None and value < option.min:
            raise BenchbuildError(f"{name} must be at least {option.min}; got {value}")
        if option.max is not None and value > option.max:
            raise BenchbuildError(f"{name} must be at most {option.max}; got {value}")


def with_parameters(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Typer command: its parameter annotated with a parameters dataclass becomes that dataclass's
    options, in its place, and the command receives the dataclass instance built from their values."""
    signature = inspect.signature(command, eval_str=True)
    groups = {name: parameter.annotation for name, parameter in signature.parameters.items()
              if dataclasses.is_dataclass(parameter.annotation)}
    expanded: list[inspect.Parameter] = []
    for name, parameter in signature.parameters.items():
        if name in groups:
            expanded += option_parameters(groups[name])
        else:
            expanded.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    names = [parameter.name for parameter in expanded]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise TypeError(f"{command.__name__}: options {', '.join(clashes)} are declared twice")

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        for name, cls in groups.items():
            values[name] = cls(**{field.name: values.pop(field.name) for field in dataclasses.fields(cls)})
        return command(**values)

    del run.__wrapped__  # Typer reads the signature below, not the decorated function's
    run.__signature__ = signature.replace(parameters=expanded)  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in expanded}
    return run
