"""The `benchbuild` command line: parses options, calls one library function per command, prints the result.

The build commands take their options from the builders' parameters dataclasses (`benchbuild.options`), and are
the only place that saves a built benchmark, recording the command line that built it.
"""

from __future__ import annotations

import math
import shlex
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from typer._click.exceptions import ClickException  # typer vendors click: its own exception classes
from typer.core import TyperArgument, TyperGroup
from rich.console import Console

from benchbuild import __version__
from benchbuild.engine import EngineParameters, without_engine_options
from benchbuild.errors import BenchbuildError, Interrupted, Terminated
from benchbuild.importing.parameters import ImportParameters, LayoutName
from benchbuild.lake_baroni.parameters import LakeBaroniParameters
from benchbuild.nounadj.parameters import NounAdjParameters
from benchbuild.options import (MAX_SEED, DeviceOption, EncodingErrorsOption, FormatOption, OverwriteOption,
                                key_values, with_parameters)
from benchbuild.outputs import check_disjoint, check_output, check_path_text, path_inputs
from benchbuild.react.parameters import DegreeParameters, ReactParameters
from benchbuild.report.formats import format_option
from benchbuild.scan.parameters import ScanParameters

if TYPE_CHECKING:
    from benchbuild.benchmark import Benchmark

class _CommandList(TyperGroup):
    """The command group, whose `--help` lists each command with its docstring's first sentence, hard line breaks
    joined (click's default cuts the docstring at ~45 characters with "...", mid-sentence)."""

    def format_commands(self, ctx, formatter) -> None:
        import re

        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and command.short_help is None and command.help:
                text = " ".join(command.help.split())
                # A sentence ends at "; " or at ". " before a capital ("et al. 2021", "s.e. over" go on).
                command.short_help = re.split(r";\s|(?<=\.)\s(?=[A-Z])", text, maxsplit=1)[0].rstrip(".;")
        super().format_commands(ctx, formatter)


app = typer.Typer(
    cls=_CommandList,
    name="benchbuild",
    help="Build compositional-generalization benchmarks as Hugging Face datasets, and train and score models on them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain (click) help: option names in full at 80 columns, flags without a "<bool>" metavar, every line wrapped to
    # the terminal; the command list shows each command's first sentence (`_CommandList`).
    rich_markup_mode=None,
)
console = Console(stderr=True)
out = Console()

# The argv of the command being run inside `benchbuild run` (a step's own); None: this process's own argv.
_STEP_ARGV: ContextVar[tuple[str, ...] | None] = ContextVar("step_argv", default=None)


def _command_line() -> str:
    """The build command as it was given: `benchbuild <command> <its arguments>`, for build.json, less the engine
    options (where it ran never changes what it wrote, so either engine gives the same folder)."""
    argv = _STEP_ARGV.get()
    return _command_line_of(sys.argv[1:] if argv is None else argv)


