"""How a training batch of length groups is laid out for one forward pass: `Groups`, `Packed`, `GroupedBatch`.

Grouped training (`TransformerForSeq2Seq.grouped_logits`) runs a batch cut into length groups as one forward pass:
position-wise layers (projections, feed-forward, norms, dropout) once over all groups' positions, and only the
mixing within sequences (attention, convolution) group by group; the logits equal each group's own forward pass.
`Groups` lays the groups' padded positions out one after another. When every attention of the model runs in the
packed CPU kernel (`choose_backend` says PACKED), the batch is laid out with no padding at all (`Packed`): the
position-wise layers then see real tokens only. Either tells the kernel where each sequence's queries and keys are
(`SequenceLayout`), built once per pair of layouts and kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class SequenceLayout:
    """Where each sequence of a batch lives in the flat (tokens, channels) tensors: its queries are rows
    `query_starts[b]` .. + `query_lengths[b]` of the query tensor, its keys rows `key_starts[b]` .. +
    `key_lengths[b]` of the key tensor (real keys only: padding after them is never attended). `causal`: query i
    sees keys 0 .. i only. Arrays are int64."""

    query_starts: np.ndarray
    query_lengths: np.ndarray
    key_starts: np.ndarray
    key_lengths: np.ndarray
    causal: bool

    def __post_init__(self):
        for name in ("query_starts", "query_lengths", "key_starts", "key_lengths"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.int64))

    @property
    def sequences(self) -> int:
        return len(self.query_starts)

    @property
    def longest_keys(self) -> int:
        return max(int(self.key_lengths.max()), 1) if self.sequences else 1


class Groups:
    """A training batch cut into groups of rows, each padded only to its own longest row: `shapes` holds (rows,
    length) per group, `masks` the groups' (rows, length) real-token masks where keys need masking (the encoder).

    A grouped tensor lays the groups' padded positions out one group after another, (Σ rows · length, …).
    """

    def __init__(self, shapes, masks: list[torch.Tensor] | None = None):
        self.shapes = [(int(rows), int(length)) for rows, length in shapes]
        self.masks = masks
        self.sizes = [rows * length for rows, length in self.shapes]
        self._layouts: dict = {}

    def starts(self) -> np.ndarray:
        """The first grouped position of each sequence."""
        offsets = np.cumsum([0] + self.sizes[:-1])
        return np.concatenate([offset + length * np.arange(rows) for offset, (rows, length)
                               in zip(offsets, self.shapes)]).astype(np.int64)

    def padded_lengths(self) -> np.ndarray:
        """Each sequence's length within its group."""
        return np.concatenate([np.full(rows, length) for rows, length in self.shapes]).astype(np.int64)

    def real_lengths(self) -> np.ndarray | None:
        """Each sequence's count of real positions (all of them without masks), or None when some mask does not
        mark a prefix (real positions first, padding after)."""
        if self.masks is None:
            return self.padded_lengths()
        masks = [mask.bool().cpu().numpy() for mask in self.masks]
        counts = [mask.sum(axis=1) for mask in masks]
        if any(not np.array_equal(mask, np.arange(mask.shape[1])[None, :] < count[:, None])
               for mask, count in zip(masks, counts)):
            return None
        return np.concatenate(counts).astype(np.int64)

    def sequence_layout(self, keys: Groups, causal: bool) -> SequenceLayout | None:
        """Where each sequence's queries (laid out by these groups) and real keys (laid out by `keys`) are, for the
        packed kernel; None when some key mask is not a prefix. Reads the masks on the CPU: ask only after
        `choose_backend` said PACKED."""
        cache_key = (id(keys), causal)
        if cache_key not in self._layouts:
            key_lengths = keys.real_lengths()
            layout = None if key_lengths is None else SequenceLayout(
                self.starts(), self.padded_lengths(), keys.starts(), key_lengths, causal)
            self._layouts[cache_key] = (keys, layout)  # holding `keys` keeps its id unique while cached
        return self._layouts[cache_key][1]

    def split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Views (rows, length, …) of each group's part of the grouped tensor `flat`."""
        return [part.view(rows, length, *flat.shape[1:]) for part, (rows, length) in zip(flat.split(self.sizes),
                                                                                          self.shapes)]

    @staticmethod
    def join(parts: list[torch.Tensor]) -> torch.Tensor:
        """The grouped tensor of per-group (rows, length, …) tensors."""
        return torch.cat([part.reshape(-1, *part.shape[2:]) for part in parts])

    def key_masks(self) -> list[torch.Tensor | None]:
        return self.masks if self.masks is not None else [None] * len(self.shapes)

    @property
    def longest(self) -> int:
        return max(length for _, length in self.shapes)

    def positions(self, device) -> torch.Tensor:
        """Each grouped position's index within its sequence."""
        return torch.cat([torch.arange(length, device=device).repeat(rows) for rows, length in self.shapes])


