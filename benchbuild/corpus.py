"""Reading parallel and monolingual text (files, TSV, local HF datasets): validation and streaming.

Every reader yields `(line number, text…)` one row at a time, so a 2-million-pair corpus needs no more memory
than one line. Files are read as bytes and split on `\\n` only (Europarl holds U+2028 and stray `\\r` inside
lines, which text-mode reading would treat as line breaks and so misalign the two sides). Rows with an empty or
whitespace-only side are dropped and counted; invalid UTF-8 is an error naming the file and line, or, with
`encoding_errors="replace"`, replaced and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

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
    path = _existing_file(path)
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
        for number, (source_raw, target_raw) in enumerate(zip(source_handle, target_handle, strict=True), start=1):
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
    path = _existing_file(path)
    return _tsv_rows(path, encoding_errors, stats if stats is not None else CorpusStats())


def _tsv_rows(path: Path, encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    for number, text in _monolingual_rows(path, encoding_errors, stats):
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
    path = _existing_file(path)
    return _monolingual_rows(path, encoding_errors, stats if stats is not None else CorpusStats())


def _monolingual_rows(path: Path, encoding_errors: str, stats: CorpusStats) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
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


def _hf_rows(dataset, label: str, source_lang: str, target_lang: str,
             stats: CorpusStats) -> Iterator[tuple[int, str, str]]:
    number = 0
    for batch in dataset.select_columns(["translation"]).iter(batch_size=1000):
        for translation in batch["translation"]:
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


@dataclass(frozen=True)
class ParallelInput:
    """Where a parallel corpus comes from: two aligned files, one TSV, or a local HF dataset (exactly one)."""

    source: Path | None = None
    target: Path | None = None
    tsv: Path | None = None
    hf: str | None = None
    source_lang: str = "en"
    target_lang: str = "fr"
    split: str = "train"

    def __post_init__(self) -> None:
        given = [name for name, value in (("--en/--fr", self.source or self.target), ("--tsv", self.tsv),
                                          ("--hf", self.hf)) if value]
        if len(given) != 1:
            raise BenchbuildError("give exactly one corpus: two aligned files (source and target), a TSV or a "
                                  f"local Hugging Face dataset (got {', '.join(given) if given else 'none'})")
        if (self.source is None) != (self.target is None):
            raise BenchbuildError("two aligned files are needed: give both the source and the target file")

    def validate(self) -> int | None:
        """Check the input before any work (files exist, sides aligned) and return its row count when cheap."""
        if self.source is not None:
            return check_aligned(self.source, self.target)
        if self.tsv is not None:
            return count_lines(self.tsv)
        return len(load_local_hf(self.hf, self.split))

    def rows(self, *, encoding_errors: EncodingErrors = "strict",
             stats: CorpusStats | None = None) -> Iterator[tuple[int, str, str]]:
        """Stream `(line or row number, source, target)`."""
        if self.source is not None:
            return read_parallel(self.source, self.target, encoding_errors=encoding_errors, stats=stats)
        if self.tsv is not None:
            return read_tsv(self.tsv, encoding_errors=encoding_errors, stats=stats)
        return read_hf(self.hf, self.source_lang, self.target_lang, split=self.split, stats=stats)

    def files(self) -> dict[str, Path]:
        """The input files or folder by label, for the BuildInfo's fingerprints."""
        if self.source is not None:
            return {self.source.name: self.source, self.target.name: self.target}
        if self.tsv is not None:
            return {self.tsv.name: self.tsv}
        return {Path(self.hf).name or str(self.hf): Path(self.hf)}


def _existing_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise BenchbuildError(f"`{path}` does not exist or is not a file")
    return path


def _check_encoding_errors(encoding_errors: str) -> None:
    if encoding_errors not in ENCODING_ERRORS:
        raise BenchbuildError(f"unknown encoding_errors {encoding_errors!r}: choose strict or replace")


def _decode(raw: bytes, path: Path, number: int, encoding_errors: str) -> tuple[str, bool]:
    """A line's text without its line break, and whether invalid bytes were replaced."""
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
