"""The recurrent encoder-decoder with attention: the usual SCAN baseline (002 Table 1, Lake & Baroni 2018).

A bidirectional LSTM encodes the source; an LSTM decoder reads the previous target word and the previous context,
attends over the encoder states with a dot product and predicts from [decoder state; context]. Both run as
benchbuild.zoo.recurrent writes them out: the encoder layer by layer with `nn.LSTM`'s own dropout masks between
layers, the decoder loop in one autograd node.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchbuild.zoo.recurrent import attentive_decoder, bidirectional_states, init_recurrent_model
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel


class LSTMAttentionConfig(ZooConfig):
    """Sizes of the LSTM baseline; defaults are Lake & Baroni's (2 layers, 200 units, dropout 0.5)."""

    model_type = "benchbuild_lstm_attention"
    kind = "lstm_attention"

    def __init__(self, d_embedding: int = 200, hidden_size: int = 200, num_layers: int = 2, dropout: float = 0.5,
                 **kwargs):
        self.d_embedding = d_embedding
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_hidden_layers = num_layers
        self.dropout = dropout
        super().__init__(**kwargs)


class LSTMAttentionForSeq2Seq(ZooSeq2SeqModel):
    """biLSTM encoder, LSTM decoder with dot attention; encoder states are 2·hidden, so is the decoder state."""

    config_class = LSTMAttentionConfig

    def __init__(self, config: LSTMAttentionConfig):
        super().__init__(config)
        width = 2 * config.hidden_size
        self.embedding = nn.Embedding(config.vocab_size, config.d_embedding)
        self.encoder_lstm = nn.LSTM(config.d_embedding, config.hidden_size, num_layers=config.num_layers,
                                    bidirectional=True, batch_first=True,
                                    dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.decoder_cell = nn.LSTMCell(config.d_embedding + width, width)
        self.output = nn.Linear(2 * width, config.vocab_size)
        self.dropout = Dropout(config.dropout)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        init_recurrent_model(module)

    def get_input_embeddings(self) -> nn.Module:
        return self.embedding

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        forward, backward = bidirectional_states(self.encoder_lstm, self.dropout(self.embedding(input_ids)),
                                                 attention_mask)
        return BaseModelOutput(last_hidden_state=torch.cat([forward, backward], dim=-1))

    def decode(self, decoder_input_ids: torch.LongTensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        embedded = self.dropout(self.embedding(decoder_input_ids))
        states_and_contexts, _ = attentive_decoder(self.decoder_cell, embedded, memory, mask)
        return self.output(self.dropout(states_and_contexts))

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, return_dict: bool | None = None, **kwargs) -> Seq2SeqLMOutput:
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        logits = self.decode(decoder_input_ids, encoder_outputs.last_hidden_state, attention_mask)
        return self.seq2seq_output(logits, labels, encoder_outputs)