def _save(benchmark: Benchmark, out_dir: Path, format: str, overwrite: bool) -> Path:
    """Write a built benchmark folder (the CLI is the only place that saves one), recording its command line."""
    benchmark.info.command_line = _command_line()
    return benchmark.save(out_dir, format=format, overwrite=overwrite)


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
@with_parameters
def build_scan_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Parent folder: one benchmark folder per split is written under it.")],
    parameters: ScanParameters,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Generate SCAN from its grammar and write each splitting as a benchmark folder; a rerun of the same command
    keeps the splittings an interrupted run finished and builds the rest."""
    from dataclasses import replace

    from benchbuild.scan.build import already_built, build_scan

    parameters.check()
    names = parameters.names()
    inputs = path_inputs(parameters)
    check_disjoint(out_dir, "--out", inputs)
    for name in names:
        check_output(out_dir / name, "--out", "benchmark", inputs=inputs, overwrite=True)
    kept = [] if overwrite else [name for name in names if already_built(out_dir / name, name, parameters, format)]
    todo = [name for name in names if name not in kept]
    written = [_save(benchmark, out_dir / name, format, overwrite)
               for name, benchmark in build_scan(replace(parameters, split=todo), progress=True)] if todo else []
    kept_note = f" (kept {len(kept)} already built by the same command)" if kept else ""
    out.print(f"wrote {len(written)} SCAN benchmark(s) under {out_dir}{kept_note}")


@app.command("run")
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
        token = _STEP_ARGV.set(tuple(argv))
        where = (f"during step {label!r} (benchbuild {argv[0]}) of {recipe}: no later step started; "
                 f"`benchbuild run {recipe}` again goes on from there")
        try:
            code = command.main(argv[1:], prog_name=f"benchbuild {argv[0]}", standalone_mode=False)
        except Terminated as stop:
            raise Terminated(where) from stop
        finally:
            _STEP_ARGV.reset(token)
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
    return recorded == _command_line_of(argv)


def _command_line_of(argv: list[str] | tuple[str, ...]) -> str:
    return shlex.join(["benchbuild", *without_engine_options(argv)])


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
    group = typer.main.get_command(app)
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


@app.command("zoo")
def zoo_command(
    papers: Annotated[bool, typer.Option("--papers", help="List the cited papers instead: id, full citation, "
                                         "what benchbuild takes from it, its zoo models.")] = False,
    model: Annotated[Optional[str], typer.Option(
        "--model", help="Show one model instead: per recipe, the architecture it trains, its parameter count, its "
        "selection rule, the paper's numbers made with it (and which statistic each is), its sources and its known "
        "differences from the paper.")] = None,
) -> None:
    """List the model zoo: every catalogue entry with its kind, paper ids, known differences from its papers and one
    line (one block per model)."""
    import textwrap

    from rich.text import Text

    from benchbuild.papers import PAPERS, cited_ids, known_differences, reported_with
    from benchbuild.zoo import list_entries

    def block(*paragraphs: str, first: str = "    ", rest: str = "    ") -> str:
        width = max(out.width, 40)
        return "\n".join(textwrap.fill(text, width, initial_indent=first if number == 0 else rest,
                                        subsequent_indent=rest, break_on_hyphens=False)
                          for number, text in enumerate(paragraphs))

    if model is not None:
        _print_resolved_model(model)
        return
    entries = list_entries()
    if papers:
        for paper in PAPERS.values():
            models = ", ".join(entry.name for entry in entries if paper.id in cited_ids(entry.paper)) or "none"
            numbers = reported_with(paper.id, entries)
            out.print(block(paper.citation(), f"benchbuild: {paper.implements}", f"zoo: {models}",
                            "its numbers, trained here with:" if numbers else "its numbers: none in the catalogue",
                            first=f"{paper.id}  ", rest=" " * 5), markup=False, highlight=False, soft_wrap=True)
            for line in numbers:
                out.print(block(line, first=" " * 7, rest=" " * 9), markup=False, highlight=False, soft_wrap=True)
            out.print()
        return
    out.print("benchbuild model zoo (models/*.toml); papers by id: benchbuild zoo --papers", highlight=False)
    for entry in entries:
        extends = f" · extends {entry.extends}" if entry.extends else ""
        count = known_differences(entry)
        plural = "" if count == 1 else "s"
        differences = f" · {count} known difference{plural} (zoo --model {entry.name})" if count else ""
        out.print(Text("\n" + entry.name, style="bold"))
        out.print(block(f"{entry.architecture['kind']} · paper {entry.paper}{extends}{differences}", entry.summary),
                  markup=False, highlight=False, soft_wrap=True)


def _print_resolved_model(name: str) -> None:
    """`zoo --model NAME`: per recipe, the resolved architecture (recipe keys over `[architecture]`), the parameter
    count of a fresh model over the recipe's vocabulary size (BPE) or 32 words (SCAN's commands), the selection rule,
    the reported numbers made with it and the statistic each is, and the recipe's `[fidelity]`: its sources and its
    known differences from the paper. The models are built on torch's meta device: counting the 217M parameters of
    the noun-adjective Transformer allocates nothing."""
    import dataclasses
    import textwrap

    import torch
    from rich.text import Text

    from benchbuild.papers import reported_in_words, selection_rule
    from benchbuild.zoo import build_model, load_entry
    from benchbuild.zoo.catalogue import resolved_architecture

    entry = load_entry(name)
    out.print(Text(entry.name, style="bold"))
    out.print(textwrap.fill(f"{entry.summary} (paper {entry.paper}). A run trains with the recipe of the reported "
                            "number on its benchmark, else the one named for its benchmark family (nounadj), else "
                            "scan (SCAN) or mt; `train --recipe` chooses another.", max(out.width, 40),
                            break_on_hyphens=False), markup=False, highlight=False, soft_wrap=True)
    for family, recipe in sorted(entry.recipes.items()):
        architecture = resolved_architecture(entry, family)
        vocabulary = recipe.get("bpe_vocab_size") or 32
        separate = recipe.get("dictionaries") == "separate"
        with torch.device("meta"):
            network = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=vocabulary,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                  overrides={"source_vocab_size": vocabulary} if separate else None)
        vocabularies = (f"separate source and target dictionaries, counted at {vocabulary:,} each: a run's own sizes "
                        "are in its model card" if separate else f"vocabulary {vocabulary:,}")
        parameters = sum(parameter.numel() for parameter in network.parameters())
        changed = ", ".join(sorted(recipe.get("architecture", {}))) or "none"
        numbers = [reported_in_words(row) for row in entry.reported if row.get("recipe") == family]
        fidelity = entry.fidelity.get(family, {"sources": [], "differences": []})
        differences = fidelity["differences"]
        # (text, indent of its first line, indent of the rest)
        paragraphs = [(f"[recipe.{family}] {parameters:,} parameters ({vocabularies}); "
                       f"select = {selection_rule(recipe)}", "", "    "),
                      ("reported numbers made with it:" + ("" if numbers else " none"), "    ", "    "),
                      *((line, "      ", "        ") for line in numbers),
                      (f"keys this recipe changes: {changed}", "    ", "    "),
                      (", ".join(f"{key} = {value}" for key, value in architecture.items()), "    ", "    "),
                      ("sources:" + ("" if fidelity["sources"] else " none listed"), "    ", "    "),
                      *((source, "    - ", "      ") for source in fidelity["sources"]),
                      (f"known differences from the paper: {len(differences) or 'none listed'}", "    ", "    ")]
        for row in differences:
            paragraphs += [(row["what"], "    - ", "      "),
                           *((f"{key}: {row[key]}", "        ", "          ") for key in ("paper", "ours", "why"))]
        text = "\n".join(textwrap.fill(paragraph, max(out.width, 40), initial_indent=first, subsequent_indent=rest,
                                       break_on_hyphens=False) for paragraph, first, rest in paragraphs)
        out.print("\n" + text, markup=False, highlight=False, soft_wrap=True)


@app.command("build-noun-adj")
@with_parameters
def build_noun_adj_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    parameters: NounAdjParameters,
    engine: EngineParameters,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
    allow_small: Annotated[bool, typer.Option("--allow-small", help="Save the benchmark even when its test split is "
                                              "empty (the card's counts say so); without it such a build is refused "
                                              "before saving.")] = False,
) -> None:
    """Build the English→French noun–adjective order benchmark (Chaabouni et al. 2021, §4.2) from a parallel corpus."""
    from benchbuild.atomic import work_directory
    from benchbuild.engine import open_engine
    from benchbuild.nounadj.build import build_noun_adj

    parameters.check()
    parameters.check_engine(engine)
    check_output(out_dir, "--out", "benchmark", inputs=path_inputs(parameters), overwrite=overwrite)
    # The large splits live in Arrow files of a work folder beside --out until the benchmark is saved.
    with work_directory(out_dir) as work:
        with open_engine(engine) as running:  # with --engine dask, its workers parse the candidate sentences
            benchmark = build_noun_adj(parameters, workdir=work, progress=True, engine=running)
        empty_test = len(benchmark.splits["test"]) == 0
        if empty_test and not allow_small:
            raise BenchbuildError(_empty_test_split(benchmark.card.counts))
        _save(benchmark, out_dir, format, overwrite)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in benchmark.info.splits.items())
    out.print(f"wrote {out_dir} ({rows})")
    if empty_test:
        console.print(f"warning: the test split is empty (saved with --allow-small; the counts in "
                      f"{out_dir / 'README.md'} say why)", soft_wrap=True)


def _empty_test_split(counts: dict[str, int]) -> str:
    """Why a noun–adjective build has no test row, and what to change: a benchmark without one is never the aim."""
    held_out = counts["test: sentences with a held-out pairing"]
    if held_out:
        return (f"the test split would be empty: --require-reference-match dropped all {held_out:,} sentences with a "
                "held-out pairing (no French reference holds both lemmas): drop --require-reference-match, give a "
                "larger corpus, or pass --allow-small to save it anyway")
    parsed = counts["sentences sent to the parser (hold a target-noun form)"]
    return (f"the test split would be empty: none of the {parsed:,} sentences holding a target noun has a held-out "
            "pairing: give a larger corpus (or a --pairs file whose swapped pairings it holds), or pass --allow-small "
            "to save it anyway")


@app.command("build-lake-baroni-fr")
@with_parameters
def build_lake_baroni_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    parameters: LakeBaroniParameters,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Build Lake & Baroni's (2018, §5) small English→French set with the novel adjective "daxy" (002 Table 3) from
    the English–French pairs file: train, test and the eight daxy sentences."""
    from benchbuild.lake_baroni.build import build_lake_baroni

    parameters.check()
    check_output(out_dir, "--out", "benchmark", inputs=path_inputs(parameters), overwrite=overwrite)
    benchmark = build_lake_baroni(parameters)
    _save(benchmark, out_dir, format, overwrite)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in benchmark.info.splits.items())
    out.print(f"wrote {out_dir} ({rows})")


