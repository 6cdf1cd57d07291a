"""What `benchbuild import` is told: the split files, how their columns map to `source`/`target`, the metrics, and
the names the benchmark is filed under (each field is its option)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from benchbuild.errors import BenchbuildError
from benchbuild.options import EncodingErrorsOption
from benchbuild.outputs import check_name, check_path_text

# The published releases `benchbuild import LAYOUT DIR` recognises (`benchbuild.importing.layouts.LAYOUTS`).
LayoutName = Literal["cognition", "react", "iwslt14", "syntactic_attention_mt"]
# What `eval` and `score` compute that a benchmark may declare as its headline metrics.
METRICS = ("exact_match", "bleu", "chrf", "cter", "comp", "bleu_by_degree")
DEFAULT_FAMILY = "imported"


def _metrics_option(values: list[str] | None) -> list[str] | None:
    unknown = [value for value in values or [] if value not in METRICS]
    if unknown:
        raise typer.BadParameter(f"{unknown[0]!r} is not a metric; choose from {', '.join(METRICS)}")
    return values


@dataclass(frozen=True)
class ImportParameters:
    """Every option of `benchbuild import` but where and how to save."""

    split: Annotated[Optional[list[str]], typer.Option(
        "--split", metavar="NAME=FILE[,FILE...]",
        help="A split and its files (repeatable): two or more aligned text files (the first is the source, the second "
        "the target, more become columns named by their suffix, as cg-test.compound -> compound), or one .tsv, "
        ".jsonl or .parquet file, or a local Hugging Face dataset folder. With a LAYOUT it adds a split or replaces "
        "the layout's files for it (e.g. your IWSLT14 train for react).")] = None
    hf: Annotated[Optional[Path], typer.Option(
        "--hf", help="Every split of a local Hugging Face dataset folder (save_to_disk, or a folder of data "
        "files).")] = None
    columns: Annotated[Optional[str], typer.Option(
        "--columns", metavar="NAME,NAME,...", help="The names of a TSV's columns, in order (default: source,target; "
        "COGS: source,target,type).")] = None
    header: Annotated[bool, typer.Option("--header", help="The first line of each TSV names its columns.")] = False
    source: Annotated[Optional[str], typer.Option(
        "--source", help="The column that becomes `source` (default: `source`, or the first text file's; a language "
        "of a `translation` column works too).")] = None
    target: Annotated[Optional[str], typer.Option(
        "--target", help="The column that becomes `target` (default: `target`, or the second text file's).")] = None
    source_lang: Annotated[Optional[str], typer.Option(
        "--source-lang", help="Source language for the card (default: the layout's, or the first text file's "
        "suffix).")] = None
    target_lang: Annotated[Optional[str], typer.Option(
        "--target-lang", help="Target language for the card (default: the layout's, or the second text file's "
        "suffix).")] = None
    metric: Annotated[Optional[list[str]], typer.Option(
        "--metric", metavar="|".join(METRICS), callback=_metrics_option,
        help="A metric the benchmark is scored with (repeatable; default: the layout's). cter needs --lexicon and a "
        "compound column; comp the noun-adjective columns; bleu_by_degree a degree column.")] = None
    lexicon: Annotated[Optional[Path], typer.Option(
        "--lexicon", help="CoGnition-style lexicon for CTER (atom<TAB>translations; cognition: found in the release "
        "when not given).")] = None
    compound: Annotated[str, typer.Option(
        "--compound", help="The column holding each row's compound, for CTER.")] = "compound"
    family: Annotated[Optional[str], typer.Option(
        "--family", help="Benchmark family, as the catalogue's [[reported]] rows name it (default: the layout's, "
        "else imported).")] = None
    name: Annotated[Optional[str], typer.Option(
        "--name", help="Benchmark name (default: the layout's, else the --out folder's name).")] = None
    license: Annotated[Optional[str], typer.Option(
        "--license", help="The data's license for the card (default: the layout's, else unknown).")] = None
    encoding_errors: EncodingErrorsOption = "strict"

    def check(self, layout: str | None, folder: Path | None) -> None:
        """Fail before any work on options that cannot go together or cannot be parsed."""
        from benchbuild.importing.files import parse_split  # path checks only: nothing is read here

        if layout is not None and folder is None:
            raise BenchbuildError(f"`benchbuild import {layout}` needs the folder of the release: "
                                  f"benchbuild import {layout} DIR --out OUT")
        if layout is None and folder is not None:
            raise BenchbuildError(f"{folder}: a folder is imported by its LAYOUT (cognition, react, iwslt14 or "
                                  "syntactic_attention_mt); "
                                  "other files with --split NAME=FILES or --hf DIR")
        if layout is None and not self.split and self.hf is None:
            raise BenchbuildError("nothing to import: give --split NAME=FILES (repeatable) or --hf DIR, or a LAYOUT "
                                  "and its DIR (benchbuild import cognition|react|iwslt14|syntactic_attention_mt DIR)")
        if layout is not None and self.hf is not None:
            raise BenchbuildError("--hf imports a whole dataset folder: it does not go with a LAYOUT (give a split "
                                  "of it with --split NAME=DIR)")
        if layout is None and not self.metric:
            raise BenchbuildError("declare the metric(s) the benchmark is scored with: --metric exact_match, bleu, "
                                  "chrf, cter, comp or bleu_by_degree (repeatable)")
        names = [parse_split(text).name for text in self.split or []]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise BenchbuildError(f"--split {repeated[0]} is given twice: one --split per split name")
        if self.columns is not None and self.header:
            raise BenchbuildError("--columns names the TSV columns and --header reads them from the first line: "
                                  "give one of them")
        if self.columns is not None:
            self.tsv_columns()
        for option, value in (("--family", self.family), ("--name", self.name)):
            if value is not None:
                check_name(value, option)
        for option, value in (("--source", self.source), ("--target", self.target), ("--compound", self.compound)):
            if value is not None and not value.strip():
                raise BenchbuildError(f"{option} is empty: give a column name")
        if self.lexicon is not None:
            check_path_text(str(self.lexicon), "--lexicon")

    def tsv_columns(self) -> list[str] | None:
        """The `--columns` names, each non-empty and given once."""
        if self.columns is None:
            return None
        names = [name.strip() for name in self.columns.split(",")]
        if len(names) < 2 or not all(names) or len(set(names)) != len(names):
            raise BenchbuildError(f"--columns {self.columns!r}: give at least two distinct, non-empty names separated "
                                  "by commas (e.g. source,target,type)")
        return names

    def inputs(self, folder: Path | None) -> list[tuple[str, Path | None]]:
        """Every path the import reads, as (option, path): the outputs must keep clear of them."""
        from benchbuild.importing.files import parse_split

        paths: list[tuple[str, Path | None]] = [("DIR", folder), ("--hf", self.hf), ("--lexicon", self.lexicon)]
        for text in self.split or []:
            paths += [("--split", path) for path in parse_split(text).paths]
        return paths
