"""Typed TOML: read a file and check a table against a dataclass (keys and value types); errors name file and key.

Every TOML file the package reads (the model catalogue, pipelines, pairs files; training recipes and their
overrides) goes through here, so a mistake reads the same everywhere:

    models/x.toml: unknown key 'foo' in [recipe.scan] (allowed: adam_beta1, adam_beta2, batch_size, ...)
    models/x.toml: [recipe.scan] steps must be an integer, not 'many'

A schema is a dataclass; its field annotations are checked as far as simple types go: `int`, `float` (an integer
is accepted and converted), `str`, `bool`, `Any`, `Literal[...]`, `X | None`, `list[X]`, `tuple[X, ...]` (from a
TOML array), `dict[K, V]` (K `str` or a `Literal` of the allowed keys) and another dataclass (a nested table).
Checks of meaning (a positive step count, a single word) stay with the schema or its reader.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, TypeVar, Union

from benchbuild.errors import BenchbuildError
from benchbuild.text_files import read_text

Schema = TypeVar("Schema")


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The parsed file; a missing or malformed file is an error naming it as `what` ("pairs file", "pipeline")."""
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"{what} {path} does not exist")
    try:
        return tomllib.loads(read_text(path))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BenchbuildError(f"{what} {path} is not valid TOML: {error}") from None


def check_keys(table: Mapping[str, Any], allowed: Iterable[str], file: str, section: str | None = None, *,
               noun: str = "key") -> None:
    """Every key of `table` is one of `allowed`; otherwise an error naming the file, the key and the section."""
    allowed = sorted(allowed)
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise BenchbuildError(f"{file}: unknown {noun} {unknown[0]!r}{_in(section)} (allowed: {', '.join(allowed)})")


def check_table(schema: type, table: Any, file: str, section: str | None = None, *, complete: bool = True,
                exclude: Iterable[str] = (), noun: str = "key") -> dict[str, Any]:
    """The values of `table` checked against the fields of the dataclass `schema` (minus `exclude`).

    Unknown keys and values of the wrong type are errors; with `complete`, so is a missing field that has no
    default. Returns the table's own keys only (defaults are the dataclass's business), integers for float fields
    converted, nested dataclass tables built.
    """
    label = section or "the file"
    if not isinstance(table, Mapping):
        raise BenchbuildError(f"{file}: {label} must be a table, not {table!r}")
    hints = _hints(schema)
    fields = {f.name: f for f in dataclasses.fields(schema) if f.init and f.name not in set(exclude)}
    check_keys(table, fields, file, section, noun=noun)
    if complete:
        missing = [name for name, f in fields.items() if name not in table
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise BenchbuildError(f"{file}: missing key {missing[0]!r}{_in(section)}")
    return {key: _typed(value, hints[key], file, section, key) for key, value in table.items()}


@functools.cache
def _hints(schema: type) -> dict[str, Any]:
    """The schema's resolved field types (a class's annotations do not change: resolving them once saves a
    catalogue or sweep read most of its time)."""
    return typing.get_type_hints(schema)


def check_overrides(schema: type, values: Mapping[str, Any], option: str, *, noun: str = "key") -> dict[str, Any]:
    """KEY=VALUE overrides of `schema`'s fields given on the command line as `option`, checked like a TOML table's
    keys (`check_table`, not complete) but named as what the user typed: `--set batch_size must be an integer, not 2.5`."""
    hints = _hints(schema)
    check_keys(values, [f.name for f in dataclasses.fields(schema) if f.init], option, noun=noun)
    checked = {}
    for key, value in values.items():
        try:
            checked[key] = _typed(value, hints[key], option, None, key)
        except BenchbuildError:
            raise BenchbuildError(f"{option} {key} must be {_describe(hints[key])}, not {value!r}") from None
    return checked


def from_table(schema: type[Schema], table: Any, file: str, section: str | None = None, *,
               noun: str = "key") -> Schema:
    """An instance of the dataclass `schema` from a complete table; the schema's own checks name the file too."""
    values = check_table(schema, table, file, section, noun=noun)
    try:
        return schema(**values)
    except (BenchbuildError, ValueError) as error:
        raise BenchbuildError(f"{file}: {section + ': ' if section else ''}{error}") from None


def _in(section: str | None) -> str:
    return f" in {section}" if section else ""


def _subsection(section: str | None, key: str) -> str:
    """How TOML names table `key` inside `section`: [recipe] + scan -> [recipe.scan]."""
    if section is None:
        return f"[{key}]"
    if section.startswith("[") and not section.startswith("[[") and section.endswith("]"):
        return f"{section[:-1]}.{key}]"
    return f"{section} [{key}]"


def _typed(value: Any, annotation: Any, file: str, section: str | None, key: str) -> Any:
    """`value` if it fits `annotation` (converted where TOML has no such type), else an error naming the key."""
    if annotation is Any:
        return value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    label = f"{section} {key}" if section else key
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:  # from Python callers; TOML has no null
            return None
        options = [option for option in args if option is not type(None)]
        if len(options) == 1:  # X | None: the value is an X, and X's own error says why not
            return _typed(value, options[0], file, section, key)
        for option in options:
            try:
                return _typed(value, option, file, section, key)
            except BenchbuildError:
                continue
        raise BenchbuildError(f"{file}: {label} must be {' or '.join(map(_describe, options))}, not {value!r}")
    if origin is Literal:
        if any(value == choice and type(value) is type(choice) for choice in args):
            return value
        raise BenchbuildError(f"{file}: {label} is {value!r}: choose one of {', '.join(map(str, args))}")
    if dataclasses.is_dataclass(annotation):
        return from_table(annotation, value, file, _subsection(section, key))
    container = origin or annotation
    if container in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise BenchbuildError(f"{file}: {label} must be a list, not {value!r}")
        item = args[0] if args else Any
        if dataclasses.is_dataclass(item):
            items = [from_table(item, entry, file, f"[[{key}]] #{number}") for number, entry in enumerate(value, 1)]
        else:
            items = [_typed(entry, item, file, section, f"{key} item {number}")
                     for number, entry in enumerate(value, 1)]
        return tuple(items) if container is tuple else items
    if container is dict:
        if not isinstance(value, Mapping):
            raise BenchbuildError(f"{file}: {label} must be a table, not {value!r}")
        key_type, value_type = args or (str, Any)
        inner = _subsection(section, key)
        if typing.get_origin(key_type) is Literal:
            check_keys(value, typing.get_args(key_type), file, inner)
        return {name: _typed(item, value_type, file, inner, name) for name, item in value.items()}
    if annotation is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if annotation is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if annotation in (str, bool) and isinstance(value, annotation):
        return value
    if annotation not in (float, int, str, bool):
        raise TypeError(f"toml_schema cannot check values of type {annotation!r} ({label})")
    raise BenchbuildError(f"{file}: {label} must be {_describe(annotation)}, not {value!r}")


def _describe(annotation: Any) -> str:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(annotation) if option is not type(None))
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if annotation in names:
        return names[annotation]
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(annotation)))
    container = typing.get_origin(annotation) or annotation
    return {list: "a list", tuple: "a list", dict: "a table"}.get(container, getattr(annotation, "__name__", "?"))
