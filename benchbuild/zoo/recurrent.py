"""Recurrent pieces shared by the LSTM models: a bidirectional LSTM over right-padded batches, dot attention."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import initialization as init


def packed_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run a batch-first `lstm` over right-padded `inputs` (B, L, ·) as packed sequences, so that no row reads its
    padding: the outputs (B, L, directions·H), zero at padded positions, and the final (h_n, c_n) of each row's
    real end (layers·directions, B, H)."""
    lengths = mask.sum(1).clamp(min=1).cpu()
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    output, final = lstm(packed)
    output, _ = pad_packed_sequence(output, batch_first=True, total_length=inputs.size(1))
    return output, final


def bidirectional_states(lstm: nn.LSTM, embedded: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward states (B, L, H) each of a bidirectional `lstm`; zero at padded positions."""
    output, _ = packed_lstm(lstm, embedded, mask)
    return output.chunk(2, dim=-1)


def dot_attention(query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Weights α (B, L) of softmax(query · key_j) over the unmasked positions j."""
    scores = torch.einsum("bd,bld->bl", query, keys)
    return scores.masked_fill(~mask.bool(), float("-inf")).softmax(-1)


def init_recurrent_model(module: nn.Module) -> None:
    """Xavier linear layers, N(0, 1) embeddings, LSTM weights from U(-0.08, 0.08) (Sutskever et al. 2014)."""
    if isinstance(module, nn.Linear):
        init.xavier_uniform_(module.weight)
        init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        init.normal_(module.weight, mean=0.0, std=1.0)
    elif isinstance(module, (nn.LSTM, nn.LSTMCell)):
        for name, parameter in module.named_parameters():
            if "weight" in name:
                init.uniform_(parameter, -0.08, 0.08)
            else:
                init.zeros_(parameter)


def attentive_decoder_states(cell: nn.LSTMCell, embedded: torch.Tensor, keys: torch.Tensor,
                             mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run an LSTM decoder that reads [previous target word; previous context] (B, T, ·) and attends over `keys`.

    Step i: s_i = LSTM(s_{i-1}, [y_{i-1}; c_{i-1}]), α_i = softmax(s_i · keys), c_i = Σ_j α_ij keys_j.
    Returns the states s (B, T, W) and the attention weights α (B, T, L).
    """
    batch, width = keys.size(0), keys.size(-1)
    state, memory_cell, context = (keys.new_zeros(batch, width) for _ in range(3))
    states, weights = [], []
    for step in range(embedded.size(1)):
        state, memory_cell = cell(torch.cat([embedded[:, step], context], dim=-1), (state, memory_cell))
        alpha = dot_attention(state, keys, mask)
        context = torch.einsum("bl,bld->bd", alpha, keys)
        states.append(state)
        weights.append(alpha)
    return torch.stack(states, dim=1), torch.stack(weights, dim=1)
