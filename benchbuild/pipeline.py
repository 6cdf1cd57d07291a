"""Pipeline recipes: a TOML file naming CLI commands and their options, validated before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import from_table, read_toml

# What a command-line option can hold: a TOML table or date (`out = { path = "x" }`) is refused where the file is
# read, naming the step and key, instead of becoming an argument such as "{'path': 'x'}".
OptionValue = str | int | float | bool


@dataclass
class Step:
    """One CLI command of a recipe with its options (`--key value`, `true` for a flag and `false` for leaving it off, a
    list for a repeated option)."""

    command: str
    options: dict[str, OptionValue | list[OptionValue]] = field(default_factory=dict)
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
                # Every benchbuild flag is off unless given (none has a --no- form): `false` leaves it out.
                if value:
                    args.append(flag)
            elif isinstance(value, list):
                for item in value:
                    args += [flag, str(item)]
            else:
                args += [flag, str(value)]
        return args


@dataclass
class Recipe:
    """A pipeline file: `[[steps]]` tables run in order, and an optional description."""

    steps: list[Step]
    description: str = ""


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe's structure; option names are checked against the commands by the CLI."""
    recipe = from_table(Recipe, read_toml(path, "recipe"), str(path))
    if not recipe.steps:
        raise BenchbuildError(f"{path}: a recipe needs at least one [[steps]] table")
    return recipe