def _positive_minutes(value: float | None) -> float | None:
    if value is not None and not (value > 0 and math.isfinite(value)):  # inf would reach run.json as `Infinity`
        raise typer.BadParameter(f"must be a positive, finite number of minutes; got {value}")
    return value


@app.command("train")
def train_command(
    model: Annotated[str, typer.Option("--model", help="A catalogue model name (see `benchbuild zoo`) or a model .toml file.")],
    data: Annotated[Path, typer.Option("--data", help="A benchmark folder (written by a build command).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run folder: selected checkpoint, checkpoints/, logs.")],
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of initialisation, batch order and dropout.")] = 0,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="Step budget (default: the recipe's).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        "--max-minutes", callback=_positive_minutes, help="Also stop after this many minutes of training and validation, then validate once "
        "more and keep the checkpoint the recipe's `select` names.")] = None,
    device: DeviceOption("Where to train") = "auto",
    recipe: Annotated[Optional[str], typer.Option(
        "--recipe", metavar="scan|scan_000|mt|mt_001|nounadj", help="One of the entry's recipes (default: the one its paper's number on this benchmark was made "
        "with, else the benchmark family's; `benchbuild zoo --model NAME` lists them).")] = None,
    recipe_set: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a recipe key, KEY=VALUE (repeatable), e.g. --set eval_every=500.")] = None,
    validation_split: Annotated[Optional[str], typer.Option(
        "--validation-split", help="Split for model selection (default: `validation`, else the recipe's held_out share of train: 10%, 20% for 002's models).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder instead of resuming it.")] = False,
) -> None:
    """Train a zoo model on a benchmark; a re-run with the same arguments resumes from the last checkpoint."""
    from benchbuild.training.loop import train
    from benchbuild.zoo.recipe import TrainingRecipe

    overrides = TrainingRecipe.checked_overrides(key_values(recipe_set or [], "--set"), "--set")
    result = train(model, data, out_dir, seed=seed, max_steps=max_steps, max_minutes=max_minutes, device=device,
                   recipe=recipe, overrides=overrides,
                   validation_split=validation_split, overwrite=overwrite)
    resumed = f" (resumed from step {result.resumed_from})" if result.resumed_from is not None else ""
    accuracy = "n/a" if result.validation_exact_match is None else f"{result.validation_exact_match:.2f}%"
    out.print(f"trained {result.steps} steps{resumed}; selected step {result.selected_step} "
              f"(validation exact match {accuracy}); run folder {result.run_dir}")


