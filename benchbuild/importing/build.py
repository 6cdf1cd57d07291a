"""Imported split files as a `Benchmark`: each split's rows mapped to `id`/`source`/`target` (its other columns kept),
checked against the metrics it declares, filed under a family and name, with the facts its card states.

Everything is read and checked before the CLI saves anything: a refusal leaves no folder behind.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.cter import Lexicon, check_compound_groups, parse_compound, read_lexicon
from benchbuild.importing.files import SplitFiles, check_splits, hf_split_names, parse_split, read_split
from benchbuild.importing.layouts import LAYOUTS, Layout, find_lexicon, locate
from benchbuild.importing.parameters import DEFAULT_FAMILY, ImportParameters

CARD_TEMPLATE = "imported.md.j2"
# The columns a metric reads, beside `source` and `target` (`benchbuild.evaluation.scoring`).
METRIC_COLUMNS = {"comp": ("fr_noun", "fr_adjective", "order"), "bleu_by_degree": ("degree",)}
# subword-nmt's joiners, as fairseq's --remove-bpe strips them: `@@ ` inside a line, `@@` (and a space) at its end.
BPE_JOINERS = r"@@ |@@ ?$"


def import_benchmark(parameters: ImportParameters, layout_name: str | None, folder: Path | None,
                     default_name: str) -> Benchmark:
    """Read, check and map every split; `default_name` names a generic import without `--name` (the --out folder's
    name)."""
    layout = LAYOUTS[layout_name] if layout_name is not None else None
    splits = split_files(parameters, layout, folder)
    metrics = list(parameters.metric or (layout.metrics if layout else ()))
    lexicon = find_lexicon(layout, folder, parameters.lexicon) if layout is not None else parameters.lexicon
    if "cter" in metrics and lexicon is None:
        raise BenchbuildError("--metric cter needs the lexicon of the atoms' translations: pass --lexicon FILE")
    atoms = read_lexicon(lexicon) if lexicon is not None else None  # a missing or malformed lexicon fails here
    counts: dict[str, int] = {}
    rules: dict[str, str] = {}
    tables = {}
    for split in splits:
        table = read_split(split, columns=parameters.tsv_columns(), header=parameters.header,
                           encoding_errors=parameters.encoding_errors)
        tables[split.name], rules[split.name] = benchmark_table(table, split, parameters, layout, counts)
    degree = add_degree(tables, layout.languages[0]) if layout is not None and layout.degree else None
    check_metrics(tables, metrics, parameters.compound, atoms, lexicon)
    family = parameters.family or (layout.family if layout else DEFAULT_FAMILY)
    name = parameters.name or (layout.benchmark if layout else default_name)
    tsv = any(split.kind == "tsv" for split in splits)
    recorded = {  # what applies to this import; the card's parameter table lists it
        "layout": layout.name if layout else None,
        "splits": {split.name: [path.name for path in split.paths] for split in splits},
        "source_column": parameters.source, "target_column": parameters.target,
        "tsv_columns": parameters.tsv_columns() if tsv else None, "tsv_header": parameters.header if tsv else None,
        "metrics": metrics, "lexicon": str(lexicon) if lexicon is not None else None,
        "compound_column": parameters.compound if "cter" in metrics else None,
        "remove_bpe": "@@ " if layout is not None and layout.remove_bpe else None,
        "degree": degree, "encoding_errors": parameters.encoding_errors,
    }
    recorded = {key: value for key, value in recorded.items() if value is not None}
    inputs: dict[str, Path] = {f"{split.name}:{path.name}": path for split in splits for path in split.paths}
    if lexicon is not None:
        inputs["lexicon"] = lexicon
    info = BuildInfo.with_inputs(family, name, recorded, None, inputs)
    card = CardFacts(
        pretty_name=layout.pretty_name if layout else f"{name} (imported)",
        languages=languages(parameters, layout, splits),
        license=parameters.license or (layout.license if layout else "unknown"),
        summary=layout.summary if layout else "",
        rules=rules, citation=layout.citation if layout else "", counts=counts,
        extra={"metrics": metrics, "lexicon": str(lexicon) if lexicon is not None else "",
               "compound": parameters.compound, "release": layout.release if layout else "",
               "layout": layout.name if layout else ""},
        template=CARD_TEMPLATE,
    )
    return Benchmark.from_splits({split: datasets.Dataset(table) for split, table in tables.items()}, info, card)


def counts_checked(parameters: ImportParameters, layout_name: str | None) -> str:
    """What the import's summary line says of the layout's published line counts: which splits were checked against
    them, and which were given with --split instead (not checked); "" without a layout."""
    if layout_name is None:
        return ""
    given = {parse_split(split).name for split in parameters.split or []}
    published = [split.name for split in LAYOUTS[layout_name].splits]
    checked = [name for name in published if name not in given]
    replaced = [name for name in published if name in given]
    if not replaced:
        return f"the published line counts of {layout_name} checked"
    text = (f"the published line counts of {layout_name} checked for {', '.join(checked)}" if checked
            else f"no published line count of {layout_name} checked")
    return f"{text}; {', '.join(replaced)} given with --split, not checked against them"


def split_files(parameters: ImportParameters, layout: Layout | None, folder: Path | None) -> list[SplitFiles]:
    """Every split's files, checked (exist, aligned, a layout's published counts) before any is read."""
    given = {split.name: split for split in map(parse_split, parameters.split or [])}
    if layout is not None:
        assert folder is not None
        return locate(layout, folder, given)
    splits = list(given.values())
    if parameters.hf is not None:
        splits += [SplitFiles(name, (parameters.hf,), hf_split=name) for name in hf_split_names(parameters.hf)
                   if name not in given]
    check_splits(splits)
    return splits


def benchmark_table(table: pa.Table, split: SplitFiles, parameters: ImportParameters, layout: Layout | None,
                    counts: dict[str, int]) -> tuple[pa.Table, str]:
    """A split's rows as `id`, `source`, `target` and its other columns, and the card's sentence on where they come
    from. Pairs with an empty side are dropped from train (as every build drops them) and kept elsewhere, so row i
    of an evaluation split is row i of its file, as other systems' outputs are."""
    where = f"split {split.name} ({split.label()})"
    if table.num_rows == 0:
        raise BenchbuildError(f"{where} holds no rows")
    text_files = split.kind == "text"
    source_name = parameters.source or ("source" if not text_files else table.column_names[0])
    target_name = parameters.target or ("target" if not text_files else table.column_names[1])
    source, target = (_text_column(table, name, where) for name in (source_name, target_name))
    used = {source_name, target_name, "id"} | ({"translation"} if source_name not in table.column_names else set())
    for reserved, chosen in (("source", source_name), ("target", target_name)):
        if reserved in table.column_names and reserved not in used:
            raise BenchbuildError(f"{where}: its column {reserved!r} is not the one read as {reserved} ({chosen!r}): "
                                  f"rename it, or read it with --{reserved} {reserved}")
    rows = table.num_rows
    counts[f"{split.name}: rows read"] = rows
    notes = []
    if layout is not None and layout.remove_bpe:
        joined = sum(pc.sum(pc.match_substring(column, "@@")).as_py() or 0 for column in (source, target))
        source, target = (pc.replace_substring_regex(column, BPE_JOINERS, "") for column in (source, target))
        counts[f"{split.name}: sides with subword-nmt joiners removed"] = joined
        if joined:
            notes.append(f"subword-nmt joiners (`@@ `) removed from {joined:,} sides")
    numbers = pa.array(range(1, rows + 1), pa.int64())
    ids = (pc.cast(table.column("id"), pa.string()) if "id" in table.column_names else None)
    extras = {name: table.column(name) for name in table.column_names if name not in used}
    empty = pc.or_(_blank(source), _blank(target))
    empty_rows = pc.sum(empty).as_py() or 0
    if split.name == "train":
        keep = pc.invert(empty)
        source, target, numbers = source.filter(keep), target.filter(keep), numbers.filter(keep)
        ids = ids.filter(keep) if ids is not None else None
        extras = {name: column.filter(keep) for name, column in extras.items()}
        counts[f"{split.name}: pairs with an empty side dropped"] = empty_rows
        notes.append(f"pairs with an empty side dropped: {empty_rows:,}" if empty_rows else "no pair has an empty side")
        if empty_rows == rows:
            raise BenchbuildError(f"{where}: every pair has an empty side: no training row is left")
    else:
        counts[f"{split.name}: rows with an empty side (kept)"] = empty_rows
        notes.append("every row kept, in file order" + (f" ({empty_rows:,} with an empty side)" if empty_rows else ""))
    if ids is None:
        ids = pa.array([f"{split.name}-{number:08d}" for number in numbers.to_pylist()], pa.string())
    mapped = pa.table({"id": ids, "source": source, "target": target, **extras})
    return mapped, _provenance(split, layout, mapped.num_rows, source_name, target_name, list(extras), notes)


