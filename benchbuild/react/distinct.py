"""How many distinct sentences a pool holds, counted exactly (up to 64-bit hash collisions) in bounded memory.

The card's "duplicate within the pool" count needs the number of distinct candidate sources over the whole pool,
which a set of the sentences would hold in memory. Here each sentence is a 64-bit BLAKE2b hash of its UTF-8 text;
hashes are buffered, deduplicated and spilled by their top byte into 256 files, and each file is counted on its
own at the end, so memory holds the buffer and 1/256 of the distinct hashes. Two distinct sentences share a hash
with probability ≈ N²/2⁶⁵ for N distinct sentences (below 10⁻⁷ for 10⁶).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np

_BUCKETS = 256


def sentence_hashes(sentences: Iterable[str]) -> np.ndarray:
    """The 64-bit hash of each sentence (the same in every process, unlike Python's `hash`)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(sentence.encode("utf-8"), digest_size=8).digest(), "little")
                        for sentence in sentences), dtype=np.uint64)


class DistinctCounter:
    """The number of distinct uint64 keys added, holding at most about `buffer` keys in memory (spilled to a
    temporary folder beyond that, removed by `close`)."""

    def __init__(self, buffer: int = 1 << 20) -> None:
        self.buffer = buffer
        self._pending: list[np.ndarray] = []
        self._size = 0
        self._folder: Path | None = None

    def add(self, keys: np.ndarray) -> None:
        self._pending.append(np.asarray(keys, dtype=np.uint64))
        self._size += len(keys)
        if self._size >= self.buffer:
            unique = np.unique(np.concatenate(self._pending))
            self._pending, self._size = [unique], len(unique)
            if self._size >= self.buffer // 2:  # deduplicating did not free enough: spill
                self._spill()

    def count(self) -> int:
        if self._folder is None:
            return int(np.unique(np.concatenate(self._pending)).size) if self._pending else 0
        self._spill()
        return sum(int(np.unique(np.fromfile(path, dtype=np.uint64)).size)
                   for path in sorted(self._folder.iterdir()))

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> "DistinctCounter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spill(self) -> None:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="benchbuild-distinct-"))
        keys = np.unique(np.concatenate(self._pending)) if self._pending else np.zeros(0, dtype=np.uint64)
        self._pending, self._size = [], 0
        bounds = np.searchsorted(keys >> np.uint64(56), np.arange(_BUCKETS + 1, dtype=np.uint64))
        for bucket in range(_BUCKETS):
            start, end = bounds[bucket], bounds[bucket + 1]
            if end > start:
                with open(self._folder / f"{bucket:02x}", "ab") as handle:
                    keys[start:end].tofile(handle)