@app.command("eval")
def eval_command(
    run_dir: Annotated[Path, typer.Option("--run", help="A run folder written by `benchbuild train`.")],
    data: Annotated[Path, typer.Option("--data", help="The benchmark folder to evaluate on.")],
    split: Annotated[str, typer.Option("--split", help="The split to decode and score.")] = "test",
    beam: Annotated[Optional[int], typer.Option("--beam", min=1, max=256, help="Beam size (1: greedy; at most 256: "
                                                "memory grows with the beam). Default: the run's recipe's (5 for MT "
                                                "recipes, as their papers decode; 1 for SCAN).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Folder for predictions.jsonl and metrics.json "
                                                    "(default: the run folder).")] = None,
    device: DeviceOption("Where to decode") = "auto",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
    allow_unfinished: Annotated[bool, typer.Option("--allow-unfinished", help="Score a run that has not finished "
                                                   "training (interrupted, or still running): its last selected "
                                                   "checkpoint, marked unfinished in metrics.json.")] = False,
) -> None:
    """Decode a benchmark split with a trained run and print its metrics (also written to metrics.json)."""
    from benchbuild.evaluation.evaluate import evaluate_run

    metrics = evaluate_run(run_dir, data, split=split, beam=beam, batch_size=batch_size, out=out_dir, device=device,
                           lexicon=lexicon, compound=compound, progress=True, allow_unfinished=allow_unfinished)
    out.print_json(data=metrics)