def _text_column(table: pa.Table, name: str, where: str) -> pa.ChunkedArray:
    """Column `name` as text (missing values read as empty), or the language `name` of a `translation` column."""
    if name in table.column_names:
        column = table.column(name)
    elif "translation" in table.column_names and pa.types.is_struct(table.schema.field("translation").type) \
            and table.schema.field("translation").type.get_field_index(name) >= 0:
        column = pc.struct_field(table.column("translation"), name)
    else:
        raise BenchbuildError(f"{where} has no column {name!r} (columns: {', '.join(table.column_names)}): name its "
                              "source and target columns with --source and --target")
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise BenchbuildError(f"{where}: column {name!r} holds {column.type}, not text")
    return pc.fill_null(pc.cast(column, pa.string()), "")


def _blank(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.equal(pc.utf8_trim_whitespace(column), "")


def _provenance(split: SplitFiles, layout: Layout | None, rows: int, source: str, target: str, extras: list[str],
                notes: list[str]) -> str:
    """The card's sentence for one split: its files, whether they are the published ones, its columns and rows."""
    published = next((p for p in layout.splits if p.name == split.name), None) if layout is not None else None
    if split.hf_split is not None:
        origin = f"split `{split.hf_split}` of the Hugging Face dataset folder `{split.paths[0].name}`"
    elif split.published is not None:
        origin = (f"{split.label()}: {split.published.what}, {split.published.lines:,} lines as published "
                  "(count checked)")
    elif published is not None:
        origin = (f"{split.label()}, given with --split in place of {published.what}, whose {published.lines:,} "
                  "published lines they are not checked against")
    else:
        origin = f"{split.label()}, given with --split"
    columns = f"source ← `{source}`, target ← `{target}`" + (
        f"; kept: {', '.join(f'`{name}`' for name in extras)}" if extras else "")
    return f"{origin}; {columns}; {rows:,} rows; " + "; ".join(notes)


def check_metrics(tables: dict[str, pa.Table], metrics: Sequence[str], compound: str, atoms: Lexicon | None,
                  lexicon: Path | None) -> None:
    """Refuse declared metrics the splits cannot be scored with: CTER needs a compound column whose every compound
    the lexicon parses, 5 consecutive rows per compound; COMP and BLEU by degree their columns."""
    for metric, needed in METRIC_COLUMNS.items():
        if metric in metrics and not any(all(column in table.column_names for column in needed)
                                         for table in tables.values()):
            raise BenchbuildError(f"--metric {metric} needs the column(s) {', '.join(needed)} in a split; the "
                                  f"splits have: {_columns(tables)}")
    if "cter" not in metrics:
        return
    assert atoms is not None
    scored = [name for name, table in tables.items() if compound in table.column_names]
    if not scored:
        raise BenchbuildError(f"--metric cter needs each row's compound: no split has a {compound!r} column "
                              f"(--compound names it; the splits have: {_columns(tables)})")
    for name in scored:
        values = [" ".join(str(value or "").split()) for value in tables[name].column(compound).to_pylist()]
        parsed: set[str] = set()
        for number, value in enumerate(values, start=1):
            if value not in parsed:
                try:
                    parse_compound(value, atoms)
                except ValueError as error:
                    raise BenchbuildError(f"split {name}, row {number}: {error} (lexicon `{lexicon}`)") from None
                parsed.add(value)
        try:
            check_compound_groups(values)
        except BenchbuildError as error:
            raise BenchbuildError(f"split {name}: {error}") from None


def _columns(tables: dict[str, pa.Table]) -> str:
    return "; ".join(f"{name}: {', '.join(table.column_names)}" for name, table in tables.items())


def add_degree(tables: dict[str, pa.Table], language: str) -> dict[str, Any]:
    """Give every split a `degree` column: each source's compositional degree w.r.t. the train sources (001 §4, with
    `degree`'s defaults), as `build-react` does, so `eval` reports BLEU by degree bucket. Returns the parameters."""
    from benchbuild.react.degree import DegreeScorer
    from benchbuild.react.parameters import DegreeParameters

    degree = DegreeParameters(lang=language)
    scorer = DegreeScorer(tables["train"].column("source").to_pylist(), degree)
    for name, table in tables.items():
        values = scorer.degree_of(table.column("source").to_pylist())
        tables[name] = table.append_column("degree", pa.array(values.astype("float64"), pa.float64()))
    return {"against": "train sources", "min_ngram_count": degree.min_ngram_count, "max_ngram": degree.max_ngram,
            "lowercase": degree.lowercase, "tokenize": degree.tokenize}


def languages(parameters: ImportParameters, layout: Layout | None, splits: Sequence[SplitFiles]) -> list[str]:
    """The card's languages: `--source-lang`/`--target-lang`, else the layout's, else the text files' suffixes when
    they read as language codes (`de`, `en`)."""
    guessed: list[str | None] = [None, None]
    if layout is not None:
        guessed = list(layout.languages)
    else:
        text = next((split for split in splits if split.kind == "text"), None)
        if text is not None and parameters.source is None and parameters.target is None:
            guessed = [suffix if re.fullmatch(r"[a-z]{2,3}", suffix) else None
                       for suffix in (path.suffix[1:] for path in text.paths[:2])]
    chosen = [parameters.source_lang or guessed[0], parameters.target_lang or guessed[1]]
    return list(dict.fromkeys(language for language in chosen if language))
