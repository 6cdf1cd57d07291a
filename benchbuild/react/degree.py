"""Stage 4 of ReaCT: the compositional degree of a sentence w.r.t. a training corpus (001 §4, Table 1).

degree = (minimum number of dictionary n-grams whose concatenation is the sentence) / (its length in tokens),
a token outside the dictionary counting as one piece of its own.

Greedy longest match from the left is optimal because the dictionary (plus all single tokens) is closed under
substrings. Let f(i) be the fewest pieces covering tokens i… of a sentence. Dropping the first token of the first
piece of an optimal cover of i… gives a cover of i+1… (the shortened piece is a substring, hence a piece, or
empty), so f(i+1) ≤ f(i): f never increases. From i, any piece ends at some j ≤ i + longest(i), and
f(i + longest(i)) ≤ f(j), so taking the longest piece is never worse. `longest_match` finds those lengths for all
positions at once; the jumps are then followed for all sentences at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from benchbuild.corpus import LineShard, line_shards
from benchbuild.engine import Engine, LocalEngine
from benchbuild.errors import BenchbuildError
from benchbuild.react.ngrams import EncodedLines, NgramDictionary, Vocabulary
from benchbuild.react.parameters import DegreeParameters
from benchbuild.progress import progress_bar

CHUNK_LINES = 65_536


def greedy_pieces(longest: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per line: the number of jumps i → i + longest[i] from the line's first token to its end."""
    pointer = offsets[:-1].copy()
    ends = offsets[1:]
    pieces = np.zeros(len(pointer), dtype=np.int64)
    active = np.flatnonzero(pointer < ends)
    while active.size:
        moved = pointer[active] + longest[pointer[active]]
        pointer[active] = moved
        pieces[active] += 1
        active = active[moved < ends[active]]
    return pieces


def compositional_degree(encoded: EncodedLines, dictionary: NgramDictionary) -> np.ndarray:
    """Per line: minimum pieces / tokens (NaN for an empty line)."""
    pieces = greedy_pieces(dictionary.longest_match(encoded), encoded.offsets)
    lengths = encoded.lengths
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lengths > 0, pieces / np.maximum(lengths, 1), np.nan)


@dataclass
class DegreeScores:
    """Per pool line: kept by the OOV filter, and its degree (NaN where dropped or empty)."""

    in_vocabulary: np.ndarray
    degree: np.ndarray


class DegreeScorer:
    """Stages 1–4 against one training corpus: normalize, OOV-filter and score any number of pool lines."""

    def __init__(self, train_source: Sequence[str], parameters: DegreeParameters = DegreeParameters(),
                 normalized: bool = False) -> None:
        self.parameters = parameters
        self.normalizer = parameters.normalizer()
        lines = list(train_source) if normalized else self.normalizer.for_splitting(list(train_source))
        self.vocabulary = Vocabulary.from_lines(lines)
        self.dictionary = NgramDictionary.build(self.vocabulary, self.vocabulary.encode(lines),
                                                min_count=parameters.min_ngram_count,
                                                max_order=parameters.max_ngram)

    def score(self, lines: Sequence[str], normalized: bool = False) -> DegreeScores:
        """Scores of a batch of pool lines (raw unless `normalized`)."""
        if not normalized:
            lines = self.normalizer.for_splitting(lines)
        encoded = self.vocabulary.encode(lines)
        kept = self.vocabulary.in_vocabulary(encoded, self.parameters.min_word_count) & (encoded.lengths > 0)
        degree = compositional_degree(encoded, self.dictionary)
        degree[~kept] = np.nan
        return DegreeScores(kept, degree)

    def degree_of(self, lines: Sequence[str], normalized: bool = False) -> np.ndarray:
        """Degree of every line, without the OOV filter (for training and test splits and `stats`)."""
        if not normalized:
            lines = self.normalizer.for_splitting(lines)
        return compositional_degree(self.vocabulary.encode(lines), self.dictionary)


def write_degree_table(train_source: str | Path, pool: str | Path | Sequence[str | Path], out: str | Path | None,
                       parameters: DegreeParameters = DegreeParameters(), overwrite: bool = False,
                       progress: bool = False, encoding_errors: str = "strict",
                       engine: Engine | None = None) -> dict[str, int]:
    """`benchbuild degree`: a TSV (`line`, `degree`) with one row per pool line, in order, to `out` or stdout.

    `pool` is one file or several, read one after another as if concatenated: rows are numbered through all of
    them. `degree` is empty for a line the OOV filter drops (or an empty line). Each file is scored in shards of
    `CHUNK_LINES` lines (a shard never spans two files), as tasks of `engine` (default: this process), each reading
    its own lines from its file, against the one scorer shared with every worker; rows are written in pool order,
    so the bytes do not depend on the engine, and memory holds the scorer and a few shards whatever the pool's
    length. Returns counts (of all files) for the summary line.
    """
    from benchbuild.atomic import atomic_file, check_writable
    from benchbuild.corpus import count_lines, existing_file, read_sentences

    engine = engine if engine is not None else LocalEngine()
    pools = [Path(pool)] if isinstance(pool, (str, os.PathLike)) else [Path(path) for path in pool]
    if not pools:
        raise BenchbuildError("give at least one pool file")
    if out is not None:
        check_writable(Path(out), overwrite)
    existing_file(train_source)  # every input is checked before any is read, the training corpus first
    total = sum(count_lines(path) for path in pools)
    scorer = DegreeScorer(read_sentences(train_source, "--train-src", encoding_errors=encoding_errors), parameters)
    counts = {"lines": 0, "scored": 0}
    # A file is written beside `out` and renamed at the end: a killed run leaves the old table whole.
    with (atomic_file(out) if out is not None else contextlib.nullcontext(sys.stdout)) as target:
        target.write("line\tdegree\n")
        with progress_bar("compositional degree", total, progress) as advance:
            shared = (engine.share(scorer), encoding_errors)
            for rows, lines, scored in engine.map(degree_rows, pool_shards(pools), shared=shared):
                target.write(rows)
                counts["lines"] += lines
                counts["scored"] += scored
                advance(amount=lines)
    counts["dropped"] = counts["lines"] - counts["scored"]
    return counts


def pool_shards(pools: Sequence[Path]) -> Iterator[tuple[LineShard, int]]:
    """Every pool file's shards of `CHUNK_LINES` lines, file after file, each with the row number its first line
    takes in the files' concatenation."""
    before = 0  # lines in the files already cut
    for path in pools:
        lines = 0
        for shard in line_shards(path, CHUNK_LINES):
            yield shard, before + shard.first
            lines = shard.first + shard.count - 1
        before += lines


def degree_rows(numbered: tuple[LineShard, int], scorer: DegreeScorer, encoding_errors: str) -> tuple[str, int, int]:
    """One task of `degree`: the TSV rows of a shard of pool lines, numbered from the row number given with it
    (every line, an empty cell where the OOV filter drops it or it is empty), how many lines, and how many were
    scored."""
    shard, first_row = numbered
    texts = [text if text.strip() else "" for text in shard.texts(encoding_errors)]  # type: ignore[arg-type]
    scores = scorer.score(texts)
    rows = "".join(f"{number}\t{'' if degree != degree else format(degree, '.6f')}\n"
                   for number, degree in enumerate(scores.degree.tolist(), start=first_row))
    return rows, len(texts), int(scores.in_vocabulary.sum())
