"""Reading parallel and monolingual text (files, TSV, parquet, local HF datasets): validation, streaming, shards.

Every reader yields `(line number, text…)` one row at a time, so a 2-million-pair corpus needs no more memory
than one line. Files are read as bytes and split on `\\n` only (Europarl holds U+2028 and stray `\\r` inside
lines, which text-mode reading would treat as line breaks and so misalign the two sides). Rows with an empty or
whitespace-only side are dropped and counted; invalid UTF-8 is an error naming the file and line, or, with
`encoding_errors="replace"`, replaced and counted.

`ParallelInput.shards` and `line_shards` cut an input into runs of rows that any process seeing the files reads
alone (a task on a Dask worker), located by one pass over the bytes, so shards read in any order give the rows,
numbers and counts of one sequential read.
"""

from __future__ import annotations

import codecs

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator, Literal

from benchbuild.errors import BenchbuildError
from benchbuild.progress import quiet_datasets

EncodingErrors = Literal["strict", "replace"]
ENCODING_ERRORS: tuple[str, ...] = ("strict", "replace")
_CHUNK = 1 << 20


@dataclass
class CorpusStats:
    """Counts a reader keeps for the data card.

    `pairs_read` counts every row read, including the dropped ones; `empty_dropped` the rows dropped because a
    side was empty or whitespace-only; `replaced_characters_lines` the rows in which invalid UTF-8 was replaced.
    """

    pairs_read: int = 0
    empty_dropped: int = 0
    replaced_characters_lines: int = 0

    @property
    def pairs_kept(self) -> int:
        return self.pairs_read - self.empty_dropped


def count_lines(path: str | Path) -> int:
    """Number of lines of a file (a last line without a final newline counts), counted on raw bytes in chunks."""
    path = existing_file(path)
    lines = 0
    last = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk
    if last and not last.endswith(b"\n"):
        lines += 1
    return lines


def check_aligned(source: Path, target: Path) -> int:
    """The common line count of two parallel files; an error naming both files and counts when they differ."""
    source_lines, target_lines = count_lines(source), count_lines(target)
    if source_lines != target_lines:
        raise BenchbuildError(f"`{target}` has {target_lines:,} lines but `{source}` has {source_lines:,}: "
                              "the files are not aligned")
    return source_lines


