"""Stages 5 and 8 of ReaCT: the candidate pool (non-overlapping, top by degree) and the RMI band sample.

Pure functions of their inputs and an explicit `numpy.random.Generator`; ties are broken by pool order, so the
same inputs always give the same selection. `candidate_pool` applies the rule to a pool held in memory;
`shard_top` and `TopCandidates` give the same candidates from a pool read shard by shard, holding at most
`--pool-size` of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, NamedTuple, Sequence

import numpy as np

from benchbuild.errors import BenchbuildError


@dataclass
class CandidatePool:
    """Indices into the pool of the kept candidates (best degree first) and what each filter removed."""

    indices: list[int]
    counts: dict[str, int]
    shortfall: int = 0


def candidate_pool(sources: Sequence[str], degrees: np.ndarray, in_vocabulary: np.ndarray,
                   seen_sources: Collection[str], pool_size: int, allow_small: bool = False) -> CandidatePool:
    """Keep in-vocabulary pool lines whose (normalized) source is neither in the training/validation/test
    corpora nor a repeat of an earlier pool line ("non-overlapping"), then the `pool_size` highest degrees."""
    kept: list[int] = []
    first_seen: set[str] = set()
    overlap = duplicate = 0
    for index in np.flatnonzero(in_vocabulary).tolist():
        source = sources[index]
        if source in seen_sources:
            overlap += 1
        elif source in first_seen:
            duplicate += 1
        else:
            first_seen.add(source)
            kept.append(index)
    counts = {"pool lines": len(sources), "dropped by the OOV filter": int(len(sources) - in_vocabulary.sum()),
              "dropped: source in the training/validation/test corpora": overlap,
              "dropped: duplicate within the pool": duplicate, "non-overlapping in-vocabulary candidates": len(kept)}
    shortfall = max(0, pool_size - len(kept))
    if shortfall and not allow_small:
        raise BenchbuildError(f"only {len(kept):,} non-overlapping in-vocabulary pool sentences remain but "
                              f"--pool-size is {pool_size:,}: lower --pool-size, give a larger pool, or pass "
                              "--allow-small")
    kept_array = np.asarray(kept, dtype=np.int64)
    # Highest degree first; ties by pool order (lexsort's last key is the primary one).
    order = np.lexsort((kept_array, -degrees[kept_array])) if kept else np.zeros(0, dtype=np.int64)
    chosen = kept_array[order][:pool_size].tolist()
    counts["candidate pool (top by degree)"] = len(chosen)
    return CandidatePool(indices=chosen, counts=counts, shortfall=shortfall)


class Candidate(NamedTuple):
    """A pool pair that passed the filters: its degree, where it is (pool index, line) and its normalized text."""

    degree: float
    pool: int
    line: int
    source: str
    target: str

    def key(self) -> tuple[float, int, int]:
        """Sort key of the candidate pool: highest degree first, ties by pool order."""
        return (-self.degree, self.pool, self.line)


def shard_top(candidates: Iterable[Candidate], size: int,
              threshold: tuple[float, int, int] | None = None) -> list[Candidate]:
    """The best `size` of a shard's candidates (given in pool order), each source once (its first occurrence),
    best first; only those whose key is below `threshold` (the last key of the `size` best so far, if known),
    since no other can enter the pool's top."""
    first: dict[str, Candidate] = {}
    for candidate in candidates:
        first.setdefault(candidate.source, candidate)
    best = sorted(first.values(), key=Candidate.key)[:size]
    return best if threshold is None else [candidate for candidate in best if candidate.key() < threshold]


class TopCandidates:
    """The `size` best candidates of a pool whose shards' `shard_top` lists arrive in pool order: the candidates
    `candidate_pool` keeps (each source's first occurrence, highest degree first, ties by pool order), in memory
    bounded by `size`, whatever the pool's length.

    Why the bounded merge loses nothing: a source's occurrences share one normalized text, hence one degree, so its
    first occurrence outranks its repeats. A candidate of the final top is its source's first occurrence; every
    candidate ahead of it in its shard's deduplicated list stands for a distinct source whose first occurrence is
    ahead of it in the whole pool, so fewer than `size` are: it survives its shard's cut and every merge. A repeat
    whose first occurrence was cut ranks after that occurrence, which already had `size` candidates ahead of it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.rows: list[Candidate] = []
        self._sources: set[str] = set()

    def threshold(self) -> tuple[float, int, int] | None:
        """The key a later candidate must beat to enter (None while fewer than `size` are held)."""
        return self.rows[-1].key() if len(self.rows) == self.size else None

    def add(self, shard: Sequence[Candidate]) -> None:
        """Merge the `shard_top` of the next shard in pool order."""
        threshold = self.threshold()
        fresh = [candidate for candidate in shard if candidate.source not in self._sources
                 and (threshold is None or candidate.key() < threshold)]
        if fresh:
            self.rows = sorted(self.rows + fresh, key=Candidate.key)[:self.size]
            self._sources = {candidate.source for candidate in self.rows}


@dataclass
class Selection:
    """Chosen candidates (positions in the candidate list) with their 1-based RMI rank, in rank order."""

    positions: list[int]
    ranks: list[int]
    band: tuple[int, int]
    counts: dict[str, int] = field(default_factory=dict)
    shortfall: int = 0


def rmi_ranks(rmi: Sequence[float]) -> np.ndarray:
    """1-based rank of each candidate by RMI, most uncertain first; ties by candidate order."""
    values = np.asarray(rmi, dtype=np.float64)
    order = np.lexsort((np.arange(len(values)), -values))
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(1, len(values) + 1)
    return ranks


def select_by_uncertainty(rmi: Sequence[float], drop_top: int, band: int, sample: int,
                          rng: np.random.Generator, allow_small: bool = False) -> Selection:
    """Drop the `drop_top` most uncertain candidates (noise), sample `sample` from the next `band` (001 §4)."""
    if min(drop_top, band, sample) < 0:
        raise BenchbuildError("--drop-top, --band and --sample must not be negative")
    if sample > band:
        raise BenchbuildError(f"--sample {sample:,} is larger than --band {band:,}: the sample is drawn from the band")
    ranks = rmi_ranks(rmi)
    available = max(0, len(ranks) - drop_top)
    shortfall = max(0, band - available)
    if shortfall and not allow_small:
        raise BenchbuildError(f"{len(ranks):,} candidates leave {available:,} after dropping the top {drop_top:,}, "
                              f"fewer than --band {band:,}: lower --band/--drop-top, raise --pool-size, or pass "
                              "--allow-small")
    band_size = min(band, available)
    take = min(sample, band_size)
    by_rank = np.argsort(ranks)
    band_positions = by_rank[drop_top:drop_top + band_size]
    picked = np.sort(rng.choice(band_size, size=take, replace=False)) if take else np.zeros(0, dtype=np.int64)
    positions = band_positions[picked].tolist()
    counts = {"dropped as noise (top RMI)": min(drop_top, len(ranks)), "RMI band": band_size, "sampled": take}
    return Selection(positions=positions, ranks=[int(ranks[p]) for p in positions],
                     band=(drop_top + 1, drop_top + band_size), counts=counts,
                     shortfall=shortfall + max(0, sample - take))
