"""The build commands (SCAN, noun-adjective order, Lake & Baroni's French set, ReaCT) and ReaCT's `degree` and `stats`
of a corpus or a built split.

The build commands take their options from the builders' parameters dataclasses (`benchbuild.options`), check
every input and output before any work, and save the benchmark with the command line that built it
(`commands.saving`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.commands import console, out
from benchbuild.commands.saving import save_benchmark
from benchbuild.engine import EngineParameters
from benchbuild.errors import BenchbuildError
from benchbuild.lake_baroni.parameters import LakeBaroniParameters
from benchbuild.nounadj.parameters import NounAdjParameters
from benchbuild.options import EncodingErrorsOption, FormatOption, OverwriteOption, with_parameters
from benchbuild.outputs import check_disjoint, check_output, path_inputs
from benchbuild.react.parameters import DegreeParameters, ReactParameters
from benchbuild.scan.parameters import ScanParameters


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
    written = [save_benchmark(benchmark, out_dir / name, format, overwrite)
               for name, benchmark in build_scan(replace(parameters, split=todo), progress=True)] if todo else []
    kept_note = f" (kept {len(kept)} already built by the same command)" if kept else ""
    out.print(f"wrote {len(written)} SCAN benchmark(s) under {out_dir}{kept_note}")


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
        save_benchmark(benchmark, out_dir, format, overwrite)
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
    save_benchmark(benchmark, out_dir, format, overwrite)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in benchmark.info.splits.items())
    out.print(f"wrote {out_dir} ({rows})")


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
    written = save_benchmark(benchmark, out_dir, format, overwrite)
    counts = benchmark.card.counts
    reused = f"; cached stages reused: {', '.join(cache.hits)}" if cache.hits else ""
    out.print(f"wrote {written} (cg_test {counts['sampled']:,} of {counts['candidate pool (top by degree)']:,} "
              f"candidates){reused}")


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
