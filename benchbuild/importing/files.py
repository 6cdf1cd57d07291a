"""Reading one split of an imported benchmark as an Arrow table with named columns, every row in file order: aligned
text files (one column each, named by its suffix), a TSV, JSON Lines, parquet, a local Hugging Face dataset, or one
file of `IN: source OUT: target` lines (SCAN's format, which 002's English-French files share).

The text readers are `benchbuild.corpus`'s (lines split on `\\n` only, invalid UTF-8 named by file and line); unlike
a corpus reader, a split reader keeps empty lines, so row i of an evaluation split is line i of the published file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pyarrow as pa

from benchbuild.corpus import count_lines, existing_file, line_shards, load_local_hf
from benchbuild.errors import BenchbuildError

TABLE_SUFFIXES = {".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}
_SHARD_LINES = 1 << 16


@dataclass(frozen=True)
class PublishedCount:
    """The line count of a published split's files, and what they are (for the messages and the card)."""

    lines: int
    what: str


@dataclass(frozen=True)
class SplitFiles:
    """Where one split comes from: its name and its files (two or more aligned text files, or one table file or
    dataset folder). `published` is what a layout expects of them (a line count and what the file is), when a layout
    found them; None for files given with `--split` or `--hf`."""

    name: str
    paths: tuple[Path, ...]
    published: PublishedCount | None = None
    hf_split: str | None = None
    in_out: bool = False  # one file of `IN: … OUT: …` lines (a layout says so)

    @property
    def kind(self) -> str:
        """text, tsv, jsonl, parquet, hf or in_out."""
        if self.in_out:
            return "in_out"
        if self.hf_split is not None or (len(self.paths) == 1 and self.paths[0].is_dir()):
            return "hf"
        if len(self.paths) > 1:
            return "text"
        return TABLE_SUFFIXES.get(self.paths[0].suffix.lower(), "unknown")

    def label(self) -> str:
        return ", ".join(f"`{path.name}`" for path in self.paths)


def parse_split(text: str) -> SplitFiles:
    """`NAME=FILE[,FILE...]` as a SplitFiles (nothing is read)."""
    name, sep, files = text.partition("=")
    name, parts = name.strip(), [part.strip() for part in files.split(",")]
    if not sep or not name or not all(parts):
        raise BenchbuildError(f"--split {text!r}: expected NAME=FILE[,FILE...], e.g. --split train=train.de,train.en")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise BenchbuildError(f"--split {text!r}: the split name {name!r} must be a plain name (letters, digits, _ "
                              "and -), e.g. train, validation, test, cg_test")
    return SplitFiles(name, tuple(map(Path, parts)))


def text_column_names(paths: Sequence[Path]) -> list[str]:
    """The column each aligned text file becomes: its suffix (`train.de` -> `de`, `cg-test.compound` -> `compound`)."""
    names = [path.suffix[1:] or path.name for path in paths]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise BenchbuildError(f"{', '.join(f'`{path}`' for path in paths)}: two files would both become column "
                              f"{repeated[0]!r} (a text file's column is named by its suffix): rename one")
    return names


def check_files(split: SplitFiles) -> int | None:
    """Check a split's files before anything is read: they exist, are of a known kind, text files are aligned (and
    as long as the published ones, when a layout found them). Returns the line count of text files."""
    kind = split.kind
    if kind == "hf":
        if not split.paths[0].is_dir():
            raise BenchbuildError(f"split {split.name}: `{split.paths[0]}` is not a folder")
        return None
    for path in split.paths:
        existing_file(path)
    if kind == "unknown":
        raise BenchbuildError(f"split {split.name}: `{split.paths[0]}` is one file but not a .tsv, .jsonl or "
                              ".parquet file: give two aligned text files (source, target), a table file or a "
                              "dataset folder")
    if kind not in ("text", "in_out"):
        return None
    if kind == "in_out" and len(split.paths) != 1:
        raise BenchbuildError(f"split {split.name}: {split.label()}: this layout's splits are one file of "
                              "`IN: source OUT: target` lines each")
    if kind == "text":
        text_column_names(split.paths)
    counts = {path: count_lines(path) for path in split.paths}
    first, lines = next(iter(counts.items()))
    for path, count in counts.items():
        if count != lines:
            raise BenchbuildError(f"split {split.name}: `{path}` has {count:,} lines but `{first}` has {lines:,}: "
                                  "the files are not aligned")
    if split.published is not None and lines != split.published.lines:
        shorter = "fewer" if lines < split.published.lines else "more"
        raise BenchbuildError(f"split {split.name}: {split.label()} have {lines:,} lines, {shorter} than the "
                              f"{split.published.lines:,} of {split.published.what}: they are truncated or not the "
                              f"published files (other files go in with --split NAME=FILES)")
    if lines == 0:
        raise BenchbuildError(f"split {split.name}: {split.label()} are empty")
    return lines


def check_splits(splits: Sequence[SplitFiles], prefix: str = "") -> None:
    """`check_files` for every split: one error naming every split's problem, before any is read."""
    problems = []
    for split in splits:
        try:
            check_files(split)
        except BenchbuildError as error:
            problems.append(str(error))
    if problems:
        raise BenchbuildError(prefix + "; ".join(problems))


