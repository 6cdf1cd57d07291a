"""One encoder-decoder Transformer whose paper variants are switches (000, 003, 004), not copies.

Switches (all in `TransformerConfig`):

- `position`: "absolute" (sinusoidal, added to the embeddings), "relative" (Transformer-XL attention of 003 App. C:
  symmetric distances in the encoder, causal ones in the decoder; plain attention between encoder and decoder; no
  absolute positions), "t5_bias" (absolute positions plus a learned per-head bias over the signed distance capped
  at ±span in every self-attention, 000 §3), "fixed_span" (absolute positions plus self-attention masked beyond
  distance span, 000 §3), "shaw" (learned embeddings of the clipped distance in every self-attention, no absolute
  positions: 001's relative positions as its authors' code computes them, `Attention._shaw_term`), "none" (no
  position information at all). 000 built T5 and fixed-span attention as additive masks on a fairseq Transformer
  with sinusoidal positions, hence absolute positions stay on for them. `max_relative_position` (M, "shaw" only):
  distances are clipped to ±(M - 1), 2M - 1 embeddings per layer.
- `embedding_scale`: "teu" (Glorot-initialised embeddings times √d plus positions), "none" (N(0, 1) embeddings
  plus positions), "ped" (Kaiming-normal embeddings, std √(2/d), plus positions / √d), "xavier" (Glorot-initialised
  embeddings, no scaling) — 003 App. D, as its official code initialises them (RobertCsordas/
  transformer_generalization, models/transformer_enc_dec.py: `kaiming_normal_` for "scaledinit", whose std is
  √2/√d where the paper's text says N(0, 1/√d); `xavier_uniform_` for the relative variants).
- `universal`: one encoder layer and one decoder layer, applied `encoder_layers` / `decoder_layers` times (003 §2.2);
  positions enter only before the first layer, as in every variant here.
- `encoder_self_attention_gate` / `decoder_self_attention_gate`: β₀ of the self-attention gate σ(β) (000 Alg. 1);
  None leaves the layer ungated.
- `mixer`: "attention" or "conv" (a depthwise 1-D convolution of kernel 2·span+1 and a pointwise projection in
  place of self-attention, causal in the decoder; 000 §3).
- `fuse_attention`: FUSION's fuse-attention (004 §2.2) between the attention and feed-forward sub-layers of every
  layer: position i of layer l attends over that position's outputs of the l layers below (embedding included).
- `pre_norm`: layer norm before each sub-layer (fairseq's `normalize_before`) instead of after it.
- `tie_output`: True (the output layer's weight is the decoder's embedding table, fairseq
  `--share-decoder-input-output-embed`) or False (an output projection of its own, d_model → vocabulary without bias:
  fairseq's default, `TransformerDecoder.build_output_projection`, drawn N(0, d^-1/2) under `init = "fairseq"`).
- `init`: "zoo" (every linear layer Glorot-uniform with zero bias, embeddings as `embedding_scale` says) or
  "fairseq" (as fairseq's Transformer, which 000 trained: embeddings N(0, d^-1/2) with the padding row zero
  (`Embedding` in fairseq/models/transformer.py), query/key/value projections Glorot-uniform with gain 1/√2 and
  PyTorch's default bias, output projection Glorot-uniform with zero bias (`MultiheadAttention.reset_parameters`),
  feed-forward layers PyTorch's default `nn.Linear` init (`build_fc1`/`build_fc2`), and fairseq's sinusoids
  (`SinusoidalPositionalEmbedding`: sines in the first half, cosines in the second, frequencies 10000^(-k/(d/2-1)),
  the first token at position 2, after the padding index 1). Needs `embedding_scale = "teu"` (fairseq scales the
  embeddings by √d).

Dropout: `dropout` on sub-layer outputs, `input_dropout` (default: `dropout`) on the embeddings entering each stack,
`attention_dropout` on attention weights, `activation_dropout` (default: `dropout`) inside the feed-forward block.
003's official relative variants have no input dropout (their identity positional encoding replaces the absolute
one, whose module applies the dropout).

Grouped training (every switch; `TransformerForSeq2Seq.grouped_logits`): a batch cut into length groups runs as one
forward pass, laid out by `benchbuild.zoo.attention.layouts`; the logits equal each group's own forward pass.
Attention goes through `benchbuild.zoo.attention.attend`, whose backend depends on the device and these switches.

Incremental decoding (every switch; `use_cache=True` by default): `generate()` hands the decoder a `transformers`
`EncoderDecoderCache`, of which each depth keeps a slot (`benchbuild.zoo.attention.memory.CacheSlot`); each step
then feeds only the new token, whose position is the cache's length.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.attention import Backend, attend, choose_backend, distances, packed
from benchbuild.zoo.attention.layouts import Groups, GroupedBatch, Packed, SequenceLayout
from benchbuild.zoo.attention.memory import CacheSlot, Memory, decoding_cache
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.layer_norm import LayerNorm
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel, check_choice

POSITIONS = ("absolute", "relative", "t5_bias", "fixed_span", "shaw", "none")
EMBEDDING_SCALES = ("teu", "none", "ped", "xavier")
INITS = ("zoo", "fairseq")
FAIRSEQ_FIRST_POSITION = 2  # fairseq numbers positions from padding_idx + 1, and its dictionary's <pad> is 1
MIXERS = ("attention", "conv")
ABSOLUTE_POSITIONS = ("absolute", "t5_bias", "fixed_span")
DISTANCE_POSITIONS = ("relative", "t5_bias", "fixed_span", "shaw")  # add a distance-dependent term to self-attention
SOURCE_SEGMENT, TARGET_SEGMENT = 1, 2  # values of a segment mask (0: padding), read by cross-boundary attention


class TransformerConfig(ZooConfig):
    """Sizes and switches of the zoo's Transformer; defaults are 003's SCAN model (Table 4)."""

    model_type = "benchbuild_transformer"
    kind = "transformer"
    caches_decoder_states = True

    def __init__(self, d_model: int = 128, num_heads: int = 8, d_ff: int = 256, encoder_layers: int = 3,
                 decoder_layers: int = 3, dropout: float = 0.1, attention_dropout: float = 0.1,
                 activation_dropout: float | None = None, input_dropout: float | None = None,
                 position: str = "absolute", embedding_scale: str = "teu", universal: bool = False,
                 encoder_self_attention_gate: float | None = None, decoder_self_attention_gate: float | None = None,
                 mixer: str = "attention", span: int = 4, fuse_attention: bool = False, pre_norm: bool = False,
                 max_relative_position: int = 16, init: str = "zoo", tie_output: bool = True, **kwargs):
        check_choice("transformer", "position", position, POSITIONS)
        check_choice("transformer", "init", init, INITS)
        if init == "fairseq" and embedding_scale != "teu":
            raise BenchbuildError(f"transformer: init = 'fairseq' needs embedding_scale = 'teu' (fairseq scales its "
                                  f"embeddings by √d), not {embedding_scale!r}")
        if max_relative_position < 1:
            raise BenchbuildError(f"transformer: max_relative_position = {max_relative_position} must be at least 1")
        check_choice("transformer", "embedding_scale", embedding_scale, EMBEDDING_SCALES)
        check_choice("transformer", "mixer", mixer, MIXERS)
        if mixer == "conv" and position in DISTANCE_POSITIONS:
            raise BenchbuildError(f"transformer: position = {position!r} acts on self-attention, which mixer = 'conv' "
                                  "replaces; use position = 'absolute' or 'none' with the convolution")
        if d_model % num_heads:
            raise BenchbuildError(f"transformer: d_model = {d_model} is not divisible by num_heads = {num_heads}")
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.encoder_layers, self.decoder_layers = encoder_layers, decoder_layers
        self.num_hidden_layers = decoder_layers
        self.dropout, self.attention_dropout = dropout, attention_dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.input_dropout = dropout if input_dropout is None else input_dropout
        self.position, self.embedding_scale, self.universal = position, embedding_scale, universal
        self.encoder_self_attention_gate = encoder_self_attention_gate
        self.decoder_self_attention_gate = decoder_self_attention_gate
        self.mixer, self.span, self.fuse_attention, self.pre_norm = mixer, span, fuse_attention, pre_norm
        self.max_relative_position = max_relative_position
        self.init = init
        if not isinstance(tie_output, bool):
            raise BenchbuildError(f"transformer: tie_output = {tie_output!r} must be true or false")
        self.tie_output = tie_output
        super().__init__(**kwargs)


class TransformerForSeq2Seq(ZooSeq2SeqModel):
    """The zoo's Transformer: shared embeddings, tied output layer (unless `tie_output` is off), switches from
    `TransformerConfig`.

    `embedding` embeds decoder inputs and is the output layer's weight (`output_projection`, of its own, when the
    config unties them); it embeds the sources too, unless the config
    has separate dictionaries (`source_vocab_size`): then `source_embedding`, of the source vocabulary, does (fairseq
    `--share-decoder-input-output-embed` without `--share-all-embeddings`, as mswellhao/Dangle run_react.sh and
    yafuly/CoGnition scripts/train.sh train). Both combine words with positions alike (`TokenEmbedding`).
    """

    config_class = TransformerConfig
    accepts_length_groups = True

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        self.embedding = TokenEmbedding(config)
        self.source_embedding = (TokenEmbedding(config, config.source_vocab_size)
                                 if config.source_vocab_size is not None else None)
        self.embedding_dropout = Dropout(config.input_dropout)
        self.encoder_stack = Stack(config, decoder=False)
        self.decoder_stack = Stack(config, decoder=True)
        self.output_projection = output_projection(config)
        self.post_init()

    @property
    def output_weight(self) -> torch.Tensor:
        """The output layer's weight (vocabulary × d_model): the decoder's embedding table, or the untied projection."""
        return self.embedding.weight if self.output_projection is None else self.output_projection.weight

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        role = getattr(module, "fairseq_role", None)
        if role is not None and getattr(self.config, "init", "zoo") == "fairseq":
            _fairseq_linear(module, role)
        elif isinstance(module, (nn.Linear, nn.Conv1d)):
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
        hidden = self.encoder_stack(self.embedding_dropout(self._source_words(input_ids)), attention_mask)
        return BaseModelOutput(last_hidden_state=hidden)

    def _source_words(self, ids: torch.LongTensor, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Embeddings of source ids: by `source_embedding` with separate dictionaries, else the shared one."""
        embedding = self.embedding if self.source_embedding is None else self.source_embedding
        return embedding(ids, layout=layout)

    def decode(self, decoder_input_ids: torch.LongTensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               memory_values: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) for every prefix of `decoder_input_ids`; keys and values may come from two encodings.

        With a `cache`, `decoder_input_ids` continue the positions it holds and the logits are theirs only.
        """
        start = cache.get_seq_length() if cache is not None else 0
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(decoder_input_ids, start)), None,
                                    cache=cache, memory=Memory(memory, memory_mask, memory_values))
        return F.linear(hidden, self.output_weight)

    def grouped_logits(self, length_groups: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """Teacher-forced logits of the real target positions of a batch given as length groups, each a dict of its
        rows' `input_ids`, `attention_mask`, `decoder_input_ids` and (optional, default all ones)
        `decoder_attention_mask`, right-padded to the group's own longest row: (real target positions, vocab),
        group after group, row-major within a group — the order of the groups' labels other than -100. The same
        function as `forward` on each group, in one pass (`benchbuild.zoo.attention.layouts`).
        """
        batch = GroupedBatch.lay_out(length_groups, self.config.pad_token_id, packed=self._packs(length_groups))
        memory = self.encoder_stack(self.embedding_dropout(self._source_words(batch.source_ids, batch.sources)),
                                    None, layout=batch.sources)
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(batch.target_ids, layout=batch.targets)),
                                    None, memory=Memory(memory, layout=batch.memory), layout=batch.targets)
        if batch.real_targets is not None:
            hidden = hidden[batch.real_targets]
        return F.linear(hidden, self.output_weight)

    def _packs(self, length_groups: list[dict[str, torch.Tensor]]) -> bool:
        """Whether every attention of this model runs in the packed kernel for this batch (no convolution, no
        distance terms)."""
        config, weight = self.config, self.embedding.weight
        if config.mixer != "attention" or choose_backend(
                weight.device, weight.dtype, head_dim=config.d_model // config.num_heads, packable=True,
                distance_terms=config.position in DISTANCE_POSITIONS) is not Backend.PACKED:
            return False
        tokens = sum(group["decoder_input_ids"].numel() + group["input_ids"].numel() for group in length_groups)
        longest = max(max(group["decoder_input_ids"].size(1), group["input_ids"].size(1)) for group in length_groups)
        return packed.fits(tokens, config.num_heads, longest)

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, past_key_values: Cache | None = None, use_cache: bool | None = None,
                length_groups: list[dict[str, torch.Tensor]] | None = None, cache: Cache | None = None,
                **kwargs) -> Seq2SeqLMOutput:
        """The usual seq2seq forward; given `length_groups` instead (training), the logits of `grouped_logits`.
        The decoding cache comes as `past_key_values` or (transformers >= 5.24's name) `cache`."""
        if length_groups is not None:
            return Seq2SeqLMOutput(logits=self.grouped_logits(length_groups))
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        cache = decoding_cache(cache if cache is not None else past_key_values, use_cache, self.config)
        logits = self.decode(decoder_input_ids, encoder_outputs.last_hidden_state, attention_mask, cache=cache)
        return self.seq2seq_output(logits, labels, encoder_outputs, past_key_values=cache)


class Stack(nn.Module):
    """`count` layers (or one layer applied `count` times when universal), with a final norm when pre-norm."""

    def __init__(self, config: TransformerConfig, decoder: bool, count: int | None = None, final_norm: bool = True):
        super().__init__()
        self.count = count if count is not None else config.decoder_layers if decoder else config.encoder_layers
        self.universal = config.universal
        self.layers = nn.ModuleList(Layer(config, decoder) for _ in range(1 if config.universal else self.count))
        self.final_norm = LayerNorm(config.d_model) if config.pre_norm and final_norm else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: EncoderDecoderCache | None = None,
                memory: Memory | None = None, layout: Groups | Packed | None = None) -> torch.Tensor:
        outputs = [x]
        for depth in range(self.count):
            layer = self.layers[0 if self.universal else depth]
            slot = CacheSlot(cache, depth) if cache is not None else None
            x = layer(x, mask, outputs, memory=memory, cache=slot, layout=layout)
            outputs.append(x)
        return self.final_norm(x) if self.final_norm is not None else x


