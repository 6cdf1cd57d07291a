"""Dangle and R-Dangle (001 §2-3): adaptive re-encoding of [source; target prefix] during decoding.

At a re-encoding point t the adaptive encoder reads C_t = [x_1..x_n; y_0..y_t; e] (y_0 the start token, e a learned
end-of-prefix vector) through k₁ cross-boundary layers (`adaptive_layers`), keeps the n source positions and passes
them through k₂ more layers (`source_layers`) and a final norm: H_t. Decoder positions t..t+o-1 attend over H_t,
where o is `interval` (o = 1 is Dangle; 001 Table 4 notes R-Dangle_shr at interval 1 is Dangle), and the whole target
prefix is re-decoded against H_t, as in Eq. 12-13. With `separate_keys_values` (R-Dangle_sep, Eq. 14-20) the
cross-attention keys come from H_t while the values come from H^v: the source and a learned end vector through
`value_layers` cross-boundary layers of their own, then the same k₂ layers (001 App. B shares the top layers of the
two encoders) and a norm of their own.

How the authors' code builds the adaptive encoder (mswellhao/Dangle, fairseq/fairseq/models/
transformer_rdangle_kv_shared.py — R-Dangle_shr, Dangle at --chunk-size 1 — and transformer_rdangle_kv_sep.py;
layers in fairseq/fairseq/modules/transformer_layer.py, attention in modules/multihead_attention_relative.py):

- embeddings: source tokens are √d·E[x] + `src_emb` (one learned vector), target tokens √d·E[y] + `tgt_emb[0]`,
  each then dropped out once; the same target states feed the adaptive encoder's prefix and the decoder's input.
  No absolute positions (the `_rel_pos` architectures set no_token_positional_embeddings); with position
  "absolute" here, source and prefix are embedded apart and each counts from 0.
- C_t = [source states; the first t + 1 target states; `tgt_emb[1]`]: the end-of-prefix token is a learned vector,
  not a vocabulary symbol, and is not dropped out. R-Dangle_sep's value encoder reads [source states; `se_emb`].
- the k₁ layers are TransformerEncoderLayerCrossBoundary with `dangle_encoder_attention_heads` = 8 heads (the
  architectures transformer_rdangle_kv_shared / _kv_sep set it; every other attention has 4); their relative
  positions count within the source and within the target side separately, and a source-target pair gets one of
  two learned vectors instead of a distance (`benchbuild.zoo.positions.shaw_index`). The k₂ layers
  and the decoder use the plain relative attention.
- after the k₂ layers: `enc_layer_norm` (kv_shared), `key_layer_norm` / `value_layer_norm` (kv_sep), when pre-norm.

Decoding re-runs the adaptive encoder on the prefix inside `forward`, so `generate()` works without a cache: the
encoder output it holds carries the source states (and H^v) for the re-encodings.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.attention.memory import Memory
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.layer_norm import LayerNorm
from benchbuild.zoo.positions import SOURCE_SEGMENT, TARGET_SEGMENT, TokenEmbedding
from benchbuild.zoo.transformer import Stack, TransformerConfig, TransformerForSeq2Seq, output_projection
from benchbuild.zoo.transformer_layers import Attention


class DangleConfig(TransformerConfig):
    """The Transformer's sizes and switches plus k₁, k₂, the interval o, the key/value separation, and how the
    adaptive encoder marks the two sides of C_t; the defaults of these last keys are the authors' code's.

    - `adaptive_heads`: heads of the k₁ cross-boundary layers (and R-Dangle_sep's value layers): the official
      `dangle_encoder_attention_heads`, 8 in transformer_rdangle_kv_shared.py and transformer_rdangle_kv_sep.py
      (`transformer_parsing`), where the other layers have `num_heads` = 4.
    - `type_embeddings`: add a learned source vector to every source embedding and a learned target vector to every
      target embedding, the decoder's input included (`src_emb`, `tgt_emb[0]` of those files).
    - `end_of_prefix`: close the target side of C_t with a learned vector (`tgt_emb[1]`), and R-Dangle_sep's value
      encoder input [source] with another (`se_emb`).

    With position "shaw" the k₁ layers take the cross-boundary positions of MultiheadAttentionWithRelPosCrossBoundry
    (modules/multihead_attention_relative.py); `max_relative_position` is the official --max-relative-position.
    """

    model_type = "benchbuild_dangle"
    kind = "dangle"
    caches_decoder_states = False  # every re-encoding changes the memory and re-decodes the whole prefix

    def __init__(self, adaptive_layers: int = 2, source_layers: int = 10, interval: int = 1,
                 separate_keys_values: bool = False, value_layers: int | None = None, adaptive_heads: int = 8,
                 type_embeddings: bool = True, end_of_prefix: bool = True, **kwargs):
        if interval < 1:
            raise BenchbuildError(f"dangle: interval = {interval} must be at least 1")
        d_model = kwargs.get("d_model", 128)
        if adaptive_heads < 1 or d_model % adaptive_heads:
            raise BenchbuildError(f"dangle: d_model = {d_model} is not divisible by adaptive_heads = {adaptive_heads}")
        self.adaptive_layers = adaptive_layers
        self.source_layers = source_layers
        self.interval = interval
        self.separate_keys_values = separate_keys_values
        self.value_layers = adaptive_layers if value_layers is None else value_layers
        self.adaptive_heads = adaptive_heads
        self.type_embeddings = type_embeddings
        self.end_of_prefix = end_of_prefix
        kwargs["encoder_layers"] = adaptive_layers + source_layers
        super().__init__(**kwargs)
        if self.sizes(decoder=False) != self.sizes(decoder=True):
            raise BenchbuildError("dangle: the encoder re-reads the decoder's prefix, so encoder and decoder take one "
                                  "width, head count and feed-forward size: set d_model, num_heads and d_ff only")


@dataclass
class DangleEncoding(ModelOutput):
    """`last_hidden_state`: H^v (separate keys/values) or the source encoded alone; `source_states`: the source
    embedded (type vector added, dropped out) once, which every re-encoding reads, as the official decoder reads the
    encoder's output."""

    last_hidden_state: torch.Tensor | None = None
    source_states: torch.Tensor | None = None


class SideVectors(nn.Module):
    """The learned d-vectors that mark the sides of C_t (see `DangleConfig`), each drawn N(0, 0.02) as the official
    `nn.init.normal_(..., std=0.02)` draws `src_emb`, `tgt_emb` and `se_emb`."""

    def __init__(self, config: DangleConfig):
        super().__init__()
        d = config.d_model
        if config.type_embeddings:
            self.source_type = nn.Parameter(torch.empty(d))
            self.target_type = nn.Parameter(torch.empty(d))
        if config.end_of_prefix:
            self.end_of_prefix = nn.Parameter(torch.empty(d))
            if config.separate_keys_values:
                self.end_of_source = nn.Parameter(torch.empty(d))

    def reset_parameters(self) -> None:
        for vector in self.parameters():
            init.normal_(vector, mean=0.0, std=0.02)

    def source(self, states: torch.Tensor) -> torch.Tensor:
        return states + self.source_type.to(states.dtype) if hasattr(self, "source_type") else states

    def target(self, states: torch.Tensor) -> torch.Tensor:
        return states + self.target_type.to(states.dtype) if hasattr(self, "target_type") else states

    def end(self, name: str) -> torch.Tensor | None:
        """`end_of_prefix` or `end_of_source`, None when the config appends none."""
        return getattr(self, name, None)


def source_then_prefix(source_mask: torch.Tensor, prefix_lengths: torch.Tensor, prefix_width: int,
                       end_token: bool) -> tuple[torch.LongTensor, torch.LongTensor]:
    """C_t per row: the row's real source tokens, its first `prefix_lengths` prefix tokens, the end token (when
    `end_token`), then padding; as indices into the row's pool [source (n); prefix (`prefix_width`); end; zero] and
    as a segment mask (SOURCE_SEGMENT at source tokens, TARGET_SEGMENT at prefix and end token, 0 at padding).

    Both (B, n + `prefix_width` + `end_token`). Each side is one run without padding inside, so its distances do not
    depend on where the row's padding sat (official: left-padded sources, prefixes right-aligned before the end
    token); `source_mask` may pad on either side.
    """
    batch, n = source_mask.shape
    real = source_mask.bool()
    lengths = real.sum(1, keepdim=True)
    prefix_end = lengths + prefix_lengths[:, None]
    slot = torch.arange(n + prefix_width + int(end_token), device=real.device)[None, :]
    source_order = torch.sort((~real).long(), dim=1, stable=True).indices  # real positions first, in order
    from_source = slot < lengths
    from_prefix = ~from_source & (slot < prefix_end)
    is_end = slot.eq(prefix_end) & end_token
    index = torch.full_like(from_source, n + prefix_width + 1, dtype=torch.long)
    index = torch.where(from_source, source_order.gather(1, slot.clamp(max=n - 1).expand(batch, -1)), index)
    index = torch.where(from_prefix, n + slot - lengths, index)
    index = torch.where(is_end, n + prefix_width, index)
    segments = torch.where(from_source, SOURCE_SEGMENT, torch.where(from_prefix | is_end, TARGET_SEGMENT, 0))
    return index, segments


def cross_boundary_stack(config: DangleConfig, count: int) -> Stack:
    """`count` encoder layers over C_t whose self-attention has `adaptive_heads` heads and, with position "shaw",
    the cross-boundary positions (the official TransformerEncoderLayerCrossBoundary); no final norm."""
    stack = Stack(config, decoder=False, count=count, final_norm=False)
    if config.mixer == "attention":
        for layer in stack.layers:
            layer.mixer = Attention(config.d_model, config.adaptive_heads, config.attention_dropout, config.position,
                                    config.span, max_relative_position=config.max_relative_position,
                                    segmented=config.position == "shaw")
    return stack


class DangleForSeq2Seq(TransformerForSeq2Seq):
    """Dangle / R-Dangle_shr / R-Dangle_sep over the zoo Transformer's layers and embeddings."""

    config_class = DangleConfig
    accepts_length_groups = False  # re-encoding is per target prefix: no grouped layout

    def __init__(self, config: DangleConfig):
        # Skip the Transformer's own stacks: Dangle keeps its embedding, decoder layers and init but encodes anew.
        super(TransformerForSeq2Seq, self).__init__(config)
        self.embedding = TokenEmbedding(config)
        self.embedding_dropout = Dropout(config.input_dropout)
        self.sides = SideVectors(config)
        self.adaptive_stack = cross_boundary_stack(config, config.adaptive_layers)
        self.source_stack = Stack(config, decoder=False, count=config.source_layers, final_norm=False)
        self.key_norm = LayerNorm(config.d_model) if config.pre_norm else None
        if config.separate_keys_values:
            self.value_stack = cross_boundary_stack(config, config.value_layers)
            self.value_norm = LayerNorm(config.d_model) if config.pre_norm else None
        self.decoder_stack = Stack(config, decoder=True)
        self.output_projection = output_projection(config)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, SideVectors):
            module.reset_parameters()
        else:
            super()._init_weights(module)

    def embed_source(self, ids: torch.LongTensor) -> torch.Tensor:
        """√d·E[x] + source vector, dropped out (official TransformerEncoder.forward_embedding)."""
        return self.embedding_dropout(self.sides.source(self.embedding(ids)))

    def embed_target(self, ids: torch.LongTensor) -> torch.Tensor:
        """√d·E[y] + target vector, dropped out: the decoder's input and the adaptive encoder's prefix alike."""
        return self.embedding_dropout(self.sides.target(self.embedding(ids)))

    def adaptive_encode(self, source: torch.LongTensor, source_mask: torch.Tensor, prefix: torch.LongTensor,
                        prefix_lengths: torch.Tensor | None = None) -> torch.Tensor:
        """H_t = norm(k₂ layers over the source positions of k₁ layers over C_t) (001 Eq. 4-6).

        `prefix_lengths` (B,) keeps only the first so many tokens of each row's `prefix` (default: all)."""
        return self.encode_keys(self.embed_source(source), source_mask, self.embed_target(prefix), prefix_lengths)

    def encode_keys(self, source_states: torch.Tensor, source_mask: torch.Tensor, prefix_states: torch.Tensor,
                    prefix_lengths: torch.Tensor | None = None) -> torch.Tensor:
        """`adaptive_encode` from embedded source and prefix states."""
        if prefix_lengths is None:
            prefix_lengths = torch.full((prefix_states.size(0),), prefix_states.size(1), device=prefix_states.device)
        fused = self._across_boundary(self.adaptive_stack, source_states, source_mask, prefix_states, prefix_lengths,
                                      self.sides.end("end_of_prefix"))
        return self._normed(self.key_norm, self.source_stack(fused, source_mask))

    def _across_boundary(self, stack: Stack, source_states: torch.Tensor, source_mask: torch.Tensor,
                         prefix_states: torch.Tensor, prefix_lengths: torch.Tensor,
                         end: torch.Tensor | None) -> torch.Tensor:
        """`stack` over [source; prefix; end] laid out by `source_then_prefix`; its states at the source positions,
        in the source's own layout (B, n, d)."""
        batch, n, d = source_states.shape
        index, segments = source_then_prefix(source_mask, prefix_lengths, prefix_states.size(1), end is not None)
        zero = source_states.new_zeros(batch, 1, d)
        end_state = end.to(source_states.dtype).expand(batch, 1, d) if end is not None else zero
        pool = torch.cat([source_states, prefix_states, end_state, zero], dim=1)
        combined = pool.gather(1, index[..., None].expand(-1, -1, d))
        fused = stack(combined, segments)
        rank = (source_mask.long().cumsum(1) - 1).clamp(min=0)  # where each real source token sits in C_t
        return fused.gather(1, rank[..., None].expand(-1, -1, d))

    @staticmethod
    def _normed(norm: nn.Module | None, states: torch.Tensor) -> torch.Tensor:
        return norm(states) if norm is not None else states

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> DangleEncoding:
        source_states = self.embed_source(input_ids)
        if self.config.separate_keys_values:
            nothing = torch.zeros(input_ids.size(0), dtype=torch.long, device=input_ids.device)
            fused = self._across_boundary(self.value_stack, source_states, attention_mask, source_states[:, :0],
                                          nothing, self.sides.end("end_of_source"))
            values = self._normed(self.value_norm, self.source_stack(fused, attention_mask))
        else:
            values = self.encode_keys(source_states, attention_mask, self.embed_target(input_ids[:, :0]))
        return DangleEncoding(last_hidden_state=values, source_states=source_states)

    def decode(self, decoder_input_ids: torch.LongTensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               memory_values: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) of every prefix of `decoder_input_ids` against `memory` (no cache)."""
        return self.decode_states(self.embed_target(decoder_input_ids), memory, memory_mask, memory_values)

    def decode_states(self, target_states: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor,
                      memory_values: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.decoder_stack(target_states, None, memory=Memory(memory, memory_mask, memory_values))
        return F.linear(hidden, self.output_weight)

    def reencoding_points(self, length: int) -> list[int]:
        return list(range(0, length, self.config.interval))

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, return_dict: bool | None = None, **kwargs) -> Seq2SeqLMOutput:
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        values = encoder_outputs.last_hidden_state if self.config.separate_keys_values else None
        logits = self.decode_with_reencoding(encoder_outputs.source_states, attention_mask, decoder_input_ids, values)
        return self.seq2seq_output(logits, labels, encoder_outputs)

    def decode_with_reencoding(self, source_states: torch.Tensor, source_mask: torch.Tensor,
                               decoder_input_ids: torch.LongTensor, values: torch.Tensor | None) -> torch.Tensor:
        """Logits of every decoder position, position p decoded against H_t of the last re-encoding point t ≤ p.

        All re-encoding points run as one batch: row (b, k) encodes [source_b; prefix up to point k; end] and
        decodes the whole target causally against it; block k of the result is kept. Causality makes this equal to
        the step-by-step procedure of 001 Eq. 11-13 (the official code's sub-batches of --chunk-size steps). The
        target is embedded once, so prefix and decoder input share one dropout draw, as the official `x` does.
        """
        batch, length = decoder_input_ids.shape
        points = self.reencoding_points(length)
        count = len(points)

        def per_point(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.repeat_interleave(count, dim=0)

        target_states = self.embed_target(decoder_input_ids)
        prefix_lengths = torch.tensor(points, device=decoder_input_ids.device).repeat(batch) + 1
        keys = self.encode_keys(per_point(source_states), per_point(source_mask), per_point(target_states),
                                prefix_lengths)
        logits = self.decode_states(per_point(target_states), keys, per_point(source_mask),
                                    memory_values=None if values is None else per_point(values))
        logits = logits.view(batch, count, length, -1)
        return torch.cat([logits[:, k, start: start + self.config.interval] for k, start in enumerate(points)], dim=1)
