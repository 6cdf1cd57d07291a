"""`run` (a pipeline recipe, every step parsed and checked before the first one runs) and `sweep` (a grid of training
runs, whose missing benchmarks its own recipe builds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from typer._click.exceptions import ClickException  # typer vendors click: its own exception classes
from typer.core import TyperArgument
from rich.console import Console

from benchbuild.commands import console, out
from benchbuild.commands.checks import check_no_empty_argument, optional_device, stack_option
from benchbuild.commands.saving import STEP_ARGV, command_line_of
from benchbuild.engine import EngineParameters
from benchbuild.errors import BenchbuildError, Interrupted, Terminated
from benchbuild.importing.parameters import ImportParameters
from benchbuild.lake_baroni.parameters import LakeBaroniParameters
from benchbuild.nounadj.parameters import NounAdjParameters
from benchbuild.options import key_values, with_parameters
from benchbuild.react.parameters import DegreeParameters, ReactParameters
from benchbuild.scan.parameters import ScanParameters

# The program whose commands a recipe's steps name: `benchbuild.cli` sets it once it has registered them all (a
# command module cannot import the CLI, which imports the command modules).
program: typer.Typer | None = None


def run_command(
    recipe: Annotated[Path, typer.Argument(help="A pipeline TOML: [[steps]] tables, each a command and its options.")],
) -> None:
    """Run a pipeline recipe: each step is a benchbuild command with its options (all checked before any runs)."""
    plan = _plan_recipe(recipe, stack=())
    for label, command, argv in plan:
        console.print(f"[bold]{label}[/bold]: benchbuild {' '.join(argv)}")
        if argv[0] == "run":
            continue  # its steps follow in the plan
        if _already_built(argv):
            console.print("  its --out holds what this same command built: kept (remove the folder to rebuild it)",
                          markup=False, highlight=False)
            continue
        token = STEP_ARGV.set(tuple(argv))
        where = (f"during step {label!r} (benchbuild {argv[0]}) of {recipe}: no later step started; "
                 f"`benchbuild run {recipe}` again goes on from there")
        try:
            code = command.main(argv[1:], prog_name=f"benchbuild {argv[0]}", standalone_mode=False)
        except Terminated as stop:
            raise Terminated(where) from stop
        finally:
            STEP_ARGV.reset(token)
        # Typer hands back a step's exit code instead of raising: Ctrl-C inside it is 130. Either way the pipeline
        # stops here, so no later step reads what this one left unfinished.
        if code == 130:
            raise Interrupted(where)
        if isinstance(code, int) and code != 0:
            raise typer.Exit(code)


def _already_built(argv: list[str]) -> bool:
    """Whether a pipeline's build step's `--out` holds a complete benchmark that this same command line built, so a
    rerun of the pipeline (after a later step failed, say) goes on past it. build-scan keeps its finished splittings
    itself."""
    import json

    if argv[0] not in ("build-noun-adj", "build-react") or "--out" not in argv[:-1]:
        return False
    built = Path(argv[argv.index("--out") + 1]) / "build.json"
    try:
        recorded = json.loads(built.read_text(encoding="utf-8-sig")).get("command_line")
    except (OSError, ValueError):
        return False
    return recorded == command_line_of(argv)


# Build commands whose options are a parameters dataclass: its cheap `check()` (arguments and input files only)
# also runs when a pipeline is planned, so a bad last step fails before the first one writes anything.
_CHECKED_PARAMETERS = {"build-scan": ScanParameters, "build-noun-adj": NounAdjParameters,
                       "build-react": ReactParameters, "degree": DegreeParameters,
                       "build-lake-baroni-fr": LakeBaroniParameters, "import": ImportParameters}


def _plan_recipe(recipe: Path, stack: tuple[Path, ...]) -> list[tuple[str, typer.core.TyperCommand, list[str]]]:
    """Every step of `recipe` as (label, command, argv), nested recipes expanded in place after their `run` step,
    each parsed by its command without running it: unknown, missing, mistyped or out-of-range options and a
    recipe that runs itself are refused here, before any step runs."""
    from benchbuild.pipeline import load_recipe

    if recipe.resolve() in stack:
        raise BenchbuildError(f"{recipe} runs itself (recipes: {' -> '.join(map(str, stack))})")
    loaded = load_recipe(recipe)
    group = typer.main.get_command(program)
    context = typer.Context(group)
    commands = {name: group.get_command(context, name) for name in group.list_commands(context)}
    plan = []
    for number, step in enumerate(loaded.steps, start=1):
        if step.command not in commands:
            raise BenchbuildError(f"{recipe}: step {number} names unknown command {step.command!r} "
                                  f"(valid: {', '.join(sorted(commands))})")
        where = f"{recipe}: step {number} ({step.command})"
        command = commands[step.command]
        known = _option_dests(command) | {p.name for p in command.params}
        for key in step.options:
            if key.replace("-", "_") not in known:
                raise BenchbuildError(f"{where} has unknown option {key!r}")
        positional = frozenset(p.name for p in command.params if isinstance(p, TyperArgument))
        argv = step.argv(positional)
        try:
            check_no_empty_argument(argv)
        except BenchbuildError as error:
            raise BenchbuildError(f"{where}: {error}") from None
        values = _parse_step(command, argv, where)
        plan.append((f"{recipe} step {number}/{len(loaded.steps)}", command, argv))
        if step.command == "run":
            plan += _plan_recipe(Path(values["recipe"]), stack=(*stack, recipe.resolve()))
    return plan


def _parse_step(command, argv: list[str], where: str) -> dict:
    """The option values of one step's command line, parsed (types, ranges, choices, required options, option
    callbacks) but not run; a build command's parameters, a command's engine options (--engine, --scheduler,
    --workers) and `train`'s --set keys are checked too. A refusal names the step."""
    import dataclasses

    try:
        context = command.make_context(f"benchbuild {argv[0]}", argv[1:])
    except ClickException as error:
        raise BenchbuildError(f"{where}: {error.format_message()}") from None
    values = dict(context.params)
    context.close()
    parameters = _CHECKED_PARAMETERS.get(argv[0])
    engine_fields = [field.name for field in dataclasses.fields(EngineParameters)]
    try:
        engine = (EngineParameters(**{name: values[name] for name in engine_fields})
                  if set(engine_fields) <= values.keys() else None)
        if engine is not None:
            engine.check()
        if parameters is not None:
            built = parameters(**{field.name: values[field.name] for field in dataclasses.fields(parameters)})
            if argv[0] == "import":  # its checks need the LAYOUT and DIR arguments
                built.check(values.get("layout"), values.get("folder"))
            else:
                built.check()
            if engine is not None and hasattr(built, "check_engine"):  # options that clash with an engine
                built.check_engine(engine)
        if argv[0] == "train":
            from benchbuild.zoo.recipe import TrainingRecipe

            TrainingRecipe.checked_overrides(key_values(values["recipe_set"] or [], "--set"), "--set")
    except BenchbuildError as error:
        raise BenchbuildError(f"{where}: {error}") from None
    return values


