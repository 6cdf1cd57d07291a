"""Pipeline recipes: a TOML file naming CLI commands and their options, validated before anything runs."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbuild.errors import BenchbuildError

RECIPE_KEYS = {"description", "steps"}
STEP_KEYS = {"command", "options", "description"}


@dataclass
class Step:
    """One CLI command of a recipe with its options (`--key value`, `true` for a flag, a list for a repeated option)."""

    command: str
    options: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def argv(self, positional: frozenset[str] = frozenset()) -> list[str]:
        """The command line of this step; keys named in `positional` are the command's arguments, not options."""
        args = [self.command]
        for key, value in self.options.items():
            if key.replace("-", "_") in positional:
                args += [str(item) for item in (value if isinstance(value, list) else [value])]
                continue
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    args.append(flag)
                else:
                    args.append("--no-" + key.replace("_", "-"))
            elif isinstance(value, list):
                for item in value:
                    args += [flag, str(item)]
            else:
                args += [flag, str(value)]
        return args


@dataclass
class Recipe:
    description: str
    steps: list[Step]


def _unknown(keys: set[str], allowed: set[str], where: str, path: Path) -> None:
    extra = sorted(keys - allowed)
    if extra:
        raise BenchbuildError(f"{path}: unknown key {extra[0]!r} in {where} (allowed: {', '.join(sorted(allowed))})")


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe's structure; option names are checked against the commands by the CLI."""
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"recipe {path} does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BenchbuildError(f"{path} is not valid TOML: {error}") from None
    _unknown(set(raw), RECIPE_KEYS, "the recipe", path)
    if not raw.get("steps"):
        raise BenchbuildError(f"{path}: a recipe needs at least one [[steps]] table")
    steps = []
    for number, table in enumerate(raw["steps"], start=1):
        _unknown(set(table), STEP_KEYS, f"step {number}", path)
        if "command" not in table:
            raise BenchbuildError(f"{path}: step {number} has no 'command'")
        steps.append(Step(command=table["command"], options=dict(table.get("options", {})),
                          description=table.get("description", "")))
    return Recipe(description=raw.get("description", ""), steps=steps)
