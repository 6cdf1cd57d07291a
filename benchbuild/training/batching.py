"""Training batches: encoded rows, the batch at each step (a pure function of seed and step) of `batch_size` rows or
of `batch_tokens` tokens (`TokenBatches`), length-sorted micro-batches that pad little, and the padded tensors a model
takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from benchbuild.benchmark import split_column
from benchbuild.errors import BenchbuildError
from benchbuild.zoo.decoding import MAX_TOKENS, check_row_lengths
from benchbuild.zoo.loading import token_ids


@dataclass
class EncodedSplit:
    """Token ids of a split's sources and targets (each ending in `</s>`)."""

    sources: list[list[int]]
    targets: list[list[int]]


def encode_rows(tokenizer, rows: Sequence[Mapping[str, Any]]) -> EncodedSplit:
    """The `source` and `target` of every row as token ids (targets by `text_target`: with separate dictionaries,
    `tokenization.TranslationTokenizer`, in the target one)."""
    sources = token_ids(tokenizer, [row["source"] for row in rows])
    targets = token_ids(tokenizer, [row["target"] for row in rows], target=True)
    for side, encoded in (("source", sources), ("target", targets)):
        for row, ids in zip(rows, encoded):
            if len(ids) > MAX_TOKENS:
                raise BenchbuildError(f"the training row whose source begins {str(row['source'])[:40]!r} has a {side} "
                                      f"of {len(ids):,} tokens, more than the {MAX_TOKENS:,} a zoo model takes "
                                      f"(fairseq's max_{side}_positions); cut or drop it and build the benchmark again")
    return EncodedSplit(sources=sources, targets=targets)


def check_split_lengths(data, splits: Mapping[str, Any], names: set[str]) -> None:
    """Before a run folder is touched: no row of the splits `names` (those present) of benchmark `data` is longer
    than a zoo model takes (`decoding.check_row_lengths`)."""
    for name in sorted(names & set(splits)):
        check_row_lengths(f"split {name!r} of {data}:", source=split_column(splits[name], "source"),
                          target=split_column(splits[name], "target"))


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


@dataclass(frozen=True, eq=False)
class TokenBatches:
    """A train set cut into token batches (fairseq's `--max-tokens`), and the batches of each optimizer step.

    The cut is made once for the run, as fairseq's `EpochBatchIterator` freezes the batches it is given
    (mswellhao/Dangle fairseq/fairseq/tasks/fairseq_task.py `get_batch_iterator`): the rows in a random order drawn
    from the seed, stably sorted by target length and then by source length, so by source length with ties by target
    length (facebookresearch/fairseq fairseq/data/language_pair_dataset.py `ordered_indices`), are packed greedily,
    a batch closing before the row that would make rows × max(longest source, longest target) exceed `batch_tokens`
    or give it more than `max_rows` rows (fairseq/data/data_utils_fast.pyx `batch_by_size_fast`, with `num_tokens` =
    max(source, target length); `--max-sentences`). Each epoch visits the batches in an order drawn from [seed,
    epoch] (fairseq/data/iterators.py shuffles them with seed + epoch), and optimizer step s takes batches s ×
    update_freq … (s + 1) × update_freq - 1 of that stream of epochs, running on across an epoch's end where
    fairseq's `GroupedIterator` gives an epoch's last update fewer batches: the batches of a step are a pure
    function of the seed, the lengths and the step, so a resumed run takes the same ones.
    """

    rows: np.ndarray  # the row indices in packing order
    bounds: np.ndarray  # batch k is rows[bounds[k]:bounds[k + 1]]
    seed: int

    @classmethod
    def pack(cls, encoded: EncodedSplit, batch_tokens: int, max_rows: int | None, seed: int) -> TokenBatches:
        """The token batches of `encoded` under a budget of `batch_tokens` padded tokens and at most `max_rows` rows
        (None: no cap). A row longer than `batch_tokens` alone is an error: fairseq would drop it from training with
        a warning, which silently changes the train set."""
        sources = np.fromiter(map(len, encoded.sources), dtype=np.int64, count=len(encoded.sources))
        targets = np.fromiter(map(len, encoded.targets), dtype=np.int64, count=len(encoded.targets))
        sizes = np.maximum(sources, targets)
        too_long = np.flatnonzero(sizes > batch_tokens)
        if len(too_long):
            longest = int(sizes.max())
            raise BenchbuildError(
                f"{len(too_long):,} of the {len(sizes):,} rows trained on do not fit in batch_tokens = {batch_tokens} "
                f"alone (the longest has {longest} tokens, the longer of its source and target with </s>): set "
                f"batch_tokens to at least {longest} (--set batch_tokens={longest})")
        # A stream of its own: default_rng(seed) would equal the first epoch's batch order's generator, [seed, 0].
        order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,))).permutation(len(sizes))
        order = order[np.argsort(targets[order], kind="stable")]
        order = order[np.argsort(sources[order], kind="stable")]
        bounds, start, longest = [0], 0, 0
        row_cap = max_rows or len(order)
        for position, size in enumerate(sizes[order].tolist()):
            rows = position - start
            if rows and (rows == row_cap or (rows + 1) * max(longest, size) > batch_tokens):
                bounds.append(position)
                start, longest = position, 0
            longest = max(longest, size)
        bounds.append(len(order))
        return cls(rows=order, bounds=np.asarray(bounds, dtype=np.int64), seed=seed)

    def __len__(self) -> int:
        """Token batches in an epoch."""
        return len(self.bounds) - 1

    def batch(self, number: int) -> list[int]:
        """The rows of batch `number` in packing order."""
        return self.rows[self.bounds[number]:self.bounds[number + 1]].tolist()

    def epoch(self, epoch: int) -> list[list[int]]:
        """The batches of `epoch` (0-based) in the order it visits them."""
        return [self.batch(int(number)) for number in _epoch_permutation(self.seed, epoch, len(self))]

    def of_step(self, step: int, update_freq: int) -> list[list[int]]:
        """The `update_freq` token batches of optimizer step `step` (0-based)."""
        batches = []
        for position in range(step * update_freq, (step + 1) * update_freq):
            epoch, offset = divmod(position, len(self))
            batches.append(self.batch(int(_epoch_permutation(self.seed, epoch, len(self))[offset])))
        return batches


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

