"""Stages 2–3 of ReaCT: the training vocabulary (word counts, the OOV filter) and the n-gram dictionary.

Lines are normalized text (`normalize.Normalizer`); tokens are whitespace-separated and interned to integer ids of
the training vocabulary in Arrow; an n-gram is identified by a 64-bit polynomial rolling hash over random
per-token fingerprints, so n-grams of every length are counted with numpy sorts, level by level.

The dictionary holds every n-gram of the training source occurring at least `min_count` times. It is closed under
substrings (each occurrence of an n-gram contains an occurrence of each of its substrings), so a level-n n-gram can
only be frequent where both (n−1)-grams inside it are: counting level by level touches only those positions.
Distinct n-grams are equal only up to a 64-bit hash collision (probability ≈ N²/2⁶⁵ for N dictionary n-grams).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchbuild.react.hashset import HashSet64

_BASE = np.uint64(0xD6E8FEB86659FD93)
_FINGERPRINT_SEED = 20230601


@dataclass
class EncodedLines:
    """Lines as one flat array of token ids (−1: not in the vocabulary) plus line offsets into it."""

    ids: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def line_of_position(self) -> np.ndarray:
        return np.repeat(np.arange(len(self)), self.lengths)

    def end_of_position(self) -> np.ndarray:
        """For each token position, the offset one past the last token of its line."""
        return np.repeat(self.offsets[1:], self.lengths)


def split_tokens(lines: Sequence[str]) -> tuple[pa.Array, np.ndarray]:
    """All tokens of the lines as one Arrow string array, and the line offsets into it.

    Tokens are exactly Python's `line.split()` (Arrow's whitespace is Python's, runs of it separate once), so raw
    lines need no Python-side whitespace clean-up before they are scored.
    """
    array = pc.utf8_trim_whitespace(pa.array(lines, type=pa.large_string()))
    lists = pc.utf8_split_whitespace(array)
    tokens = lists.flatten()
    lengths = np.asarray(pc.list_value_length(lists), dtype=np.int64)
    empty = np.asarray(pc.equal(array, ""), dtype=bool) if len(array) else np.zeros(0, dtype=bool)
    if empty.any():
        lengths[empty] = 0
        tokens = tokens.filter(pc.not_equal(tokens, ""))
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return tokens, offsets


class Vocabulary:
    """The training source's words with their counts, in order of first occurrence."""

    def __init__(self, words: pa.Array, counts: np.ndarray) -> None:
        self.words = words
        self.counts = np.asarray(counts, dtype=np.int64)
        rng = np.random.default_rng(_FINGERPRINT_SEED)
        # One extra fingerprint for id −1 (a word the training corpus never saw).
        self.fingerprints = rng.integers(0, np.iinfo(np.uint64).max, size=len(words) + 1, dtype=np.uint64,
                                         endpoint=True)

    @classmethod
    def from_lines(cls, lines: Sequence[str]) -> "Vocabulary":
        tokens, _ = split_tokens(lines)
        counted = pc.value_counts(tokens)
        return cls(counted.field("values"), np.asarray(counted.field("counts")))

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, lines: Sequence[str]) -> EncodedLines:
        tokens, offsets = split_tokens(lines)
        ids = pc.fill_null(pc.index_in(tokens, value_set=self.words), -1)
        return EncodedLines(np.asarray(ids, dtype=np.int64), offsets)

    def count_of(self, ids: np.ndarray) -> np.ndarray:
        """Training count of each id (0 for −1)."""
        return np.where(ids >= 0, self.counts[ids], 0)

    def in_vocabulary(self, encoded: EncodedLines, min_word_count: int) -> np.ndarray:
        """Per line: does every word occur at least `min_word_count` times in the training source (the OOV filter)."""
        rare = self.count_of(encoded.ids) < min_word_count
        rare_per_line = np.bincount(encoded.line_of_position(), weights=rare, minlength=len(encoded))
        return rare_per_line == 0


