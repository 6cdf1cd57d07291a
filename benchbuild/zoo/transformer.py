"""One encoder-decoder Transformer whose paper variants are switches (000, 003, 004), not copies.

Switches (all in `TransformerConfig`):

- `position`: "absolute" (sinusoidal, added to the embeddings), "relative" (Transformer-XL attention of 003 App. C:
  symmetric distances in the encoder, causal ones in the decoder; plain attention between encoder and decoder; no
  absolute positions), "t5_bias" (absolute positions plus a learned per-head bias over the signed distance capped
  at ±span in every self-attention, 000 §3), "fixed_span" (absolute positions plus self-attention masked beyond
  distance span, 000 §3), "none" (no position information at all). 000 built T5 and fixed-span attention as
  additive masks on a fairseq Transformer with sinusoidal positions, hence absolute positions stay on for them.
- `embedding_scale`: "teu" (Glorot-initialised embeddings times √d plus positions), "none" (N(0, 1) embeddings
  plus positions), "ped" (N(0, 1/√d) embeddings plus positions / √d) — 003 App. D.
- `universal`: one encoder layer and one decoder layer, applied `encoder_layers` / `decoder_layers` times (003 §2.2);
  positions enter only before the first layer, as in every variant here.
- `encoder_self_attention_gate` / `decoder_self_attention_gate`: β₀ of the self-attention gate σ(β) (000 Alg. 1);
  None leaves the layer ungated.
- `mixer`: "attention" or "conv" (a 1-D convolution of kernel 2·span+1 in place of self-attention, causal in the
  decoder; 000 §3).
- `fuse_attention`: FUSION's fuse-attention (004 §2.2) between the attention and feed-forward sub-layers of every
  layer: position i of layer l attends over that position's outputs of the l layers below (embedding included).
- `pre_norm`: layer norm before each sub-layer (fairseq's `normalize_before`) instead of after it.

Dropout: `dropout` on embeddings and sub-layer outputs, `attention_dropout` on attention weights,
`activation_dropout` (default: `dropout`) inside the feed-forward block.

Grouped training (every switch; `TransformerForSeq2Seq.grouped_logits`): a batch cut into length groups runs as one
forward pass, position-wise layers once over all groups' positions and attention or convolution group by group
(see `Groups`); the logits equal each group's own forward pass. On CPU, attention without distance terms (every
cross-attention; self-attention with positions "absolute" or "none") runs all groups at once in
`packed_attention`'s compiled kernel when it is available, and when every attention of the model does, the batch is
laid out with no padding at all (see `Packed`): position-wise layers then see real tokens only.

Incremental decoding (every switch; `use_cache=True` by default): `generate()` hands the decoder a
`transformers` `EncoderDecoderCache`. Slot d of its self-attention cache holds depth d's keys and values of the
positions decoded so far (with `mixer="conv"`: depth d's inputs, of which the convolution reads the last 2·span),
slot d of its cross-attention cache the projection of the encoder output, computed at the first step and reused.
Each step then feeds only the new token, whose position is the cache's length. Universal Transformers index the
cache by depth, not by (shared) layer. FUSION needs nothing cached: fuse-attention stays within one position.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import packed_attention
from benchbuild.zoo.dropout import Dropout, scaled_dot_product_attention
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel, check_choice

POSITIONS = ("absolute", "relative", "t5_bias", "fixed_span", "none")
EMBEDDING_SCALES = ("teu", "none", "ped")
MIXERS = ("attention", "conv")
ABSOLUTE_POSITIONS = ("absolute", "t5_bias", "fixed_span")


class TransformerConfig(ZooConfig):
    """Sizes and switches of the zoo's Transformer; defaults are 003's SCAN model (Table 4)."""

    model_type = "benchbuild_transformer"
    kind = "transformer"
    caches_decoder_states = True

    def __init__(self, d_model: int = 128, num_heads: int = 8, d_ff: int = 256, encoder_layers: int = 3,
                 decoder_layers: int = 3, dropout: float = 0.1, attention_dropout: float = 0.1,
                 activation_dropout: float | None = None,
                 position: str = "absolute", embedding_scale: str = "teu", universal: bool = False,
                 encoder_self_attention_gate: float | None = None, decoder_self_attention_gate: float | None = None,
                 mixer: str = "attention", span: int = 4, fuse_attention: bool = False, pre_norm: bool = False,
                 **kwargs):
        check_choice("transformer", "position", position, POSITIONS)
        check_choice("transformer", "embedding_scale", embedding_scale, EMBEDDING_SCALES)
        check_choice("transformer", "mixer", mixer, MIXERS)
        if mixer == "conv" and position in ("relative", "t5_bias", "fixed_span"):
            raise BenchbuildError(f"transformer: position = {position!r} acts on self-attention, which mixer = 'conv' "
                                  "replaces; use position = 'absolute' or 'none' with the convolution")
        if d_model % num_heads:
            raise BenchbuildError(f"transformer: d_model = {d_model} is not divisible by num_heads = {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.num_hidden_layers = decoder_layers
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.position = position
        self.embedding_scale = embedding_scale
        self.universal = universal
        self.encoder_self_attention_gate = encoder_self_attention_gate
        self.decoder_self_attention_gate = decoder_self_attention_gate
        self.mixer = mixer
        self.span = span
        self.fuse_attention = fuse_attention
        self.pre_norm = pre_norm
        super().__init__(**kwargs)


def sinusoid(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """P[i, 2k] = sin(i / 10000^(2k/d)), P[i, 2k+1] = cos(i / 10000^(2k/d)) for (possibly negative) positions i."""
    rates = torch.exp(torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
                      * (-math.log(10000.0) / d_model))
    angles = positions.float()[:, None] * rates[None, :]
    table = torch.zeros(positions.numel(), d_model, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class Groups:
    """A training batch cut into groups of rows, each padded only to its own longest row: `shapes` holds (rows,
    length) per group, `masks` the groups' (rows, length) real-token masks where keys need masking (the encoder).

    A grouped tensor lays the groups' padded positions out one group after another, (Σ rows · length, …), so
    position-wise layers (projections, feed-forward, norms, dropout) run once over the whole batch and only the
    mixing within sequences (attention, convolution) runs group by group.
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

    def layout(self, keys: Groups, causal: bool) -> packed_attention.SequenceLayout | None:
        """Where each sequence's queries (laid out by these groups) and real keys (laid out by `keys`) are, for
        `packed_attention`; None when some key mask is not a prefix."""
        cache_key = (id(keys), causal)
        if cache_key not in self._layouts:
            key_lengths = keys.real_lengths()
            layout = None if key_lengths is None else packed_attention.SequenceLayout(
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
    """Sequences laid out back to back with no padding at all, (Σ lengths, …): what `packed_attention` reads, so with
    it position-wise layers see real tokens only. `lengths` holds each sequence's length, in order."""

    def __init__(self, lengths: np.ndarray):
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self._layouts: dict = {}

    @property
    def longest(self) -> int:
        return int(self.lengths.max())

    def layout(self, keys: Packed, causal: bool) -> packed_attention.SequenceLayout:
        """Where each sequence's queries (laid out here) and keys (laid out by `keys`) are."""
        cache_key = (id(keys), causal)
        if cache_key not in self._layouts:
            self._layouts[cache_key] = (keys, packed_attention.SequenceLayout(self.starts, self.lengths, keys.starts,
                                                                              keys.lengths, causal))
        return self._layouts[cache_key][1]

    def positions(self, device) -> torch.Tensor:
        """Each token's index within its sequence."""
        counts = torch.from_numpy(self.lengths)
        offsets = torch.from_numpy(self.starts).repeat_interleave(counts)
        return (torch.arange(int(counts.sum())) - offsets).to(device)


class TokenEmbedding(nn.Module):
    """Word embeddings (shared by encoder, decoder and output layer) combined with positions per 003 App. D."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.scale = config.embedding_scale
        self.d_model = config.d_model
        self.absolute = config.position in ABSOLUTE_POSITIONS
        self.weight = nn.Parameter(torch.empty(config.vocab_size, config.d_model))

    def reset_parameters(self) -> None:
        if self.scale == "teu":
            init.xavier_uniform_(self.weight)
        elif self.scale == "none":
            init.normal_(self.weight, mean=0.0, std=1.0)
        else:
            init.normal_(self.weight, mean=0.0, std=1.0 / math.sqrt(self.d_model))

    def forward(self, ids: torch.LongTensor, start: int = 0, groups: Groups | Packed | None = None) -> torch.Tensor:
        """Embeddings of `ids`, the first of which sits at position `start` (the cached prefix's length); with
        `groups`, of the grouped ids (a flat tensor), each at its position within its sequence."""
        words = F.embedding(ids, self.weight)
        if self.scale == "teu":
            words = words * math.sqrt(self.d_model)
        if not self.absolute:
            return words
        if groups is not None:
            positions = sinusoid(torch.arange(groups.longest, device=ids.device),
                                 self.d_model)[groups.positions(ids.device)]
        else:
            positions = sinusoid(torch.arange(start, start + ids.size(1), device=ids.device), self.d_model)
        positions = positions.to(words.dtype)
        if self.scale == "ped":
            positions = positions / math.sqrt(self.d_model)
        return words + positions


class Attention(nn.Module):
    """Multi-head attention; in self-attention `position` adds its distance-dependent term to the logits."""

    def __init__(self, d_model: int, num_heads: int, dropout: float, position: str = "none", span: int = 0,
                 causal: bool = False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.dropout, self.position, self.span, self.causal = dropout, position, span, causal
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        if position == "t5_bias":
            self.relative_bias = nn.Parameter(torch.zeros(num_heads, 2 * span + 1))
        if position == "relative":
            self.position_key = nn.Linear(d_model, d_model, bias=False)
            self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
            self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))

    def reset_parameters(self) -> None:
        if self.position == "t5_bias":
            init.zeros_(self.relative_bias)
        if self.position == "relative":
            init.zeros_(self.content_bias)
            init.zeros_(self.position_bias)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def _projected_together(self, x: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values of self-attention from one fused projection, as in nn.MultiheadAttention."""
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        projection_bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        return F.linear(x, weight, projection_bias)

    def forward(self, x: torch.Tensor, keys_from: torch.Tensor | None = None, values_from: torch.Tensor | None = None,
                key_mask: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None,
                depth: int = 0, groups: Groups | Packed | None = None, key_groups: Groups | Packed | None = None
                ) -> torch.Tensor:
        """`x` (B, Lq, d) attends over `keys_from`/`values_from` (default: `x`); `key_mask` (B, Lk) marks real keys.

        With a `cache`, self-attention appends its keys and values to slot `depth` of the self-attention cache and
        attends over all of them (`x` holds the last Lq positions only), and cross-attention projects
        `keys_from`/`values_from` once into slot `depth` of the cross-attention cache, then reuses them.

        With `groups`, `x` is a grouped tensor (training): the projections run over all of it at once and each
        group attends within itself, over the same group of `keys_from` (laid out by `key_groups`, whose masks
        mark the real keys; default `groups`).
        """
        if groups is not None:
            return self._grouped(x, keys_from, values_from, groups, key_groups or groups)
        if keys_from is None and values_from is None:
            q, k, v = (self._heads(part) for part in self._projected_together(x).chunk(3, dim=-1))
            if cache is not None:
                k, v = cache.self_attention_cache.update(k, v, depth)
        elif cache is not None and cache.is_updated.get(depth, False):
            stored = cache.cross_attention_cache.layers[depth]
            q, k, v = self._heads(self.query(x)), stored.keys, stored.values
        else:
            keys_from = x if keys_from is None else keys_from
            values_from = keys_from if values_from is None else values_from
            q, k, v = (self._heads(self.query(x)), self._heads(self.key(keys_from)),
                       self._heads(self.value(values_from)))
            if cache is not None:
                k, v = cache.cross_attention_cache.update(k, v, depth)
                cache.is_updated[depth] = True
        return self.out(self._attend(q, k, v, key_mask))

    def _grouped(self, x: torch.Tensor, keys_from: torch.Tensor | None, values_from: torch.Tensor | None,
                 groups: Groups | Packed, key_groups: Groups | Packed) -> torch.Tensor:
        layout = groups.layout(key_groups, self.causal) if self.position in ("absolute", "none") else None
        if layout is not None and packed_attention.supports(x, layout, self.num_heads):
            return self.out(self._packed(x, keys_from, values_from, layout))
        if keys_from is None and values_from is None:
            parts = [[self._heads(t) for t in part.chunk(3, dim=-1)]
                     for part in groups.split(self._projected_together(x))]
        else:
            keys_from = x if keys_from is None else keys_from
            values_from = keys_from if values_from is None else values_from
            queries = groups.split(self.query(x))
            keys, values = key_groups.split(self.key(keys_from)), key_groups.split(self.value(values_from))
            parts = [[self._heads(q), self._heads(k), self._heads(v)] for q, k, v in zip(queries, keys, values)]
        return self.out(Groups.join([self._attend(q, k, v, mask) for (q, k, v), mask in zip(parts,
                                                                                          key_groups.key_masks())]))

    def _packed(self, x: torch.Tensor, keys_from: torch.Tensor | None, values_from: torch.Tensor | None,
                layout: packed_attention.SequenceLayout) -> torch.Tensor:
        """All sequences of a grouped batch attend in one `packed_attention` call (the CPU fast path)."""
        dropout = self.dropout if self.training else 0.0
        if keys_from is None and values_from is None:
            return packed_attention.packed_attention(self._projected_together(x), None, layout, self.num_heads,
                                                     dropout)
        keys_from = x if keys_from is None else keys_from
        values_from = keys_from if values_from is None else values_from
        if values_from is keys_from:
            keys_values = F.linear(keys_from, torch.cat([self.key.weight, self.value.weight]),
                                   torch.cat([self.key.bias, self.value.bias]))
        else:
            keys_values = torch.cat([self.key(keys_from), self.value(values_from)], dim=1)
        return packed_attention.packed_attention(self.query(x), keys_values, layout, self.num_heads, dropout)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        """Heads (B, H, Lq, d_head) attend over (B, H, Lk, d_head); the heads' outputs concatenated, (B, Lq, d)."""
        batch, length_q, length_k = q.size(0), q.size(2), k.size(2)
        past = length_k - length_q  # in self-attention, the query positions are past .. length_k - 1
        dropout = self.dropout if self.training else 0.0
        if self.causal and key_mask is None and self.position in ("absolute", "none") and (past == 0 or length_q == 1):
            # One new query after the cached prefix may see every key; a whole sequence needs the causal mask.
            attended = scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=past == 0 and length_q > 1)
            return attended.transpose(1, 2).reshape(batch, length_q, -1)
        allowed = None if key_mask is None else key_mask[:, None, None, :].bool()
        bias = None
        if self.causal or self.position in ("fixed_span", "t5_bias", "relative"):
            distance = (torch.arange(past, length_k, device=q.device)[:, None]
                        - torch.arange(length_k, device=q.device)[None, :])
            if self.causal:
                allowed = distance.ge(0) if allowed is None else allowed & distance.ge(0)
            if self.position == "fixed_span":
                near = distance.abs().le(self.span)
                allowed = near if allowed is None else allowed & near
            if self.position == "t5_bias":
                capped = distance.clamp(-self.span, self.span) + self.span
                bias = self.relative_bias[:, capped].unsqueeze(0).to(q.dtype)
            if self.position == "relative":
                bias = self._relative_term(q, distance, past)
                q = q + self.content_bias[None, :, None, :].to(q.dtype)
        if bias is not None:
            mask = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
        else:
            mask = allowed
        attended = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        return attended.transpose(1, 2).reshape(batch, length_q, -1)

    def _relative_term(self, q: torch.Tensor, distance: torch.Tensor, past: int) -> torch.Tensor:
        """Terms (b) + (d) of 003 App. C, (q + v)·W_kP P_{i-j}, pre-scaled because SDPA adds the mask after scaling.

        `distance` (Lq, Lk) runs from past - (Lk - 1) (first query, last key) to past + Lq - 1 (last query, key 0).
        """
        nearest = past - (distance.size(1) - 1)
        offsets = torch.arange(nearest, past + distance.size(0), device=q.device)
        table = self._heads(self.position_key(sinusoid(offsets, q.size(1) * self.head_dim).to(q.dtype))[None])[0]
        scores = torch.einsum("bhqd,hrd->bhqr", q + self.position_bias[None, :, None, :].to(q.dtype), table)
        index = (distance - nearest).expand(q.size(0), self.num_heads, -1, -1)
        return scores.gather(-1, index) / math.sqrt(self.head_dim)


class Convolution(nn.Module):
    """1-D convolution over positions with kernel 2·span+1 (000 §3), causal in the decoder; padding reads as zeros."""

    def __init__(self, d_model: int, span: int, causal: bool):
        super().__init__()
        self.span, self.causal = span, causal
        self.conv = nn.Conv1d(d_model, d_model, kernel_size=2 * span + 1)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None,
                depth: int = 0, groups: Groups | None = None) -> torch.Tensor:
        """With a `cache` (causal only), `x` holds the newest positions; the inputs before them come from slot `depth`
        of the self-attention cache, stored as keys of one head (the values are empty). With `groups`, `x` is a
        grouped tensor, convolved group by group (padding masked by the groups' masks)."""
        if groups is not None:
            return Groups.join([self(part, key_mask=mask) for part, mask in zip(groups.split(x), groups.key_masks())])
        if key_mask is not None:
            x = x.masked_fill(~key_mask.bool()[:, :, None], 0.0)
        if cache is not None:
            inputs, _ = cache.self_attention_cache.update(x[:, None], x.new_zeros(x.size(0), 1, x.size(1), 0), depth)
            window = inputs[:, 0, -(2 * self.span + x.size(1)):]
            missing = 2 * self.span + x.size(1) - window.size(1)  # before position 0: zeros, as in the padding below
            return self.conv(F.pad(window.transpose(1, 2), (missing, 0))).transpose(1, 2)
        padding = (2 * self.span, 0) if self.causal else (self.span, self.span)
        return self.conv(F.pad(x.transpose(1, 2), padding)).transpose(1, 2)


