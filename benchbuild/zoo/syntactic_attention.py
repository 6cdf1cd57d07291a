"""Syntactic Attention (002 §2): alignment and translation in two streams.

Translation stream: m_j = W_m x_j, a context-free embedding of each source word. Alignment stream: a bidirectional
LSTM whose state for word j is h_j = [→h_{j-1}; ←h_{j+1}], the context around j without j itself (the two directions
are separate stacks, so that with several layers too →h_{j-1} never reads x_j through the other direction). An LSTM decoder
with state s_i attends with α_ij = softmax_j(s_i · h_j), predicts y_i from d_i = Σ_j α_ij m_j alone (Eq. 1), and
feeds c_i = Σ_j α_ij h_j (with the previous target word) into its next step (Eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput

from benchbuild.zoo.recurrent import attentive_decoder_states, init_recurrent_model, separate_directions
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel


class SyntacticAttentionConfig(ZooConfig):
    """Sizes of Syntactic Attention; defaults are 002's best model (§3.2)."""

    model_type = "benchbuild_syntactic_attention"
    kind = "syntactic_attention"

    def __init__(self, d_semantic: int = 120, d_syntactic: int = 120, hidden_size: int = 200, encoder_layers: int = 2,
                 dropout: float = 0.5, **kwargs):
        self.d_semantic = d_semantic
        self.d_syntactic = d_syntactic
        self.hidden_size = hidden_size
        self.encoder_layers = encoder_layers
        self.num_hidden_layers = 1
        self.dropout = dropout
        super().__init__(**kwargs)


@dataclass
class TwoStreamEncoding(ModelOutput):
    """`last_hidden_state`: the alignment stream h (B, L, 2·hidden); `translation`: the stream m (B, L, d_semantic)."""

    last_hidden_state: torch.Tensor | None = None
    translation: torch.Tensor | None = None


class SyntacticAttentionForSeq2Seq(ZooSeq2SeqModel):
    """Syntactic Attention with one shared vocabulary; the decoder LSTM has 2·hidden units, as wide as h_j."""

    config_class = SyntacticAttentionConfig

    def __init__(self, config: SyntacticAttentionConfig):
        super().__init__(config)
        width = 2 * config.hidden_size
        self.translation_embedding = nn.Embedding(config.vocab_size, config.d_semantic)  # W_m
        self.alignment_embedding = nn.Embedding(config.vocab_size, config.d_syntactic)
        self.alignment_forward, self.alignment_backward = (
            nn.LSTM(config.d_syntactic, config.hidden_size, num_layers=config.encoder_layers, batch_first=True,
                    dropout=config.dropout if config.encoder_layers > 1 else 0.0) for _ in range(2))
        self.target_embedding = nn.Embedding(config.vocab_size, config.d_syntactic)
        self.decoder_cell = nn.LSTMCell(config.d_syntactic + width, width)
        self.output = nn.Linear(config.d_semantic, config.vocab_size)  # f in Eq. 1
        self.dropout = Dropout(config.dropout)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        init_recurrent_model(module)

    def get_input_embeddings(self) -> nn.Module:
        return self.translation_embedding

    def translation_stream(self, input_ids: torch.LongTensor) -> torch.Tensor:
        """m_j = W_m x_j: each source word on its own, with no information about its neighbours."""
        return self.dropout(self.translation_embedding(input_ids))

    def alignment_stream(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """h_j = [→h_{j-1}; ←h_{j+1}] of a biLSTM: the context around word j, zero beyond the sequence ends."""
        forward, backward = separate_directions(self.alignment_forward, self.alignment_backward,
                                                self.dropout(self.alignment_embedding(input_ids)), attention_mask)
        before = F.pad(forward, (0, 0, 1, 0))[:, :-1]
        after = F.pad(backward, (0, 0, 0, 1))[:, 1:]
        return torch.cat([before, after], dim=-1)

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> TwoStreamEncoding:
        return TwoStreamEncoding(last_hidden_state=self.alignment_stream(input_ids, attention_mask),
                                 translation=self.translation_stream(input_ids))

    def decode(self, decoder_input_ids: torch.LongTensor, encoding: TwoStreamEncoding,
               mask: torch.Tensor) -> torch.Tensor:
        """f(d_i) with d_i = Σ_j α_ij m_j: the alignment picks source words, only their m_j are translated."""
        embedded = self.dropout(self.target_embedding(decoder_input_ids))
        _, weights = attentive_decoder_states(self.decoder_cell, embedded, encoding.last_hidden_state, mask)
        return self.output(torch.einsum("btl,bld->btd", weights, encoding.translation))

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, return_dict: bool | None = None, **kwargs) -> Seq2SeqLMOutput:
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        logits = self.decode(decoder_input_ids, encoder_outputs, attention_mask)
        return self.seq2seq_output(logits, labels, encoder_outputs)