class Layer(nn.Module):
    """An encoder layer, or a decoder layer (causal mixer, cross-attention), with the configured switches."""

    def __init__(self, config: TransformerConfig, decoder: bool):
        super().__init__()
        d, heads = config.d_model, config.num_heads
        self.pre_norm = config.pre_norm
        self.decoder = decoder
        if config.mixer == "conv":
            self.mixer = Convolution(d, config.span, causal=decoder)
        else:
            self.mixer = Attention(d, heads, config.attention_dropout, config.position, config.span, causal=decoder,
                                   max_relative_position=config.max_relative_position)
        beta0 = config.decoder_self_attention_gate if decoder else config.encoder_self_attention_gate
        self.gate = SelfAttentionGate(beta0) if beta0 is not None else None
        self.mixer_norm = LayerNorm(d)
        if decoder:
            self.cross_attention = Attention(d, heads, config.attention_dropout)
            self.cross_norm = LayerNorm(d)
        if config.fuse_attention:
            self.fuse_attention = Attention(d, heads, config.attention_dropout)
            self.fuse_norm = LayerNorm(d)
        self.feed_forward = FeedForward(d, config.d_ff, config.activation_dropout)
        self.feed_forward_norm = LayerNorm(d)
        self.dropout = Dropout(config.dropout)

    def _sublayer(self, x: torch.Tensor, norm: nn.LayerNorm, compute) -> torch.Tensor:
        if self.pre_norm:
            return self.dropout.add_to(x, compute(norm(x)))
        return norm(self.dropout.add_to(x, compute(x)))

    def _mix(self, x: torch.Tensor, mask: torch.Tensor | None, cache: CacheSlot | None = None,
             layout: Groups | Packed | None = None) -> torch.Tensor:
        mixed = self.mixer(x, mask, cache=cache, layout=layout)
        return self.gate(mixed) if self.gate is not None else mixed

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, below: list[torch.Tensor],
                memory: Memory | None = None, cache: CacheSlot | None = None,
                layout: Groups | Packed | None = None) -> torch.Tensor:
        """`mask` (encoder): the real positions of `x`; `below`: the outputs of the layers below (for
        fuse-attention); `memory` (decoder): what cross-attention reads; `cache` (decoding): this application's
        slot; `layout` (grouped training): how `x`, a flat tensor, is laid out."""
        x = self._sublayer(x, self.mixer_norm, lambda h: self._mix(h, None if self.decoder else mask, cache, layout))
        if self.decoder:
            x = self._sublayer(x, self.cross_norm, lambda h: self.cross_attention(h, memory=memory, cache=cache,
                                                                                   layout=layout))
        if hasattr(self, "fuse_attention"):
            x = self._sublayer(x, self.fuse_norm, lambda h: self._fuse(h, below))
        return self._sublayer(x, self.feed_forward_norm, self.feed_forward)

    def _fuse(self, x: torch.Tensor, below: list[torch.Tensor]) -> torch.Tensor:
        """Each position attends over its own representations in the layers below (004 Eq. 9-10)."""
        d = x.size(-1)
        stacked = torch.stack(below, dim=-2).reshape(-1, len(below), d)
        return self.fuse_attention(x.reshape(-1, 1, d), memory=Memory(stacked)).reshape(x.shape)


