"""Dangle and R-Dangle (001 §2-3): adaptive re-encoding of [source; target prefix] during decoding.

At a re-encoding point t the adaptive encoder reads C_t = [x_1..x_n; y_0..y_t] (y_0 the start token) through k₁
Transformer encoder layers (`adaptive_layers`), keeps the n source positions and passes them through k₂ more layers
(`source_layers`): H_t. Decoder positions t..t+o-1 attend over H_t, where o is `interval` (o = 1 is Dangle; 001
Table 4 notes R-Dangle_shr at interval 1 is Dangle), and the whole target prefix is re-decoded against H_t, as in
Eq. 12-13. With `separate_keys_values` (R-Dangle_sep, Eq. 14-20) the cross-attention keys come from H_t while the
values come from H^v, the source encoded once by its own `value_layers` layers followed by the same k₂ layers
(001 App. B shares the top layers of the two encoders).

Decoding re-runs the adaptive encoder on the prefix inside `forward`, so `generate()` works without a cache: the
encoder output it holds carries the source ids (and H^v) for the re-encodings.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.transformer import Stack, TokenEmbedding, TransformerConfig, TransformerForSeq2Seq


class DangleConfig(TransformerConfig):
    """The Transformer's sizes and switches plus k₁, k₂, the interval o and the key/value separation."""

    model_type = "benchbuild_dangle"
    kind = "dangle"
    caches_decoder_states = False  # every re-encoding changes the memory and re-decodes the whole prefix

    def __init__(self, adaptive_layers: int = 2, source_layers: int = 10, interval: int = 1,
                 separate_keys_values: bool = False, value_layers: int | None = None, **kwargs):
        if interval < 1:
            raise BenchbuildError(f"dangle: interval = {interval} must be at least 1")
        self.adaptive_layers = adaptive_layers
        self.source_layers = source_layers
        self.interval = interval
        self.separate_keys_values = separate_keys_values
        self.value_layers = adaptive_layers if value_layers is None else value_layers
        kwargs["encoder_layers"] = adaptive_layers + source_layers
        super().__init__(**kwargs)


@dataclass
class DangleEncoding(ModelOutput):
    """`last_hidden_state`: H^v (separate keys/values) or the source encoded alone; `source_ids`: for re-encoding."""

    last_hidden_state: torch.Tensor | None = None
    source_ids: torch.LongTensor | None = None


def source_then_prefix(source: torch.LongTensor, source_mask: torch.Tensor, prefix: torch.LongTensor,
                       pad_token_id: int, prefix_lengths: torch.Tensor | None = None
                       ) -> tuple[torch.LongTensor, torch.Tensor]:
    """C_t per row: the row's real source tokens, then its target prefix, then padding; and the mask of C_t.

    `prefix_lengths` (B,) keeps only the first so many prefix tokens of each row in the mask (default: all).
    """
    batch, n = source.shape
    lengths = source_mask.sum(1)
    if prefix_lengths is None:
        prefix_lengths = torch.full_like(lengths, prefix.size(1))
    combined = torch.cat([source, source.new_full((batch, prefix.size(1)), pad_token_id)], dim=1)
    combined = combined.masked_fill(~F.pad(source_mask.bool(), (0, prefix.size(1))), pad_token_id)
    slots = lengths[:, None] + torch.arange(prefix.size(1), device=source.device)[None, :]
    combined = combined.scatter(1, slots, prefix)
    mask = torch.arange(combined.size(1), device=source.device)[None, :] < (lengths + prefix_lengths)[:, None]
    return combined, mask


class DangleForSeq2Seq(TransformerForSeq2Seq):
    """Dangle / R-Dangle_shr / R-Dangle_sep over the zoo Transformer's layers and embeddings."""

    config_class = DangleConfig
    accepts_length_groups = False  # re-encoding is per target prefix: no grouped layout

    def __init__(self, config: DangleConfig):
        # Skip the Transformer's own stacks: Dangle keeps its embedding, decoder, init and `decode` but encodes anew.
        super(TransformerForSeq2Seq, self).__init__(config)
        self.embedding = TokenEmbedding(config)
        self.embedding_dropout = Dropout(config.input_dropout)
        self.adaptive_stack = Stack(config, decoder=False, count=config.adaptive_layers, final_norm=False)
        self.source_stack = Stack(config, decoder=False, count=config.source_layers)
        if config.separate_keys_values:
            self.value_stack = Stack(config, decoder=False, count=config.value_layers, final_norm=False)
        self.decoder_stack = Stack(config, decoder=True)
        self.post_init()

    def adaptive_encode(self, source: torch.LongTensor, source_mask: torch.Tensor, prefix: torch.LongTensor,
                        prefix_lengths: torch.Tensor | None = None) -> torch.Tensor:
        """H_t = k₂ layers over the source positions of k₁ layers over [source; prefix] (001 Eq. 4-6)."""
        combined, mask = source_then_prefix(source, source_mask, prefix, self.config.pad_token_id, prefix_lengths)
        fused = self.adaptive_stack(self.embedding_dropout(self.embedding(combined)), mask)
        return self.source_stack(fused[:, : source.size(1)], source_mask)

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> DangleEncoding:
        if self.config.separate_keys_values:
            below = self.value_stack(self.embedding_dropout(self.embedding(input_ids)), attention_mask)
            values = self.source_stack(below, attention_mask)
        else:
            values = self.adaptive_encode(input_ids, attention_mask, input_ids[:, :0])
        return DangleEncoding(last_hidden_state=values, source_ids=input_ids)

    def reencoding_points(self, length: int) -> list[int]:
        return list(range(0, length, self.config.interval))

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, return_dict: bool | None = None, **kwargs) -> Seq2SeqLMOutput:
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        source = encoder_outputs.source_ids
        values = encoder_outputs.last_hidden_state if self.config.separate_keys_values else None
        logits = self.decode_with_reencoding(source, attention_mask, decoder_input_ids, values)
        return self.seq2seq_output(logits, labels, encoder_outputs)

    def decode_with_reencoding(self, source: torch.LongTensor, source_mask: torch.Tensor,
                               decoder_input_ids: torch.LongTensor, values: torch.Tensor | None) -> torch.Tensor:
        """Logits of every decoder position, position p decoded against H_t of the last re-encoding point t ≤ p.

        All re-encoding points run as one batch: row (b, k) encodes [source_b; prefix up to point k] and decodes
        the whole target causally against it; block k of the result is kept. Causality makes this equal to the
        step-by-step procedure of 001 Eq. 11-13.
        """
        batch, length = decoder_input_ids.shape
        points = self.reencoding_points(length)
        count = len(points)

        def per_point(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.repeat_interleave(count, dim=0)

        prefix_lengths = torch.tensor(points, device=source.device).repeat(batch) + 1
        keys = self.adaptive_encode(per_point(source), per_point(source_mask), per_point(decoder_input_ids),
                                    prefix_lengths)
        logits = self.decode(per_point(decoder_input_ids), keys, per_point(source_mask),
                             memory_values=None if values is None else per_point(values))
        logits = logits.view(batch, count, length, -1)
        return torch.cat([logits[:, k, start: start + self.config.interval] for k, start in enumerate(points)], dim=1)
