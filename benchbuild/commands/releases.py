"""`import` (split files made elsewhere, a published release among them, as a benchmark folder) and `publish` (a
benchmark as a dataset to release)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.commands import console, out
from benchbuild.commands.saving import save_benchmark
from benchbuild.importing.parameters import ImportParameters, LayoutName
from benchbuild.options import FormatOption, OverwriteOption, with_parameters
from benchbuild.outputs import check_output


@with_parameters
def import_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Benchmark folder to write.")],
    layout: Annotated[Optional[LayoutName], typer.Argument(
        metavar="LAYOUT", help="A published benchmark by name, its files found and checked in DIR; none: the files of --split or "
        "--hf.", show_default=False)] = None,
    folder: Annotated[Optional[Path], typer.Argument(
        metavar="DIR", help="The LAYOUT's release folder: cognition, CoGnition's data/; react, ReaCT's "
        "cg_test.de/en with IWSLT14's train/valid/test.de/en; iwslt14, prepare-iwslt14.sh's output; "
        "syntactic_attention_mt, the data/MT folder of 002's code (jlrussin/syntactic_attention).",
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
    save_benchmark(benchmark, out_dir, format, overwrite)
    rows = ", ".join(f"{name} {split.rows:,}" for name, split in benchmark.info.splits.items())
    checked = f"; {counts_checked(parameters, layout)}" if layout else ""
    out.print(f"wrote {out_dir} as {benchmark.info.family}/{benchmark.info.name.split('/')[-1]} ({rows}{checked})",
              markup=False, highlight=False, soft_wrap=True)


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