class Packed:
    """Sequences laid out back to back with no padding at all, (Σ lengths, …): what the packed kernel reads, so with
    it position-wise layers see real tokens only. `lengths` holds each sequence's length, in order."""

    def __init__(self, lengths: np.ndarray):
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self._layouts: dict = {}

    @property
    def longest(self) -> int:
        return int(self.lengths.max())

    def sequence_layout(self, keys: Packed, causal: bool) -> SequenceLayout:
        """Where each sequence's queries (laid out here) and keys (laid out by `keys`) are."""
        cache_key = (id(keys), causal)
        if cache_key not in self._layouts:
            self._layouts[cache_key] = (keys, SequenceLayout(self.starts, self.lengths, keys.starts, keys.lengths,
                                                             causal))
        return self._layouts[cache_key][1]

    def positions(self, device) -> torch.Tensor:
        """Each token's index within its sequence."""
        counts = torch.from_numpy(self.lengths)
        offsets = torch.from_numpy(self.starts).repeat_interleave(counts)
        return (torch.arange(int(counts.sum())) - offsets).to(device)


@dataclass(frozen=True)
class GroupedBatch:
    """A batch of length groups laid out for one forward pass: flat source and target ids, the layouts of the
    sources (encoder), of the encoder output as the target groups read it (`memory`) and of the targets, and
    `real_targets`, the real positions of a padded target layout (None when packed: every position is real)."""

    source_ids: torch.Tensor
    target_ids: torch.Tensor
    sources: Groups | Packed
    memory: Groups | Packed
    targets: Groups | Packed
    real_targets: torch.Tensor | None

    @classmethod
    def lay_out(cls, length_groups: list[dict[str, torch.Tensor]], pad_token_id: int, packed: bool) -> GroupedBatch:
        """`length_groups` (dicts of `input_ids`, `attention_mask`, `decoder_input_ids` and optional
        `decoder_attention_mask`, right-padded per group) with no padding at all when `packed`, else padded per
        group."""
        target_masks = [group.get("decoder_attention_mask", torch.ones_like(group["decoder_input_ids"])).bool()
                        for group in length_groups]
        if packed:
            source_masks = [group["attention_mask"].bool() for group in length_groups]
            sources = Packed(torch.cat([mask.sum(1) for mask in source_masks]).cpu().numpy())
            targets = Packed(torch.cat([mask.sum(1) for mask in target_masks]).cpu().numpy())
            source_ids = torch.cat([group["input_ids"][mask] for group, mask in zip(length_groups, source_masks)])
            target_ids = torch.cat([group["decoder_input_ids"][mask]
                                    for group, mask in zip(length_groups, target_masks)])
            return cls(source_ids, target_ids, sources, sources, targets, None)
        # Sources are short and similar in length: the encoder takes all rows as one group padded to the longest
        # source (one attention call per layer), and each target group reads its own rows of the encoder output.
        longest = max(group["input_ids"].size(1) for group in length_groups)
        source_ids = torch.cat([F.pad(group["input_ids"], (0, longest - group["input_ids"].size(1)),
                                      value=pad_token_id) for group in length_groups]).reshape(-1)
        source_mask = torch.cat([F.pad(group["attention_mask"], (0, longest - group["attention_mask"].size(1)))
                                 for group in length_groups])
        rows = [group["input_ids"].size(0) for group in length_groups]
        memory = Groups([(count, longest) for count in rows], list(source_mask.split(rows)))
        return cls(source_ids, torch.cat([group["decoder_input_ids"].reshape(-1) for group in length_groups]),
                   Groups([(len(source_mask), longest)], [source_mask]), memory,
                   Groups([group["decoder_input_ids"].shape for group in length_groups]),
                   torch.cat([mask.reshape(-1) for mask in target_masks]))