def read_parallel(source: Path, target: Path, *, encoding_errors: EncodingErrors = "strict",
                  stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
    """Stream `(1-based line number, source line, target line)` from two aligned files.

    Alignment is checked (both files counted) when this is called, before the first row is read.
    """
    _check_encoding_errors(encoding_errors)
    check_aligned(Path(source), Path(target))
    return _parallel_rows(Path(source), Path(target), encoding_errors, stats if stats is not None else CorpusStats())


def _parallel_rows(source: Path, target: Path, encoding_errors: str,
                   stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    with open(source, "rb") as source_handle, open(target, "rb") as target_handle:
        numbered = enumerate(zip(source_handle, target_handle, strict=True), start=1)
        yield from _decoded_pairs(numbered, source, target, encoding_errors, stats)


def _decoded_pairs(numbered: Iterable[tuple[int, tuple[bytes, bytes]]], source: Path, target: Path,
                   encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    for number, (source_raw, target_raw) in numbered:
        stats.pairs_read += 1
        source_text, source_replaced = _decode(source_raw, source, number, encoding_errors)
        target_text, target_replaced = _decode(target_raw, target, number, encoding_errors)
        if source_replaced or target_replaced:
            stats.replaced_characters_lines += 1
        if not source_text.strip() or not target_text.strip():
            stats.empty_dropped += 1
            continue
        yield number, source_text, target_text


def read_tsv(path: str | Path, *, encoding_errors: EncodingErrors = "strict",
             stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
    """Stream `(line number, source, target)` from a two-column, tab-separated file without quoting.

    A blank line is an empty pair (dropped and counted); a line with another number of columns is an error.
    """
    _check_encoding_errors(encoding_errors)
    path = existing_file(path)
    return _tsv_rows(path, encoding_errors, stats if stats is not None else CorpusStats())


def _tsv_rows(path: Path, encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    with open(path, "rb") as handle:
        yield from _tsv_columns(enumerate(handle, start=1), path, encoding_errors, stats)


def _tsv_columns(numbered: Iterable[tuple[int, bytes]], path: Path, encoding_errors: str,
                 stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    for number, text in _decoded_lines(numbered, path, encoding_errors, stats):
        columns = text.split("\t")
        if len(columns) != 2:
            raise BenchbuildError(f"`{path}` line {number} has {len(columns)} tab-separated columns, "
                                  "expected 2 (source<TAB>target)")
        source_text, target_text = columns
        if not source_text.strip() or not target_text.strip():
            stats.empty_dropped += 1
            continue
        yield number, source_text, target_text


def read_lines(path: str | Path, *, encoding_errors: EncodingErrors = "strict",
               stats: CorpusStats | None = None) -> Iterator[tuple[int, str]]:
    """Stream `(line number, line)` from a monolingual file; empty or whitespace-only lines are dropped and counted."""
    _check_encoding_errors(encoding_errors)
    path = existing_file(path)
    return _monolingual_rows(path, encoding_errors, stats if stats is not None else CorpusStats())


def read_sentences(path: str | Path, what: str, *, encoding_errors: EncodingErrors = "strict") -> list[str]:
    """The non-empty lines of a monolingual corpus that something is compared with (`degree --train-src`, `stats
    --against`); a file without one (0 bytes, or blank lines only) is an error naming it as `what`: compared with
    nothing, every degree is trivially 1 and every n-gram novel."""
    sentences = [text for _, text in read_lines(path, encoding_errors=encoding_errors)]
    if not sentences:
        raise BenchbuildError(f"{what} `{path}` holds no sentence (it is empty or has only blank lines): give a "
                              "corpus with at least one non-empty line")
    return sentences


def _monolingual_rows(path: Path, encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as handle:
        yield from _decoded_lines(enumerate(handle, start=1), path, encoding_errors, stats)


def _decoded_lines(numbered: Iterable[tuple[int, bytes]], path: Path, encoding_errors: str,
                   stats: CorpusStats) -> Iterator[tuple[int, str]]:
    for number, raw in numbered:
        stats.pairs_read += 1
        text, replaced = _decode(raw, path, number, encoding_errors)
        if replaced:
            stats.replaced_characters_lines += 1
        if not text.strip():
            stats.empty_dropped += 1
            continue
        yield number, text


def load_local_hf(name_or_path: str | Path, split: str = "train"):
    """One split of a local Hugging Face dataset: a `save_to_disk` folder, or a folder of data files.

    Nothing can be downloaded here, so a name that is not a local folder is an error saying so.
    """
    import datasets

    path = Path(name_or_path)
    if not path.is_dir():
        raise BenchbuildError(f"`{name_or_path}` is not a local folder: benchbuild reads Hugging Face datasets "
                              "offline only; download the dataset elsewhere (save_to_disk or its data files) "
                              "and pass that folder")
    saved = (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()
    try:
        with quiet_datasets():
            loaded = datasets.load_from_disk(str(path)) if saved else datasets.load_dataset(str(path), split=split)
        if saved:
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise BenchbuildError(f"`{path}` has no split {split!r} (it has: {', '.join(loaded)})")
                return loaded[split]
        return loaded
    except BenchbuildError:
        raise
    except (FileNotFoundError, ValueError) as error:
        raise BenchbuildError(f"`{path}` could not be read as a Hugging Face dataset: {error}") from None


def read_hf(name_or_path: str | Path, source_lang: str, target_lang: str, *, split: str = "train",
            stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
    """Stream `(1-based row number, source, target)` from a local dataset with a `translation` column {lang: text}."""
    dataset = load_local_hf(name_or_path, split)
    if "translation" not in dataset.column_names:
        raise BenchbuildError(f"`{name_or_path}` (split {split!r}) has no `translation` column "
                              f"(columns: {', '.join(dataset.column_names)})")
    return _hf_rows(dataset, str(name_or_path), source_lang, target_lang, stats if stats is not None else CorpusStats())


def _hf_rows(dataset, label: str, source_lang: str, target_lang: str, stats: CorpusStats,
             first: int = 1) -> Iterator[tuple[int, str, str]]:
    batches = (batch["translation"] for batch in dataset.select_columns(["translation"]).iter(batch_size=1000))
    yield from _translation_rows(batches, label, source_lang, target_lang, stats, first)


def _translation_rows(batches: Iterable[list], label: str, source_lang: str, target_lang: str, stats: CorpusStats,
                      first: int = 1) -> Iterator[tuple[int, str, str]]:
    """Rows from batches of `{lang: text}` dicts (a `translation` column), numbered from `first`."""
    number = first - 1
    for batch in batches:
        for translation in batch:
            number += 1
            stats.pairs_read += 1
            pair = translation or {}
            missing = [lang for lang in (source_lang, target_lang) if lang not in pair]
            if missing:
                raise BenchbuildError(f"`{label}` row {number}: the translation has no {missing[0]!r} text "
                                      f"(languages: {', '.join(sorted(pair)) or 'none'})")
            source_text, target_text = pair[source_lang] or "", pair[target_lang] or ""
            if not source_text.strip() or not target_text.strip():
                stats.empty_dropped += 1
                continue
            yield number, source_text, target_text


def read_parquet(path: str | Path, source_lang: str, target_lang: str, *,
                 stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
    """Stream `(1-based row number, source, target)` from a parquet file with a `translation` column {lang: text}
    (as `datasets` writes it) or one string column per language (`de`, `en`)."""
    import pyarrow.parquet as pq

    path = existing_file(path)
    columns = parquet_columns(path, source_lang, target_lang)
    batches = pq.ParquetFile(path).iter_batches(batch_size=1000, columns=columns)
    return _translation_rows((_translations(batch, columns, source_lang, target_lang) for batch in batches),
                             str(path), source_lang, target_lang, stats if stats is not None else CorpusStats())


def parquet_columns(path: Path, source_lang: str, target_lang: str) -> list[str]:
    """The columns holding the pairs of a parquet file: `translation`, or the two language columns."""
    import pyarrow.parquet as pq

    try:
        names = pq.ParquetFile(path).schema_arrow.names
    except Exception as error:  # noqa: BLE001 - pyarrow raises several classes for a file that is not parquet
        raise BenchbuildError(f"`{path}` could not be read as parquet: {error}") from None
    if "translation" in names:
        return ["translation"]
    if source_lang in names and target_lang in names:
        return [source_lang, target_lang]
    raise BenchbuildError(f"`{path}` has neither a `translation` column nor the columns {source_lang!r} and "
                          f"{target_lang!r} (columns: {', '.join(names)})")


def _translations(table, columns: list[str], source_lang: str, target_lang: str) -> list:
    """A record batch or table of a parquet file as `{lang: text}` dicts."""
    if columns == ["translation"]:
        return table.column("translation").to_pylist()
    return [{source_lang: source, target_lang: target} for source, target in
            zip(table.column(source_lang).to_pylist(), table.column(target_lang).to_pylist())]


@dataclass(frozen=True)
class ParallelInput:
    """Where a parallel corpus comes from: two aligned files, one TSV, a local HF dataset or a parquet file
    (exactly one)."""

    source: Path | None = None
    target: Path | None = None
    tsv: Path | None = None
    hf: str | None = None
    source_lang: str = "en"
    target_lang: str = "fr"
    split: str = "train"
    parquet: Path | None = None

    def __post_init__(self) -> None:
        given = [name for name, value in (("--en/--fr", self.source or self.target), ("--tsv", self.tsv),
                                          ("--hf", self.hf), ("--parquet", self.parquet)) if value]
        if len(given) != 1:
            raise BenchbuildError("give exactly one corpus: two aligned files (source and target), a TSV, a "
                                  "local Hugging Face dataset or a parquet file (got "
                                  f"{', '.join(given) if given else 'none'})")
        if (self.source is None) != (self.target is None):
            raise BenchbuildError("two aligned files are needed: give both the source and the target file")

    def validate(self) -> int | None:
        """Check the input before any work (files exist, sides aligned) and return its row count when cheap."""
        if self.source is not None:
            return check_aligned(self.source, self.target)
        if self.tsv is not None:
            return count_lines(self.tsv)
        if self.parquet is not None:
            import pyarrow.parquet as pq

            parquet_columns(existing_file(self.parquet), self.source_lang, self.target_lang)
            return pq.ParquetFile(self.parquet).metadata.num_rows
        return len(load_local_hf(self.hf, self.split))

    def rows(self, *, encoding_errors: EncodingErrors = "strict",
             stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
        """Stream `(line or row number, source, target)`."""
        if self.source is not None:
            return read_parallel(self.source, self.target, encoding_errors=encoding_errors, stats=stats)
        if self.tsv is not None:
            return read_tsv(self.tsv, encoding_errors=encoding_errors, stats=stats)
        if self.parquet is not None:
            return read_parquet(self.parquet, self.source_lang, self.target_lang, stats=stats)
        return read_hf(self.hf, self.source_lang, self.target_lang, split=self.split, stats=stats)

    def files(self) -> dict[str, Path]:
        """The input files or folder by label, for the BuildInfo's fingerprints."""
        if self.source is not None:
            return {self.source.name: self.source, self.target.name: self.target}
        if self.tsv is not None:
            return {self.tsv.name: self.tsv}
        if self.parquet is not None:
            return {self.parquet.name: self.parquet}
        return {Path(self.hf).name or str(self.hf): Path(self.hf)}

    def shards(self, rows: int) -> Iterator["CorpusShard"]:
        """The input cut into runs of `rows` rows (the last one shorter; parquet: whole row groups of at least
        `rows` rows), each readable alone by `CorpusShard.rows`, with absolute paths (for a worker elsewhere).
        Validate first: the sides of two files are assumed aligned."""
        corpus = self.absolute()
        if corpus.source is not None:
            for (first, count, source), (_, _, target) in zip(_line_runs(corpus.source, rows),
                                                              _line_runs(corpus.target, rows)):
                yield CorpusShard(corpus, first, count, (source, target))
        elif corpus.tsv is not None:
            for first, count, offset in _line_runs(corpus.tsv, rows):
                yield CorpusShard(corpus, first, count, (offset,))
        elif corpus.parquet is not None:
            import pyarrow.parquet as pq

            metadata = pq.ParquetFile(corpus.parquet).metadata
            first, group, count = 1, 0, 0
            for end in range(1, metadata.num_row_groups + 1):
                count += metadata.row_group(end - 1).num_rows
                if count >= rows or end == metadata.num_row_groups:
                    if count:
                        yield CorpusShard(corpus, first, count, (group, end))
                    first, group, count = first + count, end, 0
        else:
            total = len(_cached_hf(corpus.hf, corpus.split))
            for first in range(1, total + 1, rows):
                yield CorpusShard(corpus, first, min(rows, total - first + 1), ())

    def absolute(self) -> "ParallelInput":
        """The same input with absolute paths."""
        absolute = {name: Path(value).resolve() for name in ("source", "target", "tsv", "parquet")
                    if (value := getattr(self, name)) is not None}
        if self.hf is not None:
            absolute["hf"] = str(Path(self.hf).resolve())
        return replace(self, **absolute)


@dataclass(frozen=True)
class CorpusShard:
    """Rows `first` … `first + count − 1` (1-based) of a parallel input, and where they start: the byte offset of
    row `first` in each text file, or the first and end row group of a parquet file."""

    corpus: ParallelInput
    first: int
    count: int
    where: tuple[int, ...]

    def rows(self, *, encoding_errors: EncodingErrors = "strict",
             stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
        """Stream this shard's `(row number, source, target)` as `ParallelInput.rows` gives them."""
        _check_encoding_errors(encoding_errors)
        stats = stats if stats is not None else CorpusStats()
        corpus, numbers = self.corpus, range(self.first, self.first + self.count)
        if corpus.source is not None:
            sides = zip(_raw_lines(corpus.source, self.where[0], self.count),
                        _raw_lines(corpus.target, self.where[1], self.count), strict=True)
            return _decoded_pairs(zip(numbers, sides), corpus.source, corpus.target, encoding_errors, stats)
        if corpus.tsv is not None:
            return _tsv_columns(zip(numbers, _raw_lines(corpus.tsv, self.where[0], self.count)), corpus.tsv,
                                encoding_errors, stats)
        if corpus.parquet is not None:
            import pyarrow.parquet as pq

            columns = parquet_columns(corpus.parquet, corpus.source_lang, corpus.target_lang)
            table = pq.ParquetFile(corpus.parquet).read_row_groups(range(*self.where), columns=columns)
            translations = _translations(table, columns, corpus.source_lang, corpus.target_lang)
            return _translation_rows([translations], str(corpus.parquet), corpus.source_lang, corpus.target_lang,
                                     stats, self.first)
        rows = _cached_hf(corpus.hf, corpus.split).select(range(self.first - 1, self.first - 1 + self.count))
        return _hf_rows(rows, corpus.hf, corpus.source_lang, corpus.target_lang, stats, self.first)


@dataclass(frozen=True)
class LineShard:
    """Lines `first` … `first + count − 1` (1-based) of a text file; line `first` starts at byte `offset`."""

    path: Path
    first: int
    count: int
    offset: int

    def texts(self, encoding_errors: EncodingErrors = "strict") -> list[str]:
        """Every line of the shard decoded, empty ones included (`""` or whitespace), in order."""
        _check_encoding_errors(encoding_errors)
        return [_decode(raw, self.path, number, encoding_errors)[0]
                for number, raw in enumerate(_raw_lines(self.path, self.offset, self.count), start=self.first)]


def line_shards(path: str | Path, lines: int) -> Iterator[LineShard]:
    """A text file cut into runs of `lines` lines (the last one shorter), each readable alone, in order."""
    path = existing_file(path).resolve()
    for first, count, offset in _line_runs(path, lines):
        yield LineShard(path, first, count, offset)


def _line_runs(path: Path, every: int) -> Iterator[tuple[int, int, int]]:
    """Runs of `every` lines of a file (the last one shorter), as (first line, line count, byte offset of the first
    line), in one pass over its bytes; a last line without a final newline counts, as in `count_lines`."""
    import numpy as np

    size = path.stat().st_size
    newlines = 0  # line breaks before the current chunk
    first, offset = 1, 0  # the run being scanned
    last = b""
    with open(path, "rb") as handle:
        base = 0
        while chunk := handle.read(_CHUNK):
            breaks = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            # Line k·every + 1 starts after the (k·every)-th line break.
            for position in breaks[(-newlines - 1) % every::every].tolist():
                if base + position + 1 < size:
                    yield first, every, offset
                    first, offset = first + every, base + position + 1
            newlines += len(breaks)
            base += len(chunk)
            last = chunk[-1:]
    if size:
        yield first, newlines + (last != b"\n") - first + 1, offset


def _raw_lines(path: Path, offset: int, count: int) -> list[bytes]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        return [handle.readline() for _ in range(count)]


@functools.lru_cache(maxsize=4)
def _cached_hf(path: str, split: str):
    """One split of a local HF dataset, opened once per process (its shards are memory-mapped slices of it)."""
    return load_local_hf(path, split)


def existing_file(path: str | Path) -> Path:
    """`path` as a Path, when it is an existing file; else the one-line error naming it."""
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"`{path}` does not exist or is not a file")
    return path


def _check_encoding_errors(encoding_errors: str) -> None:
    if encoding_errors not in ENCODING_ERRORS:
        raise BenchbuildError(f"unknown encoding_errors {encoding_errors!r}: choose strict or replace")


def _decode(raw: bytes, path: Path, number: int, encoding_errors: str) -> tuple[str, bool]:
    """A line's text without its line break (and, on line 1, without a UTF-8 byte-order mark, which is not text),
    and whether invalid bytes were replaced."""
    if number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError as error:
        if encoding_errors == "strict":
            raise BenchbuildError(f"`{path}` line {number} is not valid UTF-8 (byte 0x{raw[error.start]:02x} at "
                                  f"byte offset {error.start}): fix the file or pass --encoding-errors replace") from None
        return raw.decode("utf-8", errors="replace"), True
