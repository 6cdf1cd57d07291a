"""The sub-layers of the zoo's Transformer: multi-head attention (with the distance terms of
`benchbuild.zoo.positions` in self-attention), 000's convolution and self-attention gate, the feed-forward block.
How they are stacked into encoder and decoder layers: `benchbuild.zoo.transformer`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import positions
from benchbuild.zoo.attention import Backend, attend, choose_backend, distances, packed
from benchbuild.zoo.attention.layouts import Groups, Packed, SequenceLayout
from benchbuild.zoo.attention.memory import CacheSlot, Memory
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.initialisation import with_003_draw, with_role
from benchbuild.zoo.layer_norm import LayerNorm

HEAD_WIDTHS = ("split", "model")  # `TransformerConfig.head_width`: d_model / heads per head, or d_model each
ATTENTION_SUBLAYERS = ("transformer", "prototype")  # `TransformerConfig.attention_sublayer`


class Attention(nn.Module):
    """Multi-head attention; in self-attention `position` adds its distance-dependent term to the logits
    (`benchbuild.zoo.positions`): "t5_bias" a table of (2·span + 1) biases per head, "relative" a position key
    projection and two bias vectors (003 App. C's u and v), "shaw" one table of 2M - 1 learned d_head-vectors per
    layer shared by its heads (M = `max_relative_position`), with `segmented` (Dangle's adaptive layers) a second
    table for the target side and two boundary vectors. All start at 0, but the T5 bias under `bias_init = "normal"`
    (N(0, 1)).

    Two switches give self-attention the form of 000's July-2020 prototype (robertodessi/fairseq, branch dev,
    fairseq/models/ctronn_attention.py L55-113 (MultiheadRelativeAttention)): `head_width = "model"` makes each
    head d_model wide (queries, keys and values d → H·d, the output H·d → d, logits scaled by 1/√d: its L69-80 and
    L94), and `sublayer = "prototype"` makes the module return LayerNorm(x + dropout(out(heads))), `dropout` on the
    output projection instead of on the attention weights (its L111-112), with the prototype's draws
    (`_prototype_draw`).
    `benchbuild.zoo.transformer.self_attention_form` says which config keys set them.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float, position: str = "none", span: int = 0,
                 causal: bool = False, max_relative_position: int = 16, segmented: bool = False,
                 key_dim: int | None = None, bias_init: str = "zeros", bias: bool = True, head_width: str = "split",
                 sublayer: str = "transformer"):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model if head_width == "model" else d_model // num_heads
        self.dropout, self.position, self.span, self.causal = dropout, position, span, causal
        self.sublayer = sublayer
        self.max_relative_position, self.segmented, self.bias_init = max_relative_position, segmented, bias_init
        # `key_dim`: the width of what keys and values are projected from when it is not d_model (cross-attention
        # over an encoder of another width: fairseq's kdim = vdim = encoder_embed_dim).
        key_dim = d_model if key_dim is None else key_dim
        role = "projection" if key_dim == d_model else "projection_unequal"
        draw = "pytorch" if position == "relative" else "xavier"  # 003's relative attention is never reset
        inner = num_heads * self.head_dim
        self.query = with_003_draw(with_role(nn.Linear(d_model, inner, bias=bias), role), draw)
        self.key = with_003_draw(with_role(nn.Linear(key_dim, inner, bias=bias), role), draw)
        self.value = with_003_draw(with_role(nn.Linear(key_dim, inner, bias=bias), role), draw)
        self.out = with_003_draw(with_role(nn.Linear(inner, d_model, bias=bias), "output"), draw)
        if sublayer == "prototype":
            self.output_dropout, self.norm = Dropout(dropout), LayerNorm(d_model)
        if position == "t5_bias":
            self.relative_bias = nn.Parameter(torch.zeros(num_heads, 2 * span + 1))
        if position == "relative":
            self.position_key = with_003_draw(nn.Linear(d_model, d_model, bias=False), "pytorch")
            self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
            self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        if position == "shaw":  # official names: distance_embedding_src, _tgt, _st
            self.distance_table = nn.Parameter(torch.zeros(2 * max_relative_position - 1, self.head_dim))
            if segmented:
                self.target_distance_table = nn.Parameter(torch.zeros(2 * max_relative_position - 1, self.head_dim))
                self.boundary_table = nn.Parameter(torch.zeros(2, self.head_dim))

    def reset_parameters(self) -> None:
        if self.position == "t5_bias" and self.bias_init == "normal":
            init.normal_(self.relative_bias, mean=0.0, std=1.0)
        elif self.position == "t5_bias":
            init.zeros_(self.relative_bias)
        if self.position == "relative":
            init.zeros_(self.content_bias)
            init.zeros_(self.position_bias)
        if self.position == "shaw":
            for table in self._shaw_tables():
                init.zeros_(table)
        if self.sublayer == "prototype":
            self._prototype_draw()

    def _prototype_draw(self) -> None:
        """The prototype's draws (fairseq/models/ctronn_attention.py L72-81), over whatever `init` drew: query, key
        and value weights N(0, √(2 / (d_model + d_head))), the output weight Glorot-normal, every bias PyTorch's
        `nn.Linear` U(±1/√fan_in)."""
        for projection in (self.query, self.key, self.value):
            init.normal_(projection.weight, mean=0.0, std=math.sqrt(2.0 / (projection.in_features + self.head_dim)))
        init.xavier_normal_(self.out.weight)
        for projection in (self.query, self.key, self.value, self.out):
            if projection.bias is not None:
                bound = 1 / math.sqrt(projection.in_features)
                init.uniform_(projection.bias, -bound, bound)

    def _shaw_tables(self) -> list[nn.Parameter]:
        if self.segmented:
            return [self.distance_table, self.target_distance_table, self.boundary_table]
        return [self.distance_table]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def _projected_together(self, x: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values of self-attention from one fused projection, as in nn.MultiheadAttention."""
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        if self.query.bias is None:
            return F.linear(x, weight)
        return F.linear(x, weight, torch.cat([self.query.bias, self.key.bias, self.value.bias]))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, memory: Memory | None = None,
                cache: CacheSlot | None = None, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Self-attention of `x` (B, Lq, d), `mask` (B, Lq) marking its real positions, or attention from `x` over
        `memory`. With a `cache`, self-attention appends its keys and values to the slot and attends over all of
        them (`x` holds the last Lq positions only); `memory` is projected into the slot once, then reused. With a
        `layout` (training), `x` is a flat tensor laid out by it and each sequence attends within itself. Under
        `sublayer = "prototype"`: LayerNorm(x + dropout(that)).
        """
        attended = self._attention(x, mask, memory, cache, layout)
        if self.sublayer == "prototype":
            return self.norm(self.output_dropout.add_to(x, attended))
        return attended

    def _attention(self, x: torch.Tensor, mask: torch.Tensor | None, memory: Memory | None,
                   cache: CacheSlot | None, layout: Groups | Packed | None) -> torch.Tensor:
        if layout is not None:
            return self._grouped(x, memory, layout)
        if memory is None:
            q, k, v = (self._heads(part) for part in self._projected_together(x).chunk(3, dim=-1))
            if cache is not None:
                k, v = cache.append(k, v)
            return self.out(self._attend(q, k, v, mask))
        q = self._heads(self.query(x))
        if cache is not None:
            k, v = cache.memory(lambda: [self._heads(part) for part in self._project_memory(memory)])
        else:
            k, v = (self._heads(part) for part in self._project_memory(memory))
        return self.out(self._attend(q, k, v, memory.mask))

    def _project_memory(self, memory: Memory, fused: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of `memory`; `fused`: as column blocks of one projection (what the packed kernel reads
        in place) where they come from one tensor."""
        if memory.values is not None:
            return self.key(memory.keys), self.value(memory.values)
        if fused:
            bias = None if self.key.bias is None else torch.cat([self.key.bias, self.value.bias])
            return F.linear(memory.keys, torch.cat([self.key.weight, self.value.weight]), bias).chunk(2, dim=-1)
        return self.key(memory.keys), self.value(memory.keys)

    def _grouped(self, x: torch.Tensor, memory: Memory | None, layout: Groups | Packed) -> torch.Tensor:
        """Attention of a flat batch laid out by `layout` (its memory by `memory.layout`): every sequence in one call
        of the packed kernel where it attends this call, else group by group."""
        keys = layout if memory is None else memory.layout
        sequences = self._packed_sequences(x, layout, keys)
        if memory is None:
            q, k, v = self._projected_together(x).chunk(3, dim=-1)
        else:
            q, (k, v) = self.query(x), self._project_memory(memory, fused=sequences is not None)
        if sequences is not None:
            heads = (self._heads(part[None]) for part in (q, k, v))
            return self.out(attend(*heads, dropout=self._dropout(), layout=sequences)[0])
        groups = zip(layout.split(q), keys.split(k), keys.split(v), keys.key_masks())
        return self.out(Groups.join([self._attend(self._heads(q), self._heads(k), self._heads(v), mask)
                                     for q, k, v, mask in groups]))

    def _packed_sequences(self, x: torch.Tensor, layout: Groups | Packed,
                          keys: Groups | Packed) -> SequenceLayout | None:
        """Where each sequence's queries and keys are, when the packed kernel attends this call: `choose_backend`
        gives PACKED (before any layout is looked at) and the batch fits the kernel."""
        if choose_backend(x.device, x.dtype, head_dim=self.head_dim, packable=True,
                          distance_terms=self.position in positions.DISTANCE_POSITIONS) is not Backend.PACKED:
            return None
        sequences = layout.sequence_layout(keys, self.causal)
        fits = sequences is not None and packed.fits(x.size(0), self.num_heads, sequences.longest_keys)
        return sequences if fits else None

    def _dropout(self) -> float:
        """The drop probability of attention weights: none under the prototype's sub-layer, which drops the output."""
        return self.dropout if self.training and self.sublayer != "prototype" else 0.0

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        """Heads (B, H, Lq, d_head) attend over (B, H, Lk, d_head) with this layer's position terms and `key_mask`
        (B, Lk); the heads' outputs concatenated, (B, Lq, d).

        000 Eq. 3: α_ij = q_i · k_j / √d + b_ij, the bias b_ij added to the scaled logits (000: "additive attention
        masks" on fairseq's Transformer): "fixed_span" b_ij = 0 for |i - j| <= s, -inf beyond (`window`);
        "t5_bias" `positions.t5_bias`; "relative" `positions.relative_term`; "shaw" `positions.shaw_term` (a
        `segmented` layer reads `key_mask` as a segment mask: SOURCE_SEGMENT / TARGET_SEGMENT, 0 at padding)."""
        bias = None
        if self.position == "shaw":
            if self.segmented and (key_mask is None or key_mask.dtype == torch.bool):
                raise BenchbuildError("cross-boundary attention needs a segment mask (1: source, 2: target, 0: "
                                      "padding), not a boolean mask")
            index = positions.shaw_index(q.size(2), k.size(2), self.max_relative_position,
                                         key_mask if self.segmented else None, q.device)
            bias = positions.shaw_term(q, k, torch.cat(self._shaw_tables()), index)
        elif self.position == "t5_bias":
            bias = positions.t5_bias(self.relative_bias, self.span, q.size(2), k.size(2), q.dtype)
        elif self.position == "relative":
            distance = distances(q.size(2), k.size(2), q.device)
            bias = positions.relative_term(q, distance, k.size(2) - q.size(2), self.position_key, self.position_bias)
            q = q + self.content_bias[None, :, None, :].to(q.dtype)
        return attend(q, k, v, key_mask=key_mask, causal=self.causal, bias=bias, dropout=self._dropout(),
                      window=self.span if self.position == "fixed_span" else None)


class Convolution(nn.Module):
    """1-D convolution over positions with kernel 2·span+1 (000 §3), causal in the decoder; padding reads as zeros.

    Depthwise (one kernel per channel) then a pointwise d×d projection: (2s+1)·d + d² weights against
    self-attention's 4·d², as 000 §3 says ("convolutional layers have fewer parameters than the self-attention
    mechanism"); a dense d×d×(2s+1) kernel would have more (9·d² at s = 4). 000 gives no code link and the
    authors' code was not found, so the form follows fairseq's lightweight-convolution layer (Wu et al. 2019,
    `fairseq/models/lightconv.py`: per-channel kernels between d×d projections), the fairseq family 000 built on.
    """

    def __init__(self, d_model: int, span: int, causal: bool):
        super().__init__()
        self.span, self.causal = span, causal
        self.conv = nn.Conv1d(d_model, d_model, kernel_size=2 * span + 1, groups=d_model)
        self.pointwise = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: CacheSlot | None = None,
                layout: Groups | None = None) -> torch.Tensor:
        """With a `cache` (causal only), `x` holds the newest positions; the inputs before them come from the slot,
        stored as keys of one head (the values are empty). With a `layout`, `x` is a flat tensor, convolved group
        by group (padding masked by the groups' masks)."""
        if layout is not None:
            return Groups.join([self(part, mask) for part, mask in zip(layout.split(x), layout.key_masks())])
        if mask is not None:
            x = x.masked_fill(~mask.bool()[:, :, None], 0.0)
        if cache is not None:
            inputs, _ = cache.append(x[:, None], x.new_zeros(x.size(0), 1, x.size(1), 0))
            window = inputs[:, 0, -(2 * self.span + x.size(1)):]
            missing = 2 * self.span + x.size(1) - window.size(1)  # before position 0: zeros, as in the padding below
            return self.pointwise(self.conv(F.pad(window.transpose(1, 2), (missing, 0))).transpose(1, 2))
        padding = (2 * self.span, 0) if self.causal else (self.span, self.span)
        return self.pointwise(self.conv(F.pad(x.transpose(1, 2), padding)).transpose(1, 2))


class SelfAttentionGate(nn.Module):
    """σ(β) times the self-attention output, β a learned scalar initialised at β₀ (000 Alg. 1, line 4:
    x ← self_attn(x); x ← x · σ(β); x ← layer_norm(res + dropout(x)): `Layer._mix` gates, `_sublayer` adds and
    normalises). One per encoder and decoder layer, on self-attention only."""

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
        super().__init__(with_003_draw(with_role(nn.Linear(d_model, d_ff), "feed_forward"), "xavier_relu"), nn.ReLU(),
                         Dropout(dropout), with_003_draw(with_role(nn.Linear(d_ff, d_model), "feed_forward"), "xavier"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, _, dropout, second = self
        return second(dropout.after_relu(first(x)))