def read_split(split: SplitFiles, *, columns: list[str] | None = None, header: bool = False,
               encoding_errors: str = "strict") -> pa.Table:
    """The rows of a split in file order, as a table of named columns; `columns` names a TSV's columns, `header`
    reads them from its first line (default: source, target)."""
    kind = split.kind
    if kind == "text":
        names = text_column_names(split.paths)
        return pa.table({name: pa.array(_lines(path, encoding_errors), pa.string())
                         for name, path in zip(names, split.paths)})
    if kind == "hf":
        return _hf_table(split)
    path = split.paths[0]
    if kind == "in_out":
        return _in_out_table(path, encoding_errors)
    if kind == "tsv":
        return _tsv_table(path, columns, header, encoding_errors)
    if kind == "jsonl":
        return _jsonl_table(path, encoding_errors)
    return _parquet_table(path)


def _lines(path: Path, encoding_errors: str) -> list[str]:
    """Every line of a text file, empty ones included, without its line break."""
    return [text for shard in line_shards(path, _SHARD_LINES) for text in shard.texts(encoding_errors)]


def _tsv_table(path: Path, columns: list[str] | None, header: bool, encoding_errors: str) -> pa.Table:
    lines = _lines(path, encoding_errors)
    first = 1
    if header:
        if not lines:
            raise BenchbuildError(f"`{path}` is empty: --header expects a first line naming the columns")
        columns, lines, first = lines[0].split("\t"), lines[1:], 2
        if not all(name.strip() for name in columns) or len(set(columns)) != len(columns):
            raise BenchbuildError(f"`{path}` line 1 (--header) must name each column once: {columns!r}")
    names = columns or ["source", "target"]
    values: list[list[str]] = [[] for _ in names]
    for number, line in enumerate(lines, start=first):
        fields = line.split("\t")
        if len(fields) != len(names):
            hint = ("" if columns else ": name the columns with --columns (COGS: --columns source,target,type) or "
                    "read them from a first line with --header")
            raise BenchbuildError(f"`{path}` line {number} has {len(fields)} tab-separated columns, expected "
                                  f"{len(names)} ({', '.join(names)}){hint}")
        for column, value in zip(values, fields):
            column.append(value)
    return pa.table({name: pa.array(column, pa.string()) for name, column in zip(names, values)})


def _in_out_table(path: Path, encoding_errors: str) -> pa.Table:
    """`IN: source OUT: target` lines as `source` and `target`: each side's words joined by one space, as 002's
    data.py (MTDataset, ScanDataset) reads them; a line without exactly one `IN:` first and one `OUT:` after it is
    refused by number."""
    sources, targets = [], []
    for number, line in enumerate(_lines(path, encoding_errors), start=1):
        words = line.split()
        if not words or words[0] != "IN:" or words.count("IN:") != 1 or words.count("OUT:") != 1:
            raise BenchbuildError(f"`{path}` line {number} is not an `IN: source OUT: target` line: {line[:60]!r}")
        middle = words.index("OUT:")
        sources.append(" ".join(words[1:middle]))
        targets.append(" ".join(words[middle + 1:]))
    return pa.table({"source": pa.array(sources, pa.string()), "target": pa.array(targets, pa.string())})


def _jsonl_table(path: Path, encoding_errors: str) -> pa.Table:
    rows = []
    for number, line in enumerate(_lines(path, encoding_errors), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise BenchbuildError(f"`{path}` line {number} is not JSON ({error.args[0] if error.args else error})") \
                from None
        if not isinstance(row, dict):
            raise BenchbuildError(f"`{path}` line {number} is a JSON {type(row).__name__}, not an object with named "
                                  "columns")
        rows.append(row)
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise BenchbuildError(f"`{path}`: a column holds values of different types ({error})") from None


def _parquet_table(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several classes for a file that is not parquet
        raise BenchbuildError(f"`{path}` could not be read as parquet: {' '.join(str(error).split())}") from None


def _hf_table(split: SplitFiles) -> pa.Table:
    dataset = load_local_hf(split.paths[0], split.hf_split or split.name)
    if dataset._indices is not None:
        dataset = dataset.flatten_indices()
    return dataset.data.table


def hf_split_names(path: Path) -> list[str]:
    """The split names of a local Hugging Face dataset folder: a `save_to_disk` DatasetDict, or a folder of data
    files (`train.jsonl`, `data/test-00000-of-00001.parquet`, …)."""
    import datasets

    from benchbuild.progress import quiet_datasets

    if not path.is_dir():
        raise BenchbuildError(f"--hf `{path}` is not a local folder: benchbuild reads Hugging Face datasets offline "
                              "only; save the dataset elsewhere (save_to_disk or its data files) and pass that folder")
    if (path / "state.json").is_file():
        raise BenchbuildError(f"--hf `{path}` holds one dataset, not named splits: import it with --split NAME={path}")
    try:
        with quiet_datasets():
            loaded = (datasets.load_from_disk(str(path)) if (path / "dataset_dict.json").is_file()
                      else datasets.load_dataset(str(path)))
    except (FileNotFoundError, ValueError) as error:
        raise BenchbuildError(f"--hf `{path}` could not be read as a Hugging Face dataset: {error}") from None
    return list(loaded)
