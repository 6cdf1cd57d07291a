"""Syntactic Attention (002 §2) as its authors released it (jlrussin/syntactic_attention, SyntacticAttention.py).

Translation stream (002 §2.2): m_j = W_m x_j, one embedding per source word that no other word reaches.
Alignment stream (official `SynAttnEncoder`): W_x x_j -> biLSTM₁ -> shift, so that word j holds h̃_j = [→h¹_{j-1};
←h¹_{j+1}], the context around j without j (002 §2.2) -> learned start and end role vectors replace h̃ at the first
and last token -> biLSTM₂, whose outputs are the h_j the decoder attends over. The last layer of biLSTM₂ also gives
the decoder its first query, s_0 = ReLU(W_0 [→h_n; ←h_n] + b_0), from its final forward and backward h (not c).
Decoder (official `SynAttnDecoder`, 002 Eqs. 1-3): α_ij = softmax_j(s_i · h_j); the prediction is f(d_i) = W_f d_i +
b_f with d_i = Σ_j α_ij m_j; the LSTM g reads c_i = Σ_j α_ij h_j alone, never a target word, from a zero (h, c):
s_{i+1} = g(s_i, c_i). Target words enter only through the loss: under teacher forcing the logits do not depend on
the previous target words, and greedy decoding is one fixed sequence of steps per source.

Sizes (the official train_test.py defaults, which are 002 §3.2's best model): `hidden_size` is the official
x_hidden_dim = 200: W_x and biLSTM₁ are hidden_size / 2 = 100 wide per direction, biLSTM₂ 200 per direction (h_j of
400), the decoder LSTM and s_0 2 · hidden_size = 400; `d_semantic` = 120 (m_j); `num_layers` = 1 in each of the three
LSTMs (002's "2 layers in the encoder" are biLSTM₁ and biLSTM₂); dropout 0.5 on the two embeddings only (and between
stacked layers when num_layers > 1, as the official LSTMs do). Weights start from PyTorch's defaults, as the official
code leaves them.

Start and end tokens: the official data.py wraps every source in <SOS> ... <EOS>. Our tokenizer appends `</s>` to
every source, and `encode` prepends `bos_token_id`, so the model reads <s> x_1 ... x_n </s> and the role vectors sit on
those two tokens (a source given without `</s>` gets the end role on its last word). The official code trains with
batch size 1; in a padded batch each row gets its end role at its own last token, both biLSTMs are packed so that no
row reads padding, and attention is masked: for one row this is the official computation.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.recurrent import AttentionLoop, bidirectional_states, dot_attention, lstm_cell, packed_lstm
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel, check_choice

# What the output layer's softmax runs over: "all", the shared vocabulary; "targets", the tokens the training targets
# hold with <s> and </s>, as 002's code scores its separate action vocabulary (data.py: <SOS>, the actions, <EOS>).
OUTPUT_VOCABULARIES = ("all", "targets")


class SyntacticAttentionConfig(ZooConfig):
    """Sizes of Syntactic Attention; defaults are the official code's (= 002 §3.2's best model)."""

    model_type = "benchbuild_syntactic_attention"
    kind = "syntactic_attention"

    def __init__(self, d_semantic: int = 120, hidden_size: int = 200, num_layers: int = 1, dropout: float = 0.5,
                 output_vocabulary: str = "all", output_tokens: list[int] | None = None, **kwargs):
        if hidden_size % 2:
            raise BenchbuildError(f"syntactic_attention: hidden_size = {hidden_size} must be even (the first biLSTM "
                                  "has hidden_size / 2 units per direction)")
        check_choice("syntactic_attention", "output_vocabulary", output_vocabulary, OUTPUT_VOCABULARIES)
        self.d_semantic = d_semantic
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_hidden_layers = num_layers
        self.dropout = dropout
        self.output_vocabulary = output_vocabulary
        # Under "targets": the ids the output layer scores (training sets them from the run's train targets,
        # `training.plan.output_tokens`); every other logit is the dtype's lowest, so the softmax is over these alone.
        self.output_tokens = None if output_tokens is None else [int(token) for token in output_tokens]
        super().__init__(**kwargs)


@dataclass
class TwoStreamEncoding(ModelOutput):
    """What the decoder needs of one batch of sources wrapped in <s> ... </s> (L + 1 positions for L given):
    `last_hidden_state` h (B, L+1, 2·hidden), `translation` m (B, L+1, d_semantic), `initial_query` s_0 (B, 2·hidden)
    and `source_mask` (B, L+1). Every field has the batch first, so `generate()` expands them all for beams."""

    last_hidden_state: torch.Tensor | None = None
    translation: torch.Tensor | None = None
    initial_query: torch.Tensor | None = None
    source_mask: torch.Tensor | None = None


class SyntacticAttentionForSeq2Seq(ZooSeq2SeqModel):
    """Syntactic Attention over one shared vocabulary; module names say which official layer each one is."""

    config_class = SyntacticAttentionConfig

    def __init__(self, config: SyntacticAttentionConfig):
        super().__init__(config)
        half, hidden, width = config.hidden_size // 2, config.hidden_size, 2 * config.hidden_size
        between_layers = config.dropout if config.num_layers > 1 else 0.0
        self.translation_embedding = nn.Embedding(config.vocab_size, config.d_semantic)  # W_m
        self.alignment_embedding = nn.Embedding(config.vocab_size, half)  # W_x
        self.context_lstm = nn.LSTM(half, half, config.num_layers, batch_first=True, bidirectional=True,
                                    dropout=between_layers)  # rnn1
        self.start_role = nn.Embedding(1, hidden)  # SOS_embed
        self.end_role = nn.Embedding(1, hidden)  # EOS_embed
        self.alignment_lstm = nn.LSTM(hidden, hidden, config.num_layers, batch_first=True, bidirectional=True,
                                      dropout=between_layers)  # rnn2
        self.initial_query = nn.Linear(width, width)  # fc0
        self.decoder_lstm = nn.LSTM(width, width, config.num_layers, batch_first=True,
                                    dropout=between_layers)  # g, the decoder's rnn
        self.output = nn.Linear(config.d_semantic, config.vocab_size)  # f in Eq. 1, the decoder's out
        self.dropout = Dropout(config.dropout)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """PyTorch's defaults, which the official code keeps: embeddings N(0, 1); a linear layer's weight and bias
        U(±1/√fan_in) (kaiming_uniform_ with a = √5 bounds at exactly that); every LSTM parameter U(±1/√hidden)."""
        if isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=1.0)
        elif isinstance(module, nn.Linear):
            bound = 1 / math.sqrt(module.in_features)
            init.uniform_(module.weight, -bound, bound)
            init.uniform_(module.bias, -bound, bound)
        elif isinstance(module, nn.LSTM):
            bound = 1 / math.sqrt(module.hidden_size)
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)

    def get_input_embeddings(self) -> nn.Module:
        return self.translation_embedding

    def with_start_token(self, input_ids: torch.LongTensor,
                         attention_mask: torch.Tensor) -> tuple[torch.LongTensor, torch.Tensor]:
        """<s> before every right-padded source, as data.py's <SOS> (the tokenizer already appended `</s>`)."""
        start = input_ids.new_full((input_ids.size(0), 1), self.config.bos_token_id)
        return (torch.cat([start, input_ids], dim=1),
                torch.cat([torch.ones_like(attention_mask[:, :1]), attention_mask], dim=1))

    def translation_stream(self, input_ids: torch.LongTensor) -> torch.Tensor:
        """m_j = W_m x_j (002 §2.2), with the official dropout on the embedding."""
        return self.dropout(self.translation_embedding(input_ids))

    def role_inputs(self, input_ids: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        """The input of biLSTM₂ (B, L, hidden): h̃_j = [→h¹_{j-1}; ←h¹_{j+1}] of biLSTM₁ over dropout(W_x x) (002 §2.2,
        the official "take only contextual information"), zero beyond the ends; then, as the official "<SOS> and
        <EOS> roles", the start role replaces h̃ at the first token and the end role at each row's last token."""
        forward, backward = bidirectional_states(self.context_lstm, self.dropout(self.alignment_embedding(input_ids)),
                                                 mask)
        before = F.pad(forward, (0, 0, 1, 0))[:, :-1]
        after = F.pad(backward, (0, 0, 0, 1))[:, 1:]
        context = torch.cat([before, after], dim=-1)
        positions = torch.arange(input_ids.size(1), device=input_ids.device)[None, :, None]
        last = (mask.sum(1) - 1)[:, None, None]
        context = torch.where(positions == 0, self.start_role.weight, context)
        return torch.where(positions == last, self.end_role.weight, context)

    def alignment_stream(self, roles: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_j = biLSTM₂(h̃)_j (B, L, 2·hidden), and the first query s_0 = ReLU(W_0 [→h_n; ←h_n] + b_0) from the final
        h (not c) of biLSTM₂'s last layer, forward then backward, as the official fc0."""
        states, (final, _) = packed_lstm(self.alignment_lstm, roles, mask)
        last_layer = final.view(self.config.num_layers, 2, *final.shape[1:])[-1]
        return states, F.relu(self.initial_query(torch.cat([last_layer[0], last_layer[1]], dim=-1)))

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> TwoStreamEncoding:
        input_ids, mask = self.with_start_token(input_ids, attention_mask)
        states, initial_query = self.alignment_stream(self.role_inputs(input_ids, mask), mask)
        return TwoStreamEncoding(last_hidden_state=states, translation=self.translation_stream(input_ids),
                                 initial_query=initial_query, source_mask=mask)

    def attention_weights(self, steps: int, encoding: TwoStreamEncoding) -> torch.Tensor:
        """α (B, steps, L) of the official decoder loop: α_i = softmax_j(s_i · h_j) (Eq. 2), c_i = Σ_j α_ij h_j and
        s_{i+1} = g(s_i, c_i) (Eq. 3), from s_0 = `initial_query` and g's (h, c) at zero (official initHidden)."""
        keys, mask = encoding.last_hidden_state, encoding.source_mask
        lstm = self.decoder_lstm
        if lstm.num_layers == 1 and not torch.is_grad_enabled():
            return self._continued_attention(steps, encoding)
        if lstm.num_layers == 1:  # the same loop in one autograd node (benchbuild.zoo.recurrent.AttentionLoop)
            return AttentionLoop.apply(keys, mask, encoding.initial_query, lstm.weight_ih_l0, lstm.bias_ih_l0,
                                       lstm.weight_hh_l0, lstm.bias_hh_l0, steps)
        query, state, weights = encoding.initial_query, None, []
        for step in range(steps):
            alpha = dot_attention(query, keys, mask)
            weights.append(alpha)
            if step + 1 < steps:
                context = torch.einsum("bl,bld->bd", alpha, keys)
                output, state = lstm(context[:, None], state)
                query = output[:, 0]
        return torch.stack(weights, dim=1)

    def _continued_attention(self, steps: int, encoding: TwoStreamEncoding) -> torch.Tensor:
        """`attention_weights` without gradients, continuing the loop where the last call on the same encoding stopped:
        `generate` asks for 1, 2, 3... steps of one encoding, and α never depends on the target words, so each call
        adds one step instead of running the loop again from the start (quadratic in the output's length). Beams of
        one source share their α, so `generate`'s reordering of beams changes nothing here."""
        cache = getattr(self, "_attention_cache", None)
        if cache is None or cache[0]() is not encoding:
            cache = (weakref.ref(encoding), [], encoding.initial_query, None)
        reference, weights, query, state = cache
        keys, mask, lstm = encoding.last_hidden_state, encoding.source_mask, self.decoder_lstm
        while len(weights) < steps:
            if weights:  # the cell that makes this step's query from the last step's context
                context = torch.einsum("bl,bld->bd", weights[-1], keys)
                state = lstm_cell(F.linear(context, lstm.weight_ih_l0, lstm.bias_ih_l0), state, lstm.weight_hh_l0,
                                  lstm.bias_hh_l0)
                query = state[0]
            weights.append(dot_attention(query, keys, mask))
        self._attention_cache = (reference, weights, query, state)
        return torch.stack(weights[:steps], dim=1)

    def decode(self, decoder_input_ids: torch.LongTensor, encoding: TwoStreamEncoding) -> torch.Tensor:
        """Logits f(d_i), d_i = Σ_j α_ij m_j (Eq. 1), one per decoder position; the decoder ids give only how many."""
        weights = self.attention_weights(decoder_input_ids.size(1), encoding)
        logits = self.output(torch.einsum("btl,bld->btd", weights, encoding.translation))
        if self.config.output_tokens is None:
            return logits
        return logits.masked_fill(~self.scored(logits.device), torch.finfo(logits.dtype).min)

    def scored(self, device: torch.device) -> torch.Tensor:
        """Which logits the softmax runs over (vocab_size,): the config's output_tokens. Made from the config at each
        call, never a buffer: `from_pretrained` builds a model on the meta device and leaves a buffer that is not in
        the checkpoint uninitialised (a resumed or evaluated run then scored garbage tokens)."""
        scored = torch.zeros(self.config.vocab_size, dtype=torch.bool, device=device)
        return scored.index_fill_(0, torch.tensor(self.config.output_tokens, dtype=torch.long, device=device), True)

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, return_dict: bool | None = None, **kwargs) -> Seq2SeqLMOutput:
        decoder_input_ids, _, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        logits = self.decode(decoder_input_ids, encoder_outputs)
        return self.seq2seq_output(logits, labels, encoder_outputs)