class SelfAttentionGate(nn.Module):
    """σ(β) times the self-attention output, β a learned scalar initialised at β₀ (000 Alg. 1, line 4)."""

    def __init__(self, beta0: float):
        super().__init__()
        self.beta0 = float(beta0)
        self.beta = nn.Parameter(torch.tensor(self.beta0))

    def reset_parameters(self) -> None:
        init.constant_(self.beta, self.beta0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta).to(x.dtype)


class FeedForward(nn.Sequential):
    """Linear, ReLU, dropout, linear; the ReLU and the dropout run as one pass on CPU."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, _, dropout, second = self
        return second(dropout.after_relu(first(x)))


class Layer(nn.Module):
    """An encoder layer (`cross=False`) or a decoder layer (`cross=True`, causal mixer) with the configured switches."""

    def __init__(self, config: TransformerConfig, decoder: bool):
        super().__init__()
        d, heads = config.d_model, config.num_heads
        self.pre_norm = config.pre_norm
        self.decoder = decoder
        if config.mixer == "conv":
            self.mixer = Convolution(d, config.span, causal=decoder)
        else:
            self.mixer = Attention(d, heads, config.attention_dropout, config.position, config.span, causal=decoder)
        beta0 = config.decoder_self_attention_gate if decoder else config.encoder_self_attention_gate
        self.gate = SelfAttentionGate(beta0) if beta0 is not None else None
        self.mixer_norm = nn.LayerNorm(d)
        if decoder:
            self.cross_attention = Attention(d, heads, config.attention_dropout)
            self.cross_norm = nn.LayerNorm(d)
        if config.fuse_attention:
            self.fuse_attention = Attention(d, heads, config.attention_dropout)
            self.fuse_norm = nn.LayerNorm(d)
        self.feed_forward = FeedForward(d, config.d_ff, config.activation_dropout)
        self.feed_forward_norm = nn.LayerNorm(d)
        self.dropout = Dropout(config.dropout)

    def _sublayer(self, x: torch.Tensor, norm: nn.LayerNorm, compute) -> torch.Tensor:
        if self.pre_norm:
            return self.dropout.add_to(x, compute(norm(x)))
        return norm(self.dropout.add_to(x, compute(x)))

    def _mix(self, x: torch.Tensor, mask: torch.Tensor | None, cache: EncoderDecoderCache | None = None,
             depth: int = 0, groups: Groups | Packed | None = None) -> torch.Tensor:
        mixed = self.mixer(x, key_mask=mask, cache=cache, depth=depth, groups=groups)
        return self.gate(mixed) if self.gate is not None else mixed

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, below: list[torch.Tensor],
                memory_keys: torch.Tensor | None = None, memory_values: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None,
                depth: int = 0, groups: Groups | Packed | None = None,
                memory_groups: Groups | Packed | None = None) -> torch.Tensor:
        """`cache` (decoder only): the decoding cache, whose slot `depth` belongs to this application of the layer.
        `groups` (training): `x` is a grouped tensor laid out by them; the decoder's memory (the encoder output) is
        laid out by `memory_groups`."""
        x = self._sublayer(x, self.mixer_norm, lambda h: self._mix(h, None if self.decoder else mask, cache, depth,
                                                                    groups))
        if self.decoder:
            x = self._sublayer(x, self.cross_norm, lambda h: self.cross_attention(
                h, keys_from=memory_keys, values_from=memory_values, key_mask=memory_mask, cache=cache, depth=depth,
                groups=groups, key_groups=memory_groups))
        if hasattr(self, "fuse_attention"):
            x = self._sublayer(x, self.fuse_norm, lambda h: self._fuse(h, below))
        return self._sublayer(x, self.feed_forward_norm, self.feed_forward)

    def _fuse(self, x: torch.Tensor, below: list[torch.Tensor]) -> torch.Tensor:
        """Each position attends over its own representations in the layers below (004 Eq. 9-10)."""
        d = x.size(-1)
        stacked = torch.stack(below, dim=-2).reshape(-1, len(below), d)
        return self.fuse_attention(x.reshape(-1, 1, d), keys_from=stacked).reshape(x.shape)


class Stack(nn.Module):
    """`count` layers (or one layer applied `count` times when universal), with a final norm when pre-norm."""

    def __init__(self, config: TransformerConfig, decoder: bool, count: int | None = None, final_norm: bool = True):
        super().__init__()
        self.count = count if count is not None else config.decoder_layers if decoder else config.encoder_layers
        self.universal = config.universal
        self.layers = nn.ModuleList(Layer(config, decoder) for _ in range(1 if config.universal else self.count))
        self.final_norm = nn.LayerNorm(config.d_model) if config.pre_norm and final_norm else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: EncoderDecoderCache | None = None,
                **memory) -> torch.Tensor:
        outputs = [x]
        for depth in range(self.count):
            layer = self.layers[0 if self.universal else depth]
            x = layer(x, mask, outputs, cache=cache, depth=depth, **memory)
            outputs.append(x)
        return self.final_norm(x) if self.final_norm is not None else x


class TransformerForSeq2Seq(ZooSeq2SeqModel):
    """The zoo's Transformer: shared embeddings, tied output layer, switches from `TransformerConfig`."""

    config_class = TransformerConfig
    accepts_length_groups = True

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        self.embedding = TokenEmbedding(config)
        self.embedding_dropout = Dropout(config.dropout)
        self.encoder_stack = Stack(config, decoder=False)
        self.decoder_stack = Stack(config, decoder=True)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif hasattr(module, "reset_parameters") and isinstance(module, (TokenEmbedding, Attention,
                                                                          SelfAttentionGate)):
            module.reset_parameters()

    def get_input_embeddings(self) -> nn.Module:
        return self.embedding

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        hidden = self.encoder_stack(self.embedding_dropout(self.embedding(input_ids)), attention_mask)
        return BaseModelOutput(last_hidden_state=hidden)

    def decode(self, decoder_input_ids: torch.LongTensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               memory_values: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) for every prefix of `decoder_input_ids`; keys and values may come from two encodings.

        With a `cache`, `decoder_input_ids` continue the positions it holds and the logits are theirs only.
        """
        start = cache.get_seq_length() if cache is not None else 0
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(decoder_input_ids, start)), None,
                                    cache=cache, memory_keys=memory, memory_values=memory_values,
                                    memory_mask=memory_mask)
        return F.linear(hidden, self.embedding.weight)

    def grouped_logits(self, length_groups: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """Teacher-forced logits of the real target positions of a batch given as length groups, each a dict of its
        rows' `input_ids`, `attention_mask`, `decoder_input_ids` and (optional, default all ones)
        `decoder_attention_mask`, right-padded to the group's own longest row: (real target positions, vocab),
        group after group, row-major within a group — the order of the groups' labels other than -100.

        The same function as `forward` on each group; position-wise layers run once over the whole batch, which
        saves the per-call overhead of one forward pass per group. When every attention of this model can run in
        `packed_attention`'s kernel, the batch is packed with no padding at all (`Packed`); otherwise each group is
        padded to its own longest row (`Groups`).
        """
        target_masks = [group.get("decoder_attention_mask", torch.ones_like(group["decoder_input_ids"])).bool()
                        for group in length_groups]
        if self._packs(length_groups):
            source_masks = [group["attention_mask"].bool() for group in length_groups]
            sources = Packed(torch.cat([mask.sum(1) for mask in source_masks]).cpu().numpy())
            targets = Packed(torch.cat([mask.sum(1) for mask in target_masks]).cpu().numpy())
            source_ids = torch.cat([group["input_ids"][mask] for group, mask in zip(length_groups, source_masks)])
            target_ids = torch.cat([group["decoder_input_ids"][mask]
                                    for group, mask in zip(length_groups, target_masks)])
            memory_groups = sources
        else:
            # Sources are short and similar in length: the encoder takes all rows as one group padded to the longest
            # source (one attention call per layer), and each target group reads its own rows of the encoder output.
            longest = max(group["input_ids"].size(1) for group in length_groups)
            source_ids = torch.cat([F.pad(group["input_ids"], (0, longest - group["input_ids"].size(1)),
                                          value=self.config.pad_token_id) for group in length_groups]).reshape(-1)
            source_mask = torch.cat([F.pad(group["attention_mask"], (0, longest - group["attention_mask"].size(1)))
                                     for group in length_groups])
            rows = [group["input_ids"].size(0) for group in length_groups]
            sources = Groups([(len(source_mask), longest)], [source_mask])
            memory_groups = Groups([(count, longest) for count in rows], list(source_mask.split(rows)))
            targets = Groups([group["decoder_input_ids"].shape for group in length_groups])
            target_ids = torch.cat([group["decoder_input_ids"].reshape(-1) for group in length_groups])
        memory = self.encoder_stack(self.embedding_dropout(self.embedding(source_ids, groups=sources)), None,
                                    groups=sources)
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(target_ids, groups=targets)), None,
                                    groups=targets, memory_keys=memory, memory_groups=memory_groups)
        if isinstance(targets, Groups):
            hidden = hidden[torch.cat([mask.reshape(-1) for mask in target_masks])]
        return F.linear(hidden, self.embedding.weight)

    def _packs(self, length_groups: list[dict[str, torch.Tensor]]) -> bool:
        """Whether every attention of this model runs in `packed_attention` for this batch: plain attention (no
        distance terms, no convolution), a kernel-sized head, CPU float32, and the kernel built."""
        config = self.config
        if config.position not in ("absolute", "none") or config.mixer != "attention":
            return False
        tokens = sum(group["decoder_input_ids"].numel() + group["input_ids"].numel() for group in length_groups)
        longest = max(max(group["decoder_input_ids"].size(1), group["input_ids"].size(1)) for group in length_groups)
        weight = self.embedding.weight
        return packed_attention.fits(weight.device, weight.dtype, tokens, config.d_model, config.num_heads, longest)

    def decoding_cache(self, past_key_values: Cache | None, use_cache: bool | None) -> EncoderDecoderCache | None:
        """The cache to decode with: the one given (a bare self-attention cache gains a cross-attention one), a new
        one when `use_cache` asks for it, else none (training never builds one unless asked)."""
        if past_key_values is None:
            if not use_cache:
                return None
            return EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        if not isinstance(past_key_values, EncoderDecoderCache):
            return EncoderDecoderCache(past_key_values, DynamicCache(config=self.config))
        return past_key_values

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, past_key_values: Cache | None = None, use_cache: bool | None = None,
                decoder_attention_mask=None, return_dict: bool | None = None,
                length_groups: list[dict[str, torch.Tensor]] | None = None, **kwargs) -> Seq2SeqLMOutput:
        """The usual seq2seq forward; given `length_groups` instead (training), the logits of `grouped_logits`."""
        if length_groups is not None:
            return Seq2SeqLMOutput(logits=self.grouped_logits(length_groups))
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        cache = self.decoding_cache(past_key_values, use_cache)
        logits = self.decode(decoder_input_ids, encoder_outputs.last_hidden_state, attention_mask, cache=cache)
        return self.seq2seq_output(logits, labels, encoder_outputs, past_key_values=cache)