class Attention(nn.Module):
    """Multi-head attention; in self-attention `position` adds its distance-dependent term to the logits.

    "shaw" (`max_relative_position` M): one table R of 2M - 1 learned d_head-vectors per layer, shared by its heads;
    `segmented` (Dangle's adaptive layers) adds a second table for the target side and two boundary vectors
    (`_shaw_index`). All start at 0: the official `Embedding` helper (mswellhao/Dangle
    fairseq/fairseq/modules/multihead_attention_relative.py) draws N(0, d_head^-1/2), then zeroes
    `weight[padding_idx]`, and with padding_idx None that index is the whole table.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float, position: str = "none", span: int = 0,
                 causal: bool = False, max_relative_position: int = 16, segmented: bool = False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.dropout, self.position, self.span, self.causal = dropout, position, span, causal
        self.max_relative_position, self.segmented = max_relative_position, segmented
        self.query = _with_role(nn.Linear(d_model, d_model), "projection")
        self.key = _with_role(nn.Linear(d_model, d_model), "projection")
        self.value = _with_role(nn.Linear(d_model, d_model), "projection")
        self.out = _with_role(nn.Linear(d_model, d_model), "output")
        if position == "t5_bias":
            self.relative_bias = nn.Parameter(torch.zeros(num_heads, 2 * span + 1))
        if position == "relative":
            self.position_key = nn.Linear(d_model, d_model, bias=False)
            self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
            self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        if position == "shaw":  # official names: distance_embedding_src, _tgt, _st
            self.distance_table = nn.Parameter(torch.zeros(2 * max_relative_position - 1, self.head_dim))
            if segmented:
                self.target_distance_table = nn.Parameter(torch.zeros(2 * max_relative_position - 1, self.head_dim))
                self.boundary_table = nn.Parameter(torch.zeros(2, self.head_dim))

    def reset_parameters(self) -> None:
        if self.position == "t5_bias":
            init.zeros_(self.relative_bias)
        if self.position == "relative":
            init.zeros_(self.content_bias)
            init.zeros_(self.position_bias)
        if self.position == "shaw":
            for table in self._shaw_tables():
                init.zeros_(table)

    def _shaw_tables(self) -> list[nn.Parameter]:
        if self.segmented:
            return [self.distance_table, self.target_distance_table, self.boundary_table]
        return [self.distance_table]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def _projected_together(self, x: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values of self-attention from one fused projection, as in nn.MultiheadAttention."""
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        projection_bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        return F.linear(x, weight, projection_bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, memory: Memory | None = None,
                cache: CacheSlot | None = None, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Self-attention of `x` (B, Lq, d), `mask` (B, Lq) marking its real positions, or attention from `x` over
        `memory`. With a `cache`, self-attention appends its keys and values to the slot and attends over all of
        them (`x` holds the last Lq positions only); `memory` is projected into the slot once, then reused. With a
        `layout` (training), `x` is a flat tensor laid out by it and each sequence attends within itself.
        """
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
            return F.linear(memory.keys, torch.cat([self.key.weight, self.value.weight]),
                            torch.cat([self.key.bias, self.value.bias])).chunk(2, dim=-1)
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
                          distance_terms=self.position in DISTANCE_POSITIONS) is not Backend.PACKED:
            return None
        sequences = layout.sequence_layout(keys, self.causal)
        fits = sequences is not None and packed.fits(x.size(0), self.num_heads, sequences.longest_keys)
        return sequences if fits else None

    def _dropout(self) -> float:
        return self.dropout if self.training else 0.0

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        """Heads (B, H, Lq, d_head) attend over (B, H, Lk, d_head) with this layer's position terms and `key_mask`
        (B, Lk); the heads' outputs concatenated, (B, Lq, d).

        000 Eq. 3: α_ij = q_i · k_j / √d + b_ij, the bias b_ij added to the scaled logits (000: "additive attention
        masks" on fairseq's Transformer). "fixed_span": b_ij = 0 for |i - j| <= s, -inf beyond (`window`); "t5_bias":
        b_ij = B[h, clamp(i - j, -s, s) + s], one learned (2s + 1)-vector per head and layer, initialised at 0 (000 §3,
        "T5 attention": distances beyond s share b_{±s}; (2s + 1) × n_l × n_h parameters). Both act in encoder and
        decoder self-attention only, never in cross-attention, and keep the absolute positions. "shaw": `_shaw_term`;
        a `segmented` layer reads `key_mask` as a segment mask (SOURCE_SEGMENT / TARGET_SEGMENT, 0 at padding)."""
        bias = None
        if self.position == "shaw":
            if self.segmented and (key_mask is None or key_mask.dtype == torch.bool):
                raise BenchbuildError("cross-boundary attention needs a segment mask (1: source, 2: target, 0: "
                                      "padding), not a boolean mask")
            index = self._shaw_index(q.size(2), k.size(2), key_mask if self.segmented else None, q.device)
            bias = self._shaw_term(q, k, index)
        elif self.position in ("t5_bias", "relative"):
            distance = distances(q.size(2), k.size(2), q.device)
            if self.position == "t5_bias":
                bias = self.relative_bias[:, distance.clamp(-self.span, self.span) + self.span].unsqueeze(0).to(q.dtype)
            else:
                bias = self._relative_term(q, distance, k.size(2) - q.size(2))
                q = q + self.content_bias[None, :, None, :].to(q.dtype)
        return attend(q, k, v, key_mask=key_mask, causal=self.causal, bias=bias, dropout=self._dropout(),
                      window=self.span if self.position == "fixed_span" else None)

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

    def _shaw_index(self, length_q: int, length_k: int, segments: torch.Tensor | None,
                    device: torch.device) -> torch.Tensor:
        """The row r_ij of the stacked tables that query i and key j read: (Lq, Lk), or (B, L, L) with `segments`.

        Unsegmented (MultiheadAttentionWithRelPos): r_ij = clamp(i - j, -(M - 1), M - 1) + M - 1, the queries being
        the last Lq of the Lk positions (a cached step's query sits at Lk - 1, as the official single step does).
        Segmented (MultiheadAttentionWithRelPosCrossBoundry, `segments` (B, L) as SOURCE_SEGMENT / TARGET_SEGMENT,
        each side one contiguous run): source-source pairs read `distance_table` and target-target pairs
        `target_distance_table` (rows offset by 2M - 1) at their distance, which is the same counted within the side
        (as the official code does) or along the row; a pair across the boundary gets no distance but one of two
        vectors, `boundary_table` row 0 for a source query over a target key, row 1 for a target query over a source
        key (rows 4M - 2 and 4M - 1). So nothing a source token sees of positions depends on the target side.
        """
        reach = self.max_relative_position - 1
        distance = distances(length_q, length_k, device).clamp(-reach, reach) + reach
        if segments is None:
            return distance
        target = segments.eq(TARGET_SEGMENT)  # padding counts as source: its keys are masked anyway
        query_target, key_target = target[:, :, None], target[:, None, :]
        span = 2 * reach + 1
        same_side = distance + span * query_target.long()
        across = 2 * span + query_target.long()
        return torch.where(query_target == key_target, same_side, across)

    def _shaw_term(self, q: torch.Tensor, k: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """(q_i · r_ij + k_j · r_ij) / √d_head for every head (B, H, Lq, Lk), added to the scaled q_i · k_j / √d_head.

        001 App. B cites Shaw et al. (2018) and Huang et al. (2020); the official MultiheadAttentionWithRelPos computes
        Huang et al.'s key-and-query form: e_ij = (q_i·k_j + q_i·r_ij + k_j·r_ij) · d_head^-1/2, with q and k the
        projections (biases included) and r_ij = R[`index`] shared by the layer's heads; values get no position term.
        It runs in encoder and decoder self-attention; cross-attention is fairseq's plain MultiheadAttention.
        """
        table = torch.cat(self._shaw_tables()).to(q.dtype)
        by_query = torch.einsum("bhqd,rd->bhqr", q, table)  # q_i · R[r] for every row r
        by_key = torch.einsum("bhkd,rd->bhkr", k, table)  # k_j · R[r]
        index = (index if index.dim() == 3 else index[None])[:, None]
        index = index.expand(q.size(0), self.num_heads, q.size(2), k.size(2))
        by_pair = by_query.gather(-1, index) + by_key.gather(-1, index.transpose(-1, -2)).transpose(-1, -2)
        return by_pair / math.sqrt(self.head_dim)


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


def output_projection(config: TransformerConfig) -> nn.Linear | None:
    """The untied output layer (`tie_output = False`): d_model → vocabulary, no bias (fairseq
    `TransformerDecoder.build_output_projection` without `--share-decoder-input-output-embed`); None when tied."""
    if config.tie_output:
        return None
    return _with_role(nn.Linear(config.d_model, config.vocab_size, bias=False), "output_embedding")


def _with_role(linear: nn.Linear, role: str) -> nn.Linear:
    """`linear` marked with how `init = "fairseq"` draws it (`_fairseq_linear`)."""
    linear.fairseq_role = role
    return linear


def _fairseq_linear(linear: nn.Linear, role: str) -> None:
    """fairseq's initialisation of a linear layer by its role: an attention "projection" (query, key, value:
    Glorot-uniform, gain 1/√2), an attention "output" (Glorot-uniform, zero bias), a "feed_forward" layer
    (PyTorch's own `nn.Linear` init: Kaiming-uniform with a = √5, i.e. U(±1/√fan_in)), or the untied
    "output_embedding" (N(0, d^-1/2), `build_output_projection`). Biases fairseq does not redraw keep PyTorch's
    U(±1/√fan_in)."""
    if role == "output_embedding":
        init.normal_(linear.weight, mean=0.0, std=linear.in_features ** -0.5)
    elif role == "projection":
        init.xavier_uniform_(linear.weight, gain=1 / math.sqrt(2))
    elif role == "output":
        init.xavier_uniform_(linear.weight)
    else:
        init.kaiming_uniform_(linear.weight, a=math.sqrt(5))
    if role == "output":
        init.zeros_(linear.bias)
    elif linear.bias is not None:
        bound = 1 / math.sqrt(linear.in_features)
        init.uniform_(linear.bias, -bound, bound)


class FeedForward(nn.Sequential):
    """Linear, ReLU, dropout, linear; the ReLU and the dropout run as one pass on CPU."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__(_with_role(nn.Linear(d_model, d_ff), "feed_forward"), nn.ReLU(), Dropout(dropout),
                         _with_role(nn.Linear(d_ff, d_model), "feed_forward"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, _, dropout, second = self
        return second(dropout.after_relu(first(x)))


class TokenEmbedding(nn.Module):
    """Word embeddings combined with positions per 003 App. D: of `vocab_size` words (default: the config's, shared
    by encoder, decoder and output layer; a source dictionary's for the encoder of separate dictionaries)."""

    def __init__(self, config: TransformerConfig, vocab_size: int | None = None):
        super().__init__()
        self.scale = config.embedding_scale
        self.d_model = config.d_model
        self.absolute = config.position in ABSOLUTE_POSITIONS
        self.fairseq = getattr(config, "init", "zoo") == "fairseq"
        self.padding_index = config.pad_token_id
        self.weight = nn.Parameter(torch.empty(config.vocab_size if vocab_size is None else vocab_size,
                                               config.d_model))

    def reset_parameters(self) -> None:
        if self.fairseq:
            # A loaded checkpoint's weight is flagged initialised: neither it nor its padding row is drawn again.
            if not getattr(self.weight, "_is_hf_initialized", False):
                init.normal_(self.weight, mean=0.0, std=self.d_model ** -0.5)
                if self.padding_index is not None:
                    init.zeros_(self.weight[self.padding_index])
        elif self.scale in ("teu", "xavier"):
            init.xavier_uniform_(self.weight)
        elif self.scale == "none":
            init.normal_(self.weight, mean=0.0, std=1.0)
        else:  # "ped": torch's kaiming_normal_ of a (vocab, d) weight (fan_in d, ReLU gain √2), as 003's code
            init.normal_(self.weight, mean=0.0, std=math.sqrt(2.0 / self.d_model))

    def forward(self, ids: torch.LongTensor, start: int = 0, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Embeddings of `ids`, the first of which sits at position `start` (the cached prefix's length); with a
        `layout`, of the grouped ids (a flat tensor), each at its position within its sequence."""
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
