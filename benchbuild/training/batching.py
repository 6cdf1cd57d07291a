"""Training batches: encoded rows, the batch at each step (a pure function of seed and step), length-sorted
micro-batches that pad little, and the padded tensors a model takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch


@dataclass
class EncodedSplit:
    """Token ids of a split's sources and targets (each ending in `</s>`)."""

    sources: list[list[int]]
    targets: list[list[int]]


def encode_rows(tokenizer, rows: Sequence[Mapping[str, Any]]) -> EncodedSplit:
    """The `source` and `target` of every row as token ids."""
    sources = tokenizer([row["source"] for row in rows])["input_ids"]
    targets = tokenizer([row["target"] for row in rows])["input_ids"]
    return EncodedSplit(sources=sources, targets=targets)


def batch_indices(step: int, batch_size: int, size: int, seed: int) -> list[int]:
    """Row indices of the batch at `step`: consecutive slices of a stream of seeded per-epoch permutations."""
    indices = []
    for position in range(step * batch_size, (step + 1) * batch_size):
        epoch, offset = divmod(position, size)
        indices.append(int(_epoch_permutation(seed, epoch, size)[offset]))
    return indices


_permutations: dict[tuple[int, int, int], np.ndarray] = {}


def _epoch_permutation(seed: int, epoch: int, size: int) -> np.ndarray:
    key = (seed, epoch, size)
    if key not in _permutations:
        if len(_permutations) > 4:
            _permutations.clear()
        _permutations[key] = np.random.default_rng([seed, epoch]).permutation(size)
    return _permutations[key]


def by_length(encoded: EncodedSplit, indices: Sequence[int]) -> list[int]:
    """`indices` sorted by (target length, source length), ties in their given order."""
    return sorted(indices, key=lambda index: (len(encoded.targets[index]), len(encoded.sources[index])))


def micro_batches(encoded: EncodedSplit, indices: Sequence[int], count: int) -> list[list[int]]:
    """`indices` sorted by (target, source) length and cut into `count` parts at the points that minimise the padded
    target tokens, Σ rows × longest target, each part padding only to its own longest row (fewer parts when the batch
    has fewer rows, or over 4,096 rows but fewer distinct lengths: see `_best_cuts`). Together the parts are exactly
    the batch."""
    order = by_length(encoded, indices)
    lengths = np.asarray([len(encoded.targets[index]) for index in order], dtype=np.int64)
    cuts = _best_cuts(lengths, min(count, len(order)))
    return [order[start:end] for start, end in zip(cuts, cuts[1:])]


def _best_cuts(lengths: np.ndarray, parts: int) -> list[int]:
    """Boundaries 0 = c₀ < c₁ < … < c_parts = n of ascending `lengths` minimising Σ (c_k - c_{k-1}) · lengths[c_k - 1]
    (dynamic programming over the end of each part; ties go to the earliest cut).

    Some optimal cutting only cuts where the length changes (moving a cut inside a run of equal lengths to the run's
    end moves rows from a part padded to at least that length into one padded to exactly it), so when the batch has
    at least `parts` distinct lengths the search runs over those boundaries only: its cost grows with the number of
    distinct lengths, not of rows. With fewer distinct lengths every position is a candidate (small batches); a
    large batch (over 4,096 rows) then gets one part per distinct length, which pads no more than `parts` would.
    """
    n = len(lengths)
    run_ends = np.flatnonzero(np.diff(lengths)) + 1
    if len(run_ends) + 1 >= parts:
        candidates = np.concatenate([[0], run_ends, [n]])
    elif n <= 4096:
        candidates = np.arange(n + 1)
    else:
        candidates, parts = np.concatenate([[0], run_ends, [n]]), len(run_ends) + 1
    count = len(candidates)
    starts, ends = candidates[:, None], candidates[None, :]
    # cost[i, j]: rows candidates[i] .. candidates[j] - 1 as one part; infinite unless i < j.
    unreachable = np.iinfo(np.int64).max // 4
    cost = np.where(starts < ends, (ends - starts) * lengths[np.maximum(ends - 1, 0)], unreachable)
    best = np.where(np.arange(count) == 0, 0, unreachable)  # best[j]: rows before candidates[j] in k parts
    choices = []
    for _ in range(parts):
        totals = best[:, None] + cost
        choices.append(totals.argmin(axis=0))
        best = totals.min(axis=0)
    cuts = [count - 1]
    for choice in reversed(choices):
        cuts.append(int(choice[cuts[-1]]))
    return [int(candidates[cut]) for cut in reversed(cuts)]


def collate(encoded: EncodedSplit, indices: Sequence[int], pad_id: int, bos_id: int, device) -> dict[str, torch.Tensor]:
    """Padded encoder ids + mask, decoder inputs (`<s>` + target shifted right) + mask, and labels (-100 on
    padding)."""
    sources = [encoded.sources[i] for i in indices]
    targets = [encoded.targets[i] for i in indices]
    source_filled = _filled(sources)
    target_filled = _filled(targets)
    input_ids = np.full(source_filled.shape, pad_id, dtype=np.int64)
    input_ids[source_filled] = np.concatenate(sources)
    labels = np.full(target_filled.shape, -100, dtype=np.int64)
    labels[target_filled] = np.concatenate(targets)
    decoder_input_ids = np.full(target_filled.shape, pad_id, dtype=np.int64)
    decoder_input_ids[target_filled] = np.concatenate([[bos_id, *target[:-1]] for target in targets])
    tensors = (("input_ids", input_ids), ("attention_mask", source_filled.astype(np.int64)),
               ("decoder_input_ids", decoder_input_ids), ("decoder_attention_mask", target_filled.astype(np.int64)),
               ("labels", labels))
    return {name: torch.from_numpy(array).to(device) for name, array in tensors}


def _filled(sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """(rows, longest) booleans: True where row i has a token (row-major order matches their concatenation)."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    return np.arange(lengths.max())[None, :] < lengths[:, None]