def _optional_device(value: str | None) -> str | None:
    """`--device` of a command whose default is the recorded device: checked like every `--device` when given."""
    from benchbuild.device import check_device

    if value is None:
        return None
    try:
        return check_device(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None


def _stack_option(value: str) -> str:
    """`--stack`: a number of runs of at least 1, or auto (`sweep.stacks.parse_stack`), refused as a usage error."""
    from benchbuild.sweep.stacks import parse_stack

    try:
        parse_stack(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None
    return value


@app.command("reproduce")
def reproduce_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A trained (and evaluated) run folder.",
                                            show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", help="The new run folder to train and evaluate into.")],
    data: Annotated[Optional[Path], typer.Option("--data", help="The benchmark folder the run trained on (default: "
                                                 "the one run.json records, relative to the run folder); checked "
                                                 "against the recorded fingerprint.")] = None,
    model: Annotated[Optional[Path], typer.Option("--model", help="The model .toml of a run trained from a file of "
                                                  "yours (default: the recorded one); checked against its recorded "
                                                  "sha256.")] = None,
    device: Annotated[Optional[str], typer.Option("--device", metavar="auto|cpu|cuda|cuda:N",
                                                  callback=_optional_device, help="Where to train and decode: auto, "
                                                  "cpu, cuda or cuda:N (default: the recorded device).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder at --out.")] = False,
) -> None:
    """Re-run a run's recorded training and evaluations into a new folder and say which metrics agree: exactly on
    the same device and software, else within the recorded CI. Exits 1 when one that should be identical is not."""
    from benchbuild.reproduce import reproduce

    done = reproduce(run_dir, out_dir, data=data, model=model, device=device, overwrite=overwrite, progress=True)
    show = dict(markup=False, highlight=False, soft_wrap=True)
    out.print(f"reproduced {run_dir} into {out_dir}", **show)
    if done.exact:
        out.print("same device, software, thread count and steps: every number should be identical", **show)
    else:
        out.print("not expected identical (" + "; ".join(done.why_not_exact) + "): a number agrees within its "
                  "recorded 95% CI, else differs", **show)
    for agreement in done.agreements:
        out.print(agreement.line(), **show)
    for file, same, rows in done.predictions:
        out.print(f"{file}: {same:,} of {rows:,} predictions identical", **show)
    if done.failures:
        raise BenchbuildError(f"{len(done.failures)} of {len(done.agreements)} numbers differ although the device, "
                              f"software, thread count and steps are the run's: "
                              f"{', '.join(a.metric for a in done.failures[:5])}")


@app.command("score")
def score_command(
    data: Annotated[Path, typer.Option("--data", help="The benchmark folder the predictions are for.")],
    predictions: Annotated[Path, typer.Option("--predictions", help="Plain text: one prediction per row, in row order.")],
    split: Annotated[str, typer.Option("--split", help="The split the predictions are for.")] = "test",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Also write the metrics to this JSON file.")] = None,
) -> None:
    """Score any system's plain-text outputs with the benchmark's metrics."""
    from benchbuild.evaluation.scoring import score_file
    from benchbuild.run_folder import write_metrics

    if out_file is not None:  # a metrics file score or eval wrote is replaced; anything else is refused
        compound_file = Path(compound) if compound and Path(compound).is_file() else None
        check_output(out_file, "--out", "metrics", exists="continue", inputs=[
            ("--data", data), ("--predictions", predictions), ("--lexicon", lexicon), ("--compound", compound_file)])
    metrics = score_file(data, split, predictions, lexicon=lexicon, compound=compound)
    if out_file is not None:
        write_metrics(out_file, metrics)
    out.print_json(data=metrics)


@app.command("report")
def report_command(
    run_dirs: Annotated[Optional[list[Path]], typer.Argument(
        help="Evaluated run folders (seeds of a model are averaged).", show_default=False)] = None,
    prefix: Annotated[Optional[Path], typer.Option(
        "--out", help="Writes PREFIX.md, .csv, .tex with its references in .bib, .html and the figures in "
        "PREFIX_files/ (default: report.* beside the first run folder, in its parent folder).")] = None,
    formats: Annotated[str, typer.Option(
        "--format", callback=format_option,
        help="Comma-separated formats to write: md, csv, tex, html (figures come with tex and html).")
    ] = "md,csv,tex,html",
    data: Annotated[Optional[list[Path]], typer.Option(
        "--data", help="A benchmark folder (repeatable): its degree or length histograms, and its rows for figures "
        "whose evaluations did not record where their benchmark is.")] = None,
    compare: Annotated[Optional[tuple[Path, Path]], typer.Option(
        "--compare", metavar="A B", show_default=False,
        help="Instead of a report, test whether two runs, or two folders of runs (a model's seeds), differ on each "
        "benchmark split both evaluated: McNemar's exact test (exact match) and sacrebleu's paired bootstrap (BLEU) "
        "over the test rows, Welch's t-test over seeds; prints each p-value.")] = None,
) -> None:
    """Tables, figures and an HTML page of model × benchmark split: mean ± s.e. over seeds and, beside the paper's
    number where the runs were made as it was (else apart, saying what differs), ours by the paper's statistic."""
    from benchbuild.report.formats import parse_formats
    from benchbuild.report.markdown import markdown_table
    from benchbuild.report.write import write_report

    if compare is not None:
        from benchbuild.report.compare import compare_runs, comparison_text, run_group
        from benchbuild.report.runs import read_runs

        if run_dirs:
            raise typer.BadParameter("it takes its two runs or folders of runs itself: give no other run folder",
                                     param_hint="'--compare'")
        a_runs, b_runs = (read_runs(run_group(folder)) for folder in compare)
        out.print(comparison_text(str(compare[0]), a_runs, str(compare[1]), b_runs, compare_runs(a_runs, b_runs)),
                  markup=False, highlight=False, soft_wrap=True)
        return
    if not run_dirs:
        raise typer.BadParameter("give one or more evaluated run folders (or --compare A B)",
                                 param_hint="'run_dirs'")
    report = write_report(run_dirs, prefix if prefix is not None else run_dirs[0].resolve().parent / "report",
                          parse_formats(formats), data or ())
    out.print(markdown_table(report.rows), markup=False, highlight=False, soft_wrap=True)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print("wrote " + ", ".join(map(str, report.files))
                  + (f" and {len(report.figures)} figures in {report.figures[0].png.parent}" if report.figures else ""),
                  markup=False, highlight=False, soft_wrap=True)
    page = next((path for path in report.files if path.suffix == ".html"), None)
    if page is not None:
        console.print(f"open {page} in a browser", markup=False, highlight=False, soft_wrap=True)


@app.command("degree")
@with_parameters
def degree_command(
    train_src: Annotated[Path, typer.Option("--train-src", help="Training source file (one sentence a line).")],
    pool: Annotated[list[Path], typer.Option("--pool", help=(
        "File whose every line is scored (repeatable; a glob such as 'shards/*.de' gives its files in name order): "
        "the files are scored one after another, as if concatenated, and rows numbered through them."))],
    out_file: Annotated[Optional[Path], typer.Option("--out", help="TSV to write (default: stdout).")] = None,
    *,
    parameters: DegreeParameters,
    engine: EngineParameters,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out file.")] = False,
    encoding_errors: EncodingErrorsOption = "strict",
) -> None:
    """Compositional degree (001 §4) of every pool line w.r.t. a training corpus, as a TSV (line, degree)."""
    from benchbuild.engine import open_engine
    from benchbuild.react.degree import write_degree_table
    from benchbuild.react.parameters import expand_glob

    parameters.check()
    engine.check()
    pools = [path for pattern in pool for path in expand_glob(pattern, "--pool")]
    if out_file is not None:
        check_output(out_file, "--out", "degree", overwrite=overwrite,
                     inputs=[("--train-src", train_src), *(("--pool", path) for path in pools)])
    with open_engine(engine) as running:  # with --engine dask, its workers score the pool's shards
        counts = write_degree_table(train_src, pools, out_file, parameters, overwrite=overwrite, progress=True,
                                    encoding_errors=encoding_errors, engine=running)
    console.print(f"scored {counts['scored']:,} of {counts['lines']:,} lines "
                  f"({counts['dropped']:,} dropped by the OOV filter or empty)"
                  + (f"; wrote {out_file}" if out_file else ""))


@app.command("build-react")
@with_parameters
def build_react_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    parameters: ReactParameters,
    engine: EngineParameters,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Build ReaCT (001 §4): compositional degree, then a model ensemble's reverse mutual information."""
    from benchbuild.engine import open_engine
    from benchbuild.react.build import build_react, engine_gpus
    from benchbuild.react.cache import StageCache

    parameters.check()
    parameters.check_engine(engine)
    # The stage cache and the members' folder are outputs too: apart from the inputs and from --out.
    inputs = path_inputs(parameters, skip=("cache_dir", "ensemble_dir"))
    side_outputs = [("--cache-dir", parameters.cache_dir), ("--ensemble-dir", parameters.ensemble_dir)]
    check_output(out_dir, "--out", "benchmark", inputs=inputs + side_outputs, overwrite=overwrite)
    for option, folder in side_outputs:
        if folder is not None:
            check_disjoint(folder, option, inputs)
    cache = StageCache(parameters.cache_dir)
    # The engine starts (or joins its scheduler) before the first stage: an unreachable cluster fails here.
    with open_engine(engine, gpus=engine_gpus(parameters, engine)) as running:
        benchmark = build_react(parameters, cache=cache, progress=True, engine=running)
    written = _save(benchmark, out_dir, format, overwrite)
    counts = benchmark.card.counts
    reused = f"; cached stages reused: {', '.join(cache.hits)}" if cache.hits else ""
    out.print(f"wrote {written} (cg_test {counts['sampled']:,} of {counts['candidate pool (top by degree)']:,} "
              f"candidates){reused}")


@app.command("stats")
def stats_command(
    benchmark: Annotated[Path, typer.Argument(help="A built benchmark folder.")],
    split: Annotated[str, typer.Option("--split", help="The split to describe.")] = "cg_test",
    against: Annotated[Optional[Path], typer.Option("--against", help="Training sources: a benchmark folder (its "
                                                    "train split) or a text file (default: this benchmark's train).")] = None,
    lang: Annotated[Optional[str], typer.Option("--lang", help="Source language for POS tags (default: from the build).")] = None,
) -> None:
    """001 Table 2 of a split: examples, mean compositional degree, unique novel word and POS 2-/3-grams."""
    from benchbuild.react.stats import benchmark_table2

    table = benchmark_table2(benchmark, split=split, against=against, lang=lang)
    for name, value in table.rows():
        typer.echo(f"{name}\t{value}")
    for reason in table.skipped:
        console.print(reason)


@app.command("sweep")
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
                                                  callback=_optional_device, help="Where every run trains and is "
                                                  "scored (default: the sweep file's device).")] = None,
    stack: Annotated[str, typer.Option("--stack", metavar="K|auto", callback=_stack_option,
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


@app.command("import")
@with_parameters
def import_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    layout: Annotated[Optional[LayoutName], typer.Argument(
        metavar="LAYOUT", help="A published benchmark by name, its files found and checked in DIR; none: the files of --split or "
        "--hf.", show_default=False)] = None,
    folder: Annotated[Optional[Path], typer.Argument(
        metavar="DIR", help="The LAYOUT's release folder: cognition, CoGnition's data/; react, ReaCT's "
        "cg_test.de/en with IWSLT14's train/valid/test.de/en; iwslt14, prepare-iwslt14.sh's output.",
        show_default=False)] = None,
    *,
    parameters: ImportParameters,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Import split files made elsewhere (a published release, COGS, any TSV, JSONL, parquet or HF dataset) as a
    benchmark folder that train, eval, score and report take like a built one."""
    from benchbuild.importing.build import counts_checked, import_benchmark

    parameters.check(layout, folder)
    check_output(out_dir, "--out", "benchmark", inputs=parameters.inputs(folder), overwrite=overwrite)
    benchmark = import_benchmark(parameters, layout, folder, default_name=out_dir.resolve().name)
    _save(benchmark, out_dir, format, overwrite)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in benchmark.info.splits.items())
    checked = f"; {counts_checked(parameters, layout)}" if layout else ""
    out.print(f"wrote {out_dir} as {benchmark.info.family}/{benchmark.info.name.split('/')[-1]} ({rows}{checked})",
              markup=False, highlight=False, soft_wrap=True)


@app.command("publish")
def publish_command(
    benchmark: Annotated[Path, typer.Argument(metavar="BENCH", help="A benchmark folder benchbuild wrote (built or "
                                              "imported; arrow, parquet or jsonl).", show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", help="The folder to write: data/*.parquet, README.md, "
                                          "build.json, croissant.json, CITATION.bib.")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a folder an earlier publish wrote "
                                            "(nothing else).")] = False,
) -> None:
    """Write a benchmark as a dataset to release: Hub-ready parquet splits and card, croissant.json (Croissant 1.0 with
    its Responsible-AI fields) and CITATION.bib (the papers it follows and benchbuild). mlcroissant must load
    croissant.json and yield every split's rows before anything is put in place; it is the `publish` extra (pip
    install 'benchbuild[publish]'): without it the command stops before writing anything. What only the author can
    say is left as "TODO (author): ..." placeholders, listed on stderr."""
    from benchbuild.publishing.publish import publish, require_mlcroissant

    checker = require_mlcroissant()
    check_output(out_dir, "--out", "published", inputs=[("BENCH", benchmark)], overwrite=overwrite)
    published = publish(benchmark, out_dir, overwrite=overwrite, progress=True)
    rows = ", ".join(f"{name} {count:,}" for name, count in published.rows.items())
    out.print(f"wrote {out_dir} ({rows}); croissant.json checked with mlcroissant {checker}: every split's records "
              "equal the benchmark's rows", markup=False, highlight=False, soft_wrap=True)
    for split, columns in published.null_columns.items():
        console.print(f"note: split {split} has no {', '.join(columns)} column(s): null there in its parquet file, "
                      "so that every split has one schema", markup=False, highlight=False, soft_wrap=True)
    if published.placeholders:
        console.print(f"{len(published.placeholders)} placeholders hold what only you can say; replace each "
                      "'TODO (author): ...' before you release the folder:", markup=False, highlight=False,
                      soft_wrap=True)
        for placeholder in published.placeholders:
            console.print(f"  {placeholder}", markup=False, highlight=False, soft_wrap=True)


def _option_dests(command) -> set[str]:
    names = set()
    for param in command.params:
        for opt in getattr(param, "opts", []):
            names.add(opt.lstrip("-").replace("-", "_"))
    return names


def check_no_empty_argument(argv: list[str] | tuple[str, ...]) -> None:
    """Refuse an empty option value or argument (`--out ""`, `--out=`): an unset shell variable, which a path option
    would read as the current folder."""
    for position, argument in enumerate(argv):
        if argument.startswith("--") and argument.endswith("=") and len(argument) > 3:
            check_path_text("", argument[:-1])
        if not argument.strip():
            previous = argv[position - 1] if position else ""
            check_path_text(argument, previous if previous.startswith("-") else f"argument {position}")


def _terminate(signum, frame) -> None:
    raise Terminated()


def main() -> None:
    """Console entry point: one error line on stderr and a non-zero exit, or the traceback with --debug. Ctrl-C
    (SIGINT) exits with 130 and SIGTERM with 143, after every `finally` has stopped children and removed temporary
    files."""
    import signal

    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv = [sys.argv[0], *[a for a in sys.argv[1:] if a != "--debug"]]
    signal.signal(signal.SIGTERM, _terminate)
    try:
        check_no_empty_argument(sys.argv[1:])
        result = app(standalone_mode=False)
    except typer.Exit as stop:
        sys.exit(stop.exit_code)
    except ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _stopped("interrupted", "", 130)
    except Interrupted as stop:
        _stopped("interrupted", str(stop), 130)
    except Terminated as stop:
        _stopped("terminated", str(stop), 143)
    except Exception as error:  # noqa: BLE001 - the CLI's single place that turns errors into one line
        if debug:
            raise
        print(f"benchbuild: error: {_one_line(error)}", file=sys.stderr)
        sys.exit(1)
    if result == 130:  # typer's answer to Ctrl-C inside a command: its exit code, not an exception
        _stopped("interrupted", "", 130)
    sys.exit(result if isinstance(result, int) else 0)


# Commands whose rerun goes on from where a stopped one was (runs resume from their last checkpoint, build-react from
# its cache, sweeps and pipelines skip what finished); every other command starts its work again.
RESUMING_COMMANDS = ("train", "sweep", "run", "build-react")


def _stopped(what: str, where: str, code: int) -> None:
    """One line on stderr saying that a signal stopped the command (and where, for a pipeline) and what the same
    command does when run again, then exit `code`."""
    command = next((argument for argument in sys.argv[1:] if not argument.startswith("-")), "")
    again = ("(the same command again goes on from where it stopped)" if command in RESUMING_COMMANDS
             else "(the same command again starts it over)")
    # One line, under 80 columns: a progress display still live would wrap a longer one at the terminal's width.
    print(f"benchbuild: {what} {where or again}", file=sys.stderr, flush=True)
    sys.exit(code)


def _one_line(error: BaseException) -> str:
    message = str(error) or error.__class__.__name__
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        message = f"{error.filename}: {error.strerror}"  # an unwritable folder, a full disk: the path and why
    elif not isinstance(error, (BenchbuildError, FileNotFoundError, FileExistsError, ValueError)):
        message = f"{error.__class__.__name__}: {message}"
    return " ".join(message.split()) + " (rerun with --debug for the traceback)"
