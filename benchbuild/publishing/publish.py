"""`benchbuild publish`: a benchmark folder (built or imported, in any format) as a folder to release.

The published folder is a parquet benchmark folder that the Hub and `datasets.load_dataset(FOLDER)` take as it is,
plus what a dataset venue asks for:

    README.md     the benchmark's card: front matter for the parquet files, a Usage section for this folder, and the
                  citation of the paper(s) it follows and of benchbuild
    build.json    the benchmark's BuildInfo (its command line, parameters, inputs' sha256, splits' fingerprints)
    croissant.json  Croissant 1.0 metadata with the Responsible-AI fields, checked with mlcroissant
    CITATION.bib  the citation block
    data/<split>-00000-of-00001.parquet

Everything is staged beside the output and checked (mlcroissant loads croissant.json and yields every split's
rows) before one rename puts it in place: a failed check leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from benchbuild.atomic import atomic_directory
from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts, load_splits, read_build_info
from benchbuild.cards import data_files, front_matter
from benchbuild.errors import BenchbuildError
from benchbuild.fingerprint import sha256_file
from benchbuild.progress import progress_bar
from benchbuild.publishing.card import CardText
from benchbuild.publishing.citation import (benchmark_citations, bibtex_entries, citation_block, read_citation_file,
                                            software_bibtex)
from benchbuild.publishing.croissant import check_croissant, croissant_metadata, data_type, spdx_licence
from benchbuild.publishing.responsible_ai import PLACEHOLDER, author_todo, responsible_ai_fields

INSTALL_HINT = "pip install 'benchbuild[publish]'"
# The Croissant fields only the author can fill: the dataset's page and its creators.
AUTHOR_FIELDS = {
    "url": author_todo("the dataset's web page (its Hugging Face Hub page once pushed)"),
    "creator": {"@type": "sc:Person", "name": author_todo("the dataset's author; one sc:Person or sc:Organization "
                                                          "per creator")},
}
# Rows per parquet row group (a window of the table is copied into one chunk to be written).
ROW_GROUP_ROWS = 65_536
# The sections of a card that the published card writes anew.
REWRITTEN_SECTIONS = ("Usage", "Citation")


@dataclass
class Published:
    """What `publish` wrote: each split's rows, the columns added to a split as nulls so that every split has one
    schema, and the placeholders left for the author (`where: text`)."""

    rows: dict[str, int]
    null_columns: dict[str, list[str]]
    placeholders: list[str]


def require_mlcroissant() -> str:
    """The installed mlcroissant's version; a BenchbuildError saying how to install it when it is missing."""
    try:
        import mlcroissant  # noqa: F401 - imported to find out whether it is installed
    except ImportError:
        raise BenchbuildError(f"publish checks croissant.json with mlcroissant, which is not installed: "
                              f"{INSTALL_HINT}") from None
    from importlib.metadata import version

    return version("mlcroissant")