def _option_dests(command) -> set[str]:
    """A command's option names as a step's keys may spell them: `--max-steps` -> `max_steps`."""
    names = set()
    for param in command.params:
        for opt in getattr(param, "opts", []):
            names.add(opt.lstrip("-").replace("-", "_"))
    return names


@with_parameters
def sweep_command(
    sweep_file: Annotated[Path, typer.Argument(help="A sweep TOML: models, [[benchmarks]], seeds, budget, overrides, "
                                               "an architecture [[grid]] (see pipelines/sweep_smoke.toml, "
                                               "pipelines/table3_000.toml).")],
    engine: EngineParameters,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="With --engine local: runs at once, each in its own "
                                      "process (one per GPU when there are GPUs; the CPU cores split evenly).")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the grid and its size, what is done, and the "
                                          "estimated cost (a few timed steps per model and configuration); train "
                                          "nothing.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Print every run's state, read from the run folders "
                                         "(also for a sweep running elsewhere), and exit.")] = False,
    device: Annotated[Optional[str], typer.Option("--device", metavar="auto|cpu|cuda|cuda:N",
                                                  callback=optional_device, help="Where every run trains and is "
                                                  "scored (default: the sweep file's device).")] = None,
    stack: Annotated[str, typer.Option("--stack", metavar="K|auto", callback=stack_option,
                                       help="Train up to K runs that differ only in seed as one stacked model in one "
                                       "process; auto: on CUDA up to 72, on CPU none (no faster there).")] = "auto",
) -> None:
    """Train and score a grid of models (x their architecture configurations) x benchmarks x seeds, resumable, then
    write the report beside the papers' numbers. A rerun of the same command skips finished runs and resumes killed
    ones."""
    from benchbuild.sweep import dry_run as print_dry_run, load_sweep, print_status, run_sweep
    from benchbuild.sweep.stacks import parse_stack

    stack_option = parse_stack(stack)
    sweep = load_sweep(sweep_file, device)
    engine.check()
    if engine.engine == "dask" and jobs != 1:
        raise BenchbuildError("--jobs sizes --engine local; with --engine dask the cluster's workers run the runs "
                              "(--workers sizes an embedded one)")
    view = out if out.is_terminal else Console(width=160)  # piped or logged: tables at full width
    if status:
        print_status(sweep, view)
    elif dry_run:
        print_dry_run(sweep, view, jobs, stack_option)
    else:
        written = run_sweep(sweep, engine, jobs, console, build=lambda recipe: run_command(recipe),
                            stack=stack_option)
        console.print(f"sweep {sweep.name}: {len(sweep.runs)} runs finished; wrote {', '.join(written)}")
