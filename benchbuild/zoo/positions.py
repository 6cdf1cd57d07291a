"""Where the zoo's Transformer gets its positions: words combined with absolute positions (003 App. D, fairseq's
and the textbook sinusoids) and every distance-dependent term self-attention can add to its logits (000's T5 bias
and fixed span, 003's Transformer-XL relative attention, 001's Shaw / Huang key-and-query terms, Dangle's
cross-boundary variant). `benchbuild.zoo.transformer_layers.Attention` holds the learned tables and calls these
functions; nothing here knows the layers.

The `position` switch (`TransformerConfig.position`):

- "absolute": sinusoids added to the embeddings (`TokenEmbedding`).
- "relative": 003 App. C, no absolute positions; `relative_term` (symmetric distances in the encoder, causal in the
  decoder; plain attention between encoder and decoder).
- "t5_bias": absolute positions plus `t5_bias`, a learned per-head bias over the signed distance capped at ±span, in
  every self-attention (000 §3).
- "fixed_span": absolute positions plus self-attention masked beyond distance span (000 §3; the mask is
  `benchbuild.zoo.attention.attend`'s `window`).
- "shaw": learned embeddings of the clipped distance in every self-attention, no absolute positions (`shaw_index`,
  `shaw_term`: 001's relative positions as its authors' code computes them).
- "none": no position information at all.

000 built T5 and fixed-span attention as additive masks on a fairseq Transformer with sinusoidal positions, hence
absolute positions stay on for them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchbuild.zoo.attention import distances
from benchbuild.zoo.attention.layouts import Groups, Packed
from benchbuild.zoo.initialisation import init_embedding

POSITIONS = ("absolute", "relative", "t5_bias", "fixed_span", "shaw", "none")
ABSOLUTE_POSITIONS = ("absolute", "t5_bias", "fixed_span")
DISTANCE_POSITIONS = ("relative", "t5_bias", "fixed_span", "shaw")  # add a distance-dependent term to self-attention
FAIRSEQ_FIRST_POSITION = 2  # fairseq numbers positions from padding_idx + 1, and its dictionary's <pad> is 1
T5_BIAS_INITS = ("zeros", "normal")  # how the T5 bias table starts: 0, or N(0, 1) (`TransformerConfig.t5_bias_init`)
SOURCE_SEGMENT, TARGET_SEGMENT = 1, 2  # values of a segment mask (0: padding), read by cross-boundary attention


class TokenEmbedding(nn.Module):
    """Word embeddings combined with positions per 003 App. D: of `vocab_size` words (default: the config's, shared
    by encoder, decoder and output layer; a source dictionary's for the encoder of separate dictionaries), `d_model`
    wide (default: the config's)."""

    def __init__(self, config, vocab_size: int | None = None, d_model: int | None = None):
        super().__init__()
        self.scale = config.embedding_scale
        self.d_model = config.d_model if d_model is None else d_model
        self.absolute = config.position in ABSOLUTE_POSITIONS
        self.fairseq = getattr(config, "init", "zoo") == "fairseq"
        self.padding_index = config.pad_token_id
        self.weight = nn.Parameter(torch.empty(config.vocab_size if vocab_size is None else vocab_size, self.d_model))

    def reset_parameters(self) -> None:
        init_embedding(self.weight, self.scale, self.fairseq, self.padding_index)

    def forward(self, ids: torch.LongTensor, start: int = 0, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Embeddings of `ids`, the first of which sits at position `start` (the cached prefix's length); with a
        `layout`, of the grouped ids (a flat tensor), each at its position within its sequence.

        `embedding_scale`: "teu" (words times √d plus positions), "none" and "xavier" (words plus positions), "ped"
        (words plus positions / √d); how each draws the words: `benchbuild.zoo.initialisation.init_embedding`."""
        words = F.embedding(ids, self.weight)
        if self.scale == "teu":
            words = words * math.sqrt(self.d_model)
        if not self.absolute:
            return words
        table = fairseq_sinusoid if self.fairseq else sinusoid
        if layout is not None:
            positions = table(torch.arange(layout.longest, device=ids.device),
                              self.d_model)[layout.positions(ids.device)]
        else:
            positions = table(torch.arange(start, start + ids.size(1), device=ids.device), self.d_model)
        positions = positions.to(words.dtype)
        if self.scale == "ped":
            positions = positions / math.sqrt(self.d_model)
        return words + positions


def fairseq_sinusoid(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """fairseq's `SinusoidalPositionalEmbedding.get_embedding` for token i at position p = i + 2: with h = d/2,
    P[i, k] = sin(p · 10000^(-k/(h-1))) and P[i, h + k] = cos(p · 10000^(-k/(h-1))) for k < h (a zero column last
    for odd d)."""
    half = d_model // 2
    rates = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float32)
                      * (-math.log(10000.0) / (half - 1)))
    angles = (positions.float() + FAIRSEQ_FIRST_POSITION)[:, None] * rates[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if d_model % 2:
        table = torch.cat([table, torch.zeros(positions.numel(), 1, device=positions.device)], dim=1)
    return table


def sinusoid(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """P[i, 2k] = sin(i / 10000^(2k/d)), P[i, 2k+1] = cos(i / 10000^(2k/d)) for (possibly negative) positions i."""
    rates = torch.exp(torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
                      * (-math.log(10000.0) / d_model))
    angles = positions.float()[:, None] * rates[None, :]
    table = torch.zeros(positions.numel(), d_model, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


def t5_bias(table: torch.Tensor, span: int, length_q: int, length_k: int, dtype: torch.dtype) -> torch.Tensor:
    """000 Eq. 3's b_ij for "t5_bias", (1, H, Lq, Lk): b_ij = B[h, clamp(i - j, -s, s) + s], one learned
    (2s + 1)-vector per head and layer (`table`, H × (2s + 1), initialised at 0), added to the scaled logits
    q_i · k_j / √d. 000 §3, "T5 attention": distances beyond s share b_{±s}; (2s + 1) × n_l × n_h parameters. It acts
    in encoder and decoder self-attention only, never in cross-attention, and the absolute positions stay."""
    distance = distances(length_q, length_k, table.device)
    return table[:, distance.clamp(-span, span) + span].unsqueeze(0).to(dtype)


def relative_term(q: torch.Tensor, distance: torch.Tensor, past: int, position_key: nn.Linear,
                  position_bias: torch.Tensor) -> torch.Tensor:
    """Terms (b) + (d) of 003 App. C, (q + v)·W_kP P_{i-j}, pre-scaled because SDPA adds the mask after scaling;
    `q` (B, H, Lq, d_head), `position_bias` v (H, d_head), `position_key` W_kP (d → d, no bias). Term (c), u·k_j, is
    the content bias the caller adds to q.

    `distance` (Lq, Lk) runs from past - (Lk - 1) (first query, last key) to past + Lq - 1 (last query, key 0).
    """
    heads, head_dim = q.size(1), q.size(3)
    nearest = past - (distance.size(1) - 1)
    offsets = torch.arange(nearest, past + distance.size(0), device=q.device)
    projected = position_key(sinusoid(offsets, heads * head_dim).to(q.dtype))
    table = projected.view(1, -1, heads, head_dim).transpose(1, 2)[0]
    scores = torch.einsum("bhqd,hrd->bhqr", q + position_bias[None, :, None, :].to(q.dtype), table)
    index = (distance - nearest).expand(q.size(0), heads, -1, -1)
    return scores.gather(-1, index) / math.sqrt(head_dim)


def shaw_index(length_q: int, length_k: int, max_relative_position: int, segments: torch.Tensor | None,
               device: torch.device) -> torch.Tensor:
    """The row r_ij of the stacked Shaw tables that query i and key j read: (Lq, Lk), or (B, L, L) with `segments`.

    Unsegmented (MultiheadAttentionWithRelPos, M = `max_relative_position`): r_ij = clamp(i - j, -(M - 1), M - 1) +
    M - 1, the queries being the last Lq of the Lk positions (a cached step's query sits at Lk - 1, as the official
    single step does). Segmented (Dangle's MultiheadAttentionWithRelPosCrossBoundry, `segments` (B, L) as
    SOURCE_SEGMENT / TARGET_SEGMENT, each side one contiguous run): source-source pairs read the distance table and
    target-target pairs the target distance table (rows offset by 2M - 1) at their distance, which is the same counted
    within the side (as the official code does) or along the row; a pair across the boundary gets no distance but one
    of two vectors, boundary row 0 for a source query over a target key, row 1 for a target query over a source key
    (rows 4M - 2 and 4M - 1). So nothing a source token sees of positions depends on the target side.
    """
    reach = max_relative_position - 1
    distance = distances(length_q, length_k, device).clamp(-reach, reach) + reach
    if segments is None:
        return distance
    target = segments.eq(TARGET_SEGMENT)  # padding counts as source: its keys are masked anyway
    query_target, key_target = target[:, :, None], target[:, None, :]
    span = 2 * reach + 1
    same_side = distance + span * query_target.long()
    across = 2 * span + query_target.long()
    return torch.where(query_target == key_target, same_side, across)


def shaw_term(q: torch.Tensor, k: torch.Tensor, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """(q_i · r_ij + k_j · r_ij) / √d_head for every head (B, H, Lq, Lk), added to the scaled q_i · k_j / √d_head.

    001 App. B cites Shaw et al. (2018) and Huang et al. (2020); the official MultiheadAttentionWithRelPos computes
    Huang et al.'s key-and-query form: e_ij = (q_i·k_j + q_i·r_ij + k_j·r_ij) · d_head^-1/2, with q and k the
    projections (biases included) and r_ij = `table`[`index`] (the layer's tables stacked, shared by its heads);
    values get no position term. It runs in encoder and decoder self-attention; cross-attention is fairseq's plain
    MultiheadAttention. All tables start at 0: the official `Embedding` helper (mswellhao/Dangle
    fairseq/fairseq/modules/multihead_attention_relative.py) draws N(0, d_head^-1/2), then zeroes
    `weight[padding_idx]`, and with padding_idx None that index is the whole table.
    """
    table = table.to(q.dtype)
    by_query = torch.einsum("bhqd,rd->bhqr", q, table)  # q_i · R[r] for every row r
    by_key = torch.einsum("bhkd,rd->bhkr", k, table)  # k_j · R[r]
    index = (index if index.dim() == 3 else index[None])[:, None]
    index = index.expand(q.size(0), q.size(1), q.size(2), k.size(2))
    by_pair = by_query.gather(-1, index) + by_key.gather(-1, index.transpose(-1, -2)).transpose(-1, -2)
    return by_pair / math.sqrt(q.size(3))
