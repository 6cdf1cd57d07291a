"""The `benchbuild` command line: parses options, calls one library function per command, prints the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import click
import typer
from rich.console import Console

from benchbuild import __version__
from benchbuild.errors import BenchbuildError

app = typer.Typer(
    name="benchbuild",
    help="Build compositional-generalization benchmarks as Hugging Face datasets, and train and score models on them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
out = Console()

FormatOption = Annotated[Literal["arrow", "parquet", "jsonl"],
                         typer.Option("--format", help="Output layout: arrow (save_to_disk), parquet (Hub-ready) or jsonl.")]
OverwriteOption = Annotated[bool, typer.Option("--overwrite", help="Replace an existing output folder.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of every sampled split rule.")]


def _version(value: bool) -> None:
    if value:
        out.print(f"benchbuild {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
) -> None:
    """benchbuild: SCAN, noun-adjective order and ReaCT benchmarks; a model zoo to train and score on them."""


@app.command("build-scan")
def build_scan_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Parent folder: one benchmark folder per split is written under it.")],
    split: Annotated[Optional[list[str]], typer.Option("--split", help="A splitting to build (repeatable); default: all. "
                                                       "Unknown names list the valid ones.")] = None,
    seed: SeedOption = 0,
    official: Annotated[Optional[Path], typer.Option("--official", help="A SCAN checkout: take the canonical train/test "
                                                     "files instead of applying the rule (simple, length, addprim, template).")] = None,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Generate SCAN from its grammar and write each splitting as a benchmark folder."""
    from benchbuild.scan.build import build_scan

    written = build_scan(out_dir, names=split or None, seed=seed, official=official, format=format,
                         overwrite=overwrite, progress=True)
    out.print(f"wrote {len(written)} SCAN benchmark(s) under {out_dir}")


@app.command("run")
def run_command(
    recipe: Annotated[Path, typer.Argument(help="A pipeline TOML: [[steps]] tables, each a command and its options.")],
) -> None:
    """Run a pipeline recipe: each step is a benchbuild command with its options (checked before anything runs)."""
    _run_recipe(recipe, stack=())


def _run_recipe(recipe: Path, stack: tuple[Path, ...]) -> None:
    from benchbuild.recipe import load_recipe

    if recipe.resolve() in stack:
        raise BenchbuildError(f"{recipe} runs itself (recipes: {' -> '.join(map(str, stack))})")
    loaded = load_recipe(recipe)
    group = typer.main.get_command(app)
    context = click.Context(group)
    commands = {name: group.get_command(context, name) for name in group.list_commands(context)}
    planned = []
    for number, step in enumerate(loaded.steps, start=1):
        if step.command not in commands:
            raise BenchbuildError(f"{recipe}: step {number} names unknown command {step.command!r} "
                                  f"(valid: {', '.join(sorted(commands))})")
        command = commands[step.command]
        known = _option_dests(command) | {p.name for p in command.params}
        for key in step.options:
            if key.replace("-", "_") not in known:
                raise BenchbuildError(f"{recipe}: step {number} ({step.command}) has unknown option {key!r}")
        planned.append((step, command))
    for number, (step, command) in enumerate(planned, start=1):
        console.print(f"[bold]{recipe} step {number}/{len(planned)}[/bold]: benchbuild {' '.join(step.argv())}")
        if step.command == "run":
            _run_recipe(Path(step.options["recipe"]), stack=(*stack, recipe.resolve()))
        else:
            command.main(step.argv()[1:], prog_name=f"benchbuild {step.command}", standalone_mode=False)


def _option_dests(command: click.Command) -> set[str]:
    names = set()
    for param in command.params:
        for opt in getattr(param, "opts", []):
            names.add(opt.lstrip("-").replace("-", "_"))
    return names


def main() -> None:
    """Console entry point: one error line on stderr and a non-zero exit, or the traceback with --debug."""
    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv = [sys.argv[0], *[a for a in sys.argv[1:] if a != "--debug"]]
    try:
        result = app(standalone_mode=False)
    except click.exceptions.Exit as stop:
        sys.exit(stop.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        console.print("benchbuild: interrupted", style="red")
        sys.exit(130)
    except KeyboardInterrupt:
        console.print("benchbuild: interrupted", style="red")
        sys.exit(130)
    except Exception as error:  # noqa: BLE001 - the CLI's single place that turns errors into one line
        if debug:
            raise
        print(f"benchbuild: error: {_one_line(error)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)


def _one_line(error: BaseException) -> str:
    message = str(error) or error.__class__.__name__
    if not isinstance(error, (BenchbuildError, FileNotFoundError, FileExistsError, ValueError)):
        message = f"{error.__class__.__name__}: {message}"
    return " ".join(message.split()) + " (rerun with --debug for the traceback)"
