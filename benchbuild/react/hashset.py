"""A set of 64-bit n-gram hashes with vectorized (numpy) insertion and membership tests.

Open addressing with linear probing at a load factor of at most 1/4, so a lookup costs about one random memory
access; millions of lookups run as a handful of numpy gathers instead of a Python loop.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = np.uint64(0)


def _nonzero(keys: np.ndarray) -> np.ndarray:
    # 0 marks an empty slot, so key 0 is folded onto key 1 (one more 2**-64 collision chance).
    return np.where(keys == _EMPTY, np.uint64(1), keys)


class HashSet64:
    """An immutable set of uint64 keys; `contains` answers for a whole array at once."""

    def __init__(self, keys: np.ndarray) -> None:
        keys = np.unique(_nonzero(np.asarray(keys, dtype=np.uint64)))
        self.size = len(keys)
        bits = max(4, int(np.ceil(np.log2(4 * self.size + 1))))
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._table = np.zeros(1 << bits, dtype=np.uint64)
        pending, slots = keys, self._home(keys)
        while pending.size:
            free = self._table[slots] == _EMPTY
            self._table[slots[free]] = pending[free]
            placed = self._table[slots] == pending
            pending, slots = pending[~placed], (slots[~placed] + 1) & self._mask

    def _home(self, keys: np.ndarray) -> np.ndarray:
        # The shifted values are < table size, so reinterpreting them as int64 is exact and free.
        return ((keys * _GOLDEN) >> self._shift).view(np.int64)

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return self._table.nbytes

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """A boolean array: is each key in the set."""
        keys = _nonzero(np.asarray(keys, dtype=np.uint64))
        slots = self._home(keys)
        stored = self._table[slots]
        found = stored == keys
        # At load ≤ 1/4 the first probe settles almost every key; only collisions probe on.
        index = np.flatnonzero(~found & (stored != _EMPTY))
        slots = (slots[index] + 1) & self._mask
        while index.size:
            stored = self._table[slots]
            hit = stored == keys[index]
            found[index[hit]] = True
            probe_on = ~hit & (stored != _EMPTY)
            index, slots = index[probe_on], (slots[probe_on] + 1) & self._mask
        return found
