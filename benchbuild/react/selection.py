"""Stages 5 and 8 of ReaCT: the candidate pool (non-overlapping, top by degree) and the RMI band sample.

Pure functions of their inputs and an explicit `numpy.random.Generator`; ties are broken by pool order, so the
same inputs always give the same selection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Sequence

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