def publish(benchmark: Path, out: Path, overwrite: bool = False, progress: bool = False) -> Published:
    """Write the published folder of `benchmark` at `out` (the CLI has checked `out` with `check_output`)."""
    info = read_build_info(benchmark)
    if not (benchmark / "README.md").is_file():
        command = info.command_line if isinstance(getattr(info, "command_line", None), str) else ""
        again = (f"rebuild it with --overwrite to write the card again (build.json records the command that built "
                 f"it: {command})" if command.startswith("benchbuild ") else
                 "give a folder a build command or `benchbuild import` wrote")
        raise BenchbuildError(f"{benchmark} has no README.md: publish starts from the card a build wrote; {again}")
    card = CardText.read(benchmark / "README.md")
    loaded = load_splits(benchmark)
    # In the build's order (a parquet or jsonl folder lists its files by name).
    splits = {name: loaded[name] for name in sorted(loaded, key=lambda name: _position(name, info.splits))}
    empty = [name for name, split in splits.items() if len(split) == 0]
    if empty:
        raise BenchbuildError(f"split {', '.join(empty)} of {benchmark} is empty: `datasets.load_dataset` cannot "
                              "load an empty split, and a released benchmark is evaluated on every split; rebuild it "
                              "from more data")
    tables, null_columns = one_schema(splits)
    for column in next(iter(tables.values())).schema:  # a type croissant.json cannot describe fails before any write
        data_type(column.type, f"column {column.name!r}")
    published_info = replace(info, format="parquet")
    software = software_bibtex(read_citation_file())
    # The card of a folder publish wrote cites benchbuild already: each entry once.
    papers = [entry for key, entry in benchmark_citations(info.family, card.code("Citation")).items()
              if key not in bibtex_entries(software)]
    missing_paper = [] if papers else [f"% {author_todo('the BibTeX of the paper that introduced this dataset')}"]
    citation = citation_block([*missing_paper, *papers, software])
    paths = data_files("parquet", tables)
    with atomic_directory(out, overwrite=overwrite) as staged:
        (staged / "data").mkdir()
        for name, table in tables.items():
            write_parquet(table, staged / paths[name])
        metadata = croissant_metadata(
            name=str(card.front.get("pretty_name") or info.name), description=_description(card),
            licence=_licence(card.front.get("license")), languages=card.front.get("language", []),
            keywords=["compositional generalization", "sequence-to-sequence", *card.front.get("task_categories", []),
                      info.family],
            cite_as=citation, published=publication_date(),
            files={name: (paths[name], sha256_file(staged / paths[name])) for name in tables},
            columns={name: _own_columns(split, tables[name].schema) for name, split in splits.items()},
            rai=responsible_ai_fields(info, card), author_fields=AUTHOR_FIELDS)
        (staged / "README.md").write_text(published_card(card, tables, published_info, citation, null_columns),
                                          encoding="utf-8")
        (staged / "build.json").write_text(published_info.to_json(), encoding="utf-8")
        (staged / "CITATION.bib").write_text(citation, encoding="utf-8")
        (staged / "croissant.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
        with progress_bar("checking croissant.json with mlcroissant", sum(map(len, splits.values())),
                          enabled=progress) as advance:
            check_croissant(staged / "croissant.json", splits, advance)
    placeholders = [f"croissant.json {where}: {text}" for where, text in placeholders_in(metadata)]
    placeholders += [f"CITATION.bib and README.md (Citation): {line[2:]}" for line in missing_paper]
    return Published(rows={name: len(split) for name, split in splits.items()}, null_columns=null_columns,
                     placeholders=placeholders)


def one_schema(splits: Mapping[str, datasets.Dataset]) -> tuple[dict[str, pa.Table], dict[str, list[str]]]:
    """Every split's table in one schema, as the Hub and `load_dataset` read a folder's splits: the columns of all
    splits in order of first appearance, each with the type the splits give it (a split whose column holds only
    nulls takes the others' type); a column a split lacks is added to it as nulls. Returns the tables and, per split,
    the columns added. A column with different types in two splits is a BenchbuildError naming it."""
    types: dict[str, pa.DataType] = {}
    for name, split in splits.items():
        for field in split.data.table.schema:
            known = types.get(field.name)
            if known is None or pa.types.is_null(known):
                types[field.name] = field.type
            elif field.type != known and not pa.types.is_null(field.type):
                raise BenchbuildError(f"column {field.name!r} is {known} in one split but {field.type} in split "
                                      f"{name}: the Hub loads a folder's splits with one schema; rebuild the "
                                      "benchmark so that its splits agree")
    tables, added = {}, {}
    for name, split in splits.items():
        table = split.data.table
        added[name] = [column for column in types if column not in table.column_names]
        columns = [table.column(column).cast(kind) if column in table.column_names else pa.nulls(len(table), kind)
                   for column, kind in types.items()]
        # Through datasets, so the file's schema carries the features `load_dataset` restores.
        tables[name] = datasets.Dataset(pa.table(columns, names=list(types))).data.table
    return tables, {name: columns for name, columns in added.items() if columns}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write `table` in row groups of `ROW_GROUP_ROWS`, each from one contiguous chunk: the file's bytes depend on
    the rows alone, not on how reading the benchmark happened to chunk them (its arrow, parquet and jsonl folders
    are read in different chunks)."""
    with pq.ParquetWriter(path, table.schema) as writer:
        for start in range(0, table.num_rows, ROW_GROUP_ROWS):
            writer.write_table(table.slice(start, ROW_GROUP_ROWS).combine_chunks())


def _own_columns(split: datasets.Dataset, published: pa.Schema) -> pa.Schema:
    """A split's own columns, with the types they have in the published file."""
    return pa.schema([published.field(name) for name in split.column_names])


def _card_facts(front: Mapping[str, Any]) -> CardFacts:
    """The facts the card's front matter is rendered from, read back from the front matter a build wrote."""
    facts = CardFacts(pretty_name=str(front.get("pretty_name", "")), languages=list(front.get("language", [])),
                      license=str(front.get("license", "unknown")))
    if front.get("task_categories"):
        facts.task_categories = list(front["task_categories"])
    return facts


def _position(split: str, recorded: Mapping[str, Any]) -> tuple[int, str]:
    return (list(recorded).index(split) if split in recorded else len(recorded), split)


def _description(card: CardText) -> str:
    """The first paragraph of the card's summary as one line (the benchmark's name when it has none)."""
    return " ".join(card.section("Summary").strip().split("\n\n")[0].split()) or str(card.front.get("pretty_name", ""))


def _licence(card_licence: Any) -> str:
    """The licence croissant.json states: the card's (an SPDX URL where there is one), or a placeholder where the
    card does not know it."""
    text = str(card_licence or "").strip()
    if text.lower() in ("", "other", "unknown"):
        return author_todo("the licence of the rows (the source data's; an SPDX URL where there is one)")
    return spdx_licence(text)


def published_card(card: CardText, tables: Mapping[str, pa.Table], info: BuildInfo, citation: str,
                   null_columns: Mapping[str, list[str]]) -> str:
    """The published README.md: the benchmark's card with the front matter of the parquet files (`info` records the
    parquet format), its build section naming that format, a Usage section for this folder and `citation`."""
    subject = Benchmark(splits={name: datasets.Dataset(table) for name, table in tables.items()}, info=info,
                        card=_card_facts(card.front))
    sections = [(title, re.sub(r"format `(arrow|jsonl)`", "format `parquet`", body) if title == "How it was built"
                 else body) for title, body in card.sections]
    usage = ("Usage", _usage(next(iter(tables)), null_columns))
    return CardText(front=front_matter(subject), sections=sections).replaced(
        REWRITTEN_SECTIONS, [usage, ("Citation", f"```bibtex\n{citation}```")]).render()


def _usage(first_split: str, null_columns: Mapping[str, list[str]]) -> str:
    filled = "; ".join(f"{split}: {', '.join(f'`{c}`' for c in columns)}" for split, columns in null_columns.items())
    return (
        "```python\n"
        "from datasets import load_dataset\n"
        "dataset = load_dataset(\"PATH/TO/THIS/FOLDER\")  # or the Hub repository it was pushed to\n\n"
        "import mlcroissant\n"
        f"records = mlcroissant.Dataset(jsonld=\"PATH/TO/THIS/FOLDER/croissant.json\").records(\"{first_split}\")\n"
        "```\n\n"
        "Published with `benchbuild publish`: the splits as parquet files in `data/`, `croissant.json` (Croissant "
        "1.0 metadata with its Responsible-AI fields: one record set per split, checked with mlcroissant to yield "
        "the benchmark's rows) and `CITATION.bib` (the citation below)."
        + (f" Every split has the same columns, so that the Hub loads them together: the columns a split does not "
           f"have are null there ({filled}); croissant.json lists each split's own columns." if filled else ""))


def publication_date() -> date:
    """Today (UTC), or the day of `$SOURCE_DATE_EPOCH` when it is set (reproducible builds' convention), which makes
    a publication byte-identical when repeated."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    moment = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch.isdigit() else datetime.now(timezone.utc)
    return moment.date()


def placeholders_in(value: Any, where: str = "") -> list[tuple[str, str]]:
    """Every text in a JSON value that is an author's placeholder, with where it is (`rai:dataBiases[1]`)."""
    if isinstance(value, str):
        return [(where, value)] if value.startswith(PLACEHOLDER) else []
    if isinstance(value, dict):
        return [found for key, item in value.items()
                for found in placeholders_in(item, f"{where}.{key}" if where else key)]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in placeholders_in(item, f"{where}[{index}]")]
    return []