def extend_hashes(hashes: np.ndarray, fingerprints: np.ndarray) -> np.ndarray:
    """The hash of each n-gram extended by one token: h(w₁…wₙ) = h(w₁…wₙ₋₁)·B + f(wₙ) mod 2⁶⁴."""
    return hashes * _BASE + fingerprints


class NgramDictionary:
    """The frequent n-grams of a training corpus, queried for the longest one starting at each position."""

    def __init__(self, vocabulary: Vocabulary, frequent_words: np.ndarray, ngrams: HashSet64,
                 counts_by_order: dict[int, int]) -> None:
        self.vocabulary = vocabulary
        self.frequent_words = frequent_words
        self.ngrams = ngrams
        self.counts_by_order = counts_by_order
        self.max_order = max(counts_by_order, default=0)

    @classmethod
    def build(cls, vocabulary: Vocabulary, encoded: EncodedLines, min_count: int,
              max_order: int | None = None) -> "NgramDictionary":
        """Every n-gram (n ≤ `max_order`, unbounded by default) occurring ≥ `min_count` times in `encoded`."""
        ids, fingerprints = encoded.ids, vocabulary.fingerprints
        frequent_words = np.append(vocabulary.counts >= min_count, False)  # index −1: unseen word
        ends = encoded.end_of_position()
        positions = np.flatnonzero(frequent_words[ids])
        hashes = fingerprints[ids[positions]]
        counts_by_order = {1: int(frequent_words.sum())} if positions.size else {}
        stored = []
        order = 1
        alive = np.zeros(len(ids) + 1, dtype=bool)
        while positions.size and (max_order is None or order < max_order):
            order += 1
            alive[:] = False
            alive[positions] = True
            fits = positions + order - 1 < ends[positions]
            positions, hashes = positions[fits], hashes[fits]
            # The n-gram at i can be frequent only if the (n−1)-grams at i and at i+1 both are.
            inner = alive[positions + 1]
            positions, hashes = positions[inner], hashes[inner]
            hashes = extend_hashes(hashes, fingerprints[ids[positions + order - 1]])
            unique, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
            frequent = counts >= min_count
            keep = frequent[inverse]
            positions, hashes = positions[keep], hashes[keep]
            if frequent.any():
                stored.append(unique[frequent])
                counts_by_order[order] = int(frequent.sum())
        keys = np.concatenate(stored) if stored else np.zeros(0, dtype=np.uint64)
        return cls(vocabulary, frequent_words, HashSet64(keys), counts_by_order)

    def __len__(self) -> int:
        return sum(self.counts_by_order.values())

    def longest_match(self, encoded: EncodedLines) -> np.ndarray:
        """Per token position: the length of the longest dictionary n-gram starting there within its line (≥ 1;
        a token outside the dictionary is a piece of length 1 on its own).

        Substring closure makes this exact level by level: if the n-gram at i is in the dictionary, so is the
        (n−1)-gram at i, so only positions that matched at level n−1 are tried at level n.
        """
        ids, fingerprints = encoded.ids, self.vocabulary.fingerprints
        # Lay the lines out with one boundary token after each, whose fingerprint is that of a word the training
        # corpus never saw: no dictionary n-gram contains it, so a match stops at the line's end by itself.
        padded = np.arange(len(ids)) + encoded.line_of_position()
        padded_fingerprints = np.full(len(ids) + len(encoded) + 1, fingerprints[-1], dtype=np.uint64)
        padded_fingerprints[padded] = fingerprints[ids]
        positions = padded[self.frequent_words[ids]]
        hashes = padded_fingerprints[positions]
        longest = np.ones(len(padded_fingerprints), dtype=np.int32)
        order = 1
        while positions.size and order < self.max_order:
            order += 1
            hashes = extend_hashes(hashes, padded_fingerprints[positions + order - 1])
            found = self.ngrams.contains(hashes)
            positions, hashes = positions[found], hashes[found]
            longest[positions] = order
        return longest[padded]
