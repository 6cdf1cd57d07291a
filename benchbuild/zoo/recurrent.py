"""Recurrent pieces shared by the LSTM models: a bidirectional LSTM over right-padded batches, dot attention.

A one-layer `nn.LSTM` is run here as its cell written out in matrix products (`lstm_cell`): torch's LSTM on the CPU
goes through oneDNN, whose fixed cost per call (about 1.8 ms forward and 2.8 ms backward for a one-step call of a
400-unit cell, measured 2026-12-05) dwarfs the arithmetic at the batch sizes of 002's protocol (one row). The
parameters are the `nn.LSTM`'s own, so checkpoints and the authors' code read the same weights; the arithmetic is
PyTorch's LSTM cell (gates i, f, g, o), equal to oneDNN's to float rounding (tests/zoo/test_unrolled_lstm.py). Stacked
layers keep `nn.LSTM`, whose dropout between layers draws its masks itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import initialization as init


def lstm_cell(projected: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None, weight_hh: torch.Tensor,
              bias_hh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of PyTorch's LSTM cell from the input already projected (`projected` = W_ih x + b_ih, (B, 4H)): gates
    i, f, g, o = projected + W_hh h + b_hh; c' = σ(f) c + σ(i) tanh(g); h' = σ(o) tanh(c'). A `state` of None is the
    zero (h, c)."""
    if state is None:
        gates = projected + bias_hh
        input_gate, _, cell_input, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(input_gate) * torch.tanh(cell_input)
    else:
        hidden, cell = state
        gates = projected + F.linear(hidden, weight_hh, bias_hh)
        input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(input_gate) * torch.tanh(cell_input)
    return torch.sigmoid(output_gate) * torch.tanh(cell), cell


def unrolled_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                  mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer batch-first `lstm` over right-padded `inputs` (B, L, ·), its cell written out: what `packed_lstm`
    returns. Each direction projects every position's input in one product, then runs its steps in one autograd node
    (`LSTMLayer`); a row's state stays put at its padding (so the forward direction ends at the row's last word and
    the backward one starts there, from zero), and the outputs are zero at padded positions."""
    keep = None if bool(mask.all()) else mask.to(inputs.dtype)[:, :, None]
    outputs, finals, cells = [], [], []
    for suffix in ("", "_reverse")[:2 if lstm.bidirectional else 1]:
        projected = F.linear(inputs, getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"bias_ih_l0{suffix}"))
        output, final, cell = LSTMLayer.apply(projected, getattr(lstm, f"weight_hh_l0{suffix}"),
                                              getattr(lstm, f"bias_hh_l0{suffix}"), keep, bool(suffix))
        outputs.append(output)
        finals.append(final)
        cells.append(cell)
    return torch.cat(outputs, dim=-1), (torch.stack(finals), torch.stack(cells))


class LSTMLayer(torch.autograd.Function):
    """The steps of one LSTM direction over projected inputs (B, L, 4H) in one autograd node, backward written out:
    (outputs (B, L, H), final h, final c). `keep` (B, L, 1), 1 at real positions, or None when no row is padded;
    `reverse` runs from the last position to the first. The recurrent weight's gradient is one product over all steps
    (plain autograd writes a weight-sized gradient per step)."""

    @staticmethod
    def forward(ctx, projected, weight_hh, bias_hh, keep, reverse: bool):
        batch, length = projected.shape[:2]
        hidden = weight_hh.size(1)
        order = range(length - 1, -1, -1) if reverse else range(length)
        state = projected.new_zeros(batch, hidden)
        cell = projected.new_zeros(batch, hidden)
        outputs = projected.new_zeros(batch, length, hidden)
        previous_states, previous_cells = torch.empty_like(outputs), torch.empty_like(outputs)
        activations, cell_tanhs = torch.empty_like(projected), torch.empty_like(outputs)
        for position in order:
            previous_states[:, position], previous_cells[:, position] = state, cell
            gates = torch.addmm(projected[:, position] + bias_hh, state, weight_hh.t())
            gate_in, gate_forget, cell_input, gate_out = gates.chunk(4, dim=-1)
            gate_in, gate_forget, gate_out = gate_in.sigmoid(), gate_forget.sigmoid(), gate_out.sigmoid()
            cell_input = cell_input.tanh()
            new_cell = gate_forget * cell + gate_in * cell_input
            cell_tanh = new_cell.tanh()
            new_state = gate_out * cell_tanh
            activations[:, position] = torch.cat([gate_in, gate_forget, cell_input, gate_out], dim=-1)
            cell_tanhs[:, position] = cell_tanh
            if keep is None:
                state, cell = new_state, new_cell
                outputs[:, position] = new_state
            else:
                here = keep[:, position]
                state = torch.lerp(state, new_state, here)
                cell = torch.lerp(cell, new_cell, here)
                outputs[:, position] = new_state * here
        ctx.reverse = reverse
        ctx.save_for_backward(weight_hh, keep, previous_states, previous_cells, activations, cell_tanhs)
        return outputs, state, cell

    @staticmethod
    def backward(ctx, grad_outputs, grad_state, grad_cell):
        weight_hh, keep, previous_states, previous_cells, activations, cell_tanhs = ctx.saved_tensors
        length = activations.size(1)
        order = range(length) if ctx.reverse else range(length - 1, -1, -1)
        grad_gates = torch.zeros_like(activations)
        grad_state = torch.zeros_like(previous_states[:, 0]) if grad_state is None else grad_state.clone()
        grad_cell = torch.zeros_like(previous_cells[:, 0]) if grad_cell is None else grad_cell.clone()
        for position in order:
            grad_new_state = grad_state + grad_outputs[:, position]
            grad_new_cell = grad_cell
            if keep is not None:
                here = keep[:, position]
                grad_new_state, grad_new_cell = grad_new_state * here, grad_new_cell * here
                passed_state, passed_cell = grad_state * (1 - here), grad_cell * (1 - here)
            gate_in, gate_forget, cell_input, gate_out = activations[:, position].chunk(4, dim=-1)
            cell_tanh = cell_tanhs[:, position]
            grad_c = grad_new_cell + grad_new_state * gate_out * (1 - cell_tanh * cell_tanh)
            grad = torch.cat([grad_c * cell_input * gate_in * (1 - gate_in),
                              grad_c * previous_cells[:, position] * gate_forget * (1 - gate_forget),
                              grad_c * gate_in * (1 - cell_input * cell_input),
                              grad_new_state * cell_tanh * gate_out * (1 - gate_out)], dim=-1)
            grad_gates[:, position] = grad
            grad_state = grad @ weight_hh
            grad_cell = grad_c * gate_forget
            if keep is not None:
                grad_state, grad_cell = grad_state + passed_state, grad_cell + passed_cell
        flat = grad_gates.reshape(-1, grad_gates.size(-1))
        grad_weight_hh = flat.t() @ previous_states.reshape(-1, previous_states.size(-1))
        return grad_gates, grad_weight_hh, flat.sum(0), None, None


def packed_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run a batch-first `lstm` over right-padded `inputs` (B, L, ·) as packed sequences, so that no row reads its
    padding: the outputs (B, L, directions·H), zero at padded positions, and the final (h_n, c_n) of each row's
    real end (layers·directions, B, H). A one-layer LSTM runs in `unrolled_lstm`, the same computation."""
    if lstm.num_layers == 1:
        return unrolled_lstm(lstm, inputs, mask)
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


class AttentionLoop(torch.autograd.Function):
    """The decoder loop of Syntactic Attention in one autograd node, backward written out (backpropagation through
    time): α_t = softmax_j(q_t · k_j) over the unmasked j, with q_0 = `initial_query` and q_t = h_t after; while a
    step follows, c_t = Σ_j α_tj k_j and (h_{t+1}, c_{t+1}) = LSTM cell(c_t, (h_t, c_t)) from a zero (h_0, c_0).

    What plain autograd does per step, writing a whole weight-sized gradient for each of the 2(T-1) products of a row
    of one (2.6 MB each at 002's 400 units), is done once here: dW = dG^T X over all steps in one product. The values
    are those of the step-by-step loop to float rounding (tests/zoo/test_unrolled_lstm.py)."""

    @staticmethod
    def forward(ctx, keys, mask, initial_query, weight_ih, bias_ih, weight_hh, bias_hh, steps: int):
        batch, hidden = keys.size(0), weight_hh.size(1)
        masked = ~mask.bool()
        queries, alphas, contexts, cells, activations, cell_tanhs = [initial_query], [], [], [], [], []
        hidden_state = cell = None
        for step in range(steps):
            scores = torch.bmm(keys, queries[-1][:, :, None])[:, :, 0]
            alpha = scores.masked_fill(masked, float("-inf")).softmax(-1)
            alphas.append(alpha)
            if step + 1 == steps:
                break
            context = torch.bmm(alpha[:, None], keys)[:, 0]
            gates = torch.addmm(bias_ih, context, weight_ih.t()) + bias_hh
            if hidden_state is not None:
                gates = gates.addmm_(hidden_state, weight_hh.t())
            gate_in, gate_forget, cell_input, gate_out = gates.chunk(4, dim=-1)
            gate_in, gate_forget, gate_out = gate_in.sigmoid(), gate_forget.sigmoid(), gate_out.sigmoid()
            cell_input = cell_input.tanh()
            previous = cell if cell is not None else keys.new_zeros(batch, hidden)
            cell = gate_forget * previous + gate_in * cell_input
            cell_tanh = cell.tanh()
            hidden_state = gate_out * cell_tanh
            contexts.append(context)
            cells.append(previous)
            activations.append(torch.cat([gate_in, gate_forget, cell_input, gate_out], dim=-1))
            cell_tanhs.append(cell_tanh)
            queries.append(hidden_state)
        ctx.steps = steps
        ctx.save_for_backward(keys, weight_ih, weight_hh, torch.stack(queries, 1), torch.stack(alphas, 1),
                              *(torch.stack(saved, 1) if saved else keys.new_zeros(batch, 0, 1)
                                for saved in (contexts, cells, activations, cell_tanhs)))
        return torch.stack(alphas, dim=1)

    @staticmethod
    def backward(ctx, grad_alphas):
        keys, weight_ih, weight_hh, queries, alphas, contexts, cells, activations, cell_tanhs = ctx.saved_tensors
        steps, hidden = ctx.steps, weight_hh.size(1)
        grad_queries = torch.zeros_like(queries)
        grad_contexts = torch.zeros_like(contexts) if steps > 1 else None
        grad_gates = torch.zeros_like(activations) if steps > 1 else None
        grad_alphas = grad_alphas.clone()
        grad_hidden = grad_cell = None
        for step in range(steps - 1, -1, -1):
            if step + 1 < steps:
                # the cell that made h_{step+1}: its gradient from the next query and from the gates that read it
                grad_hidden = grad_queries[:, step + 1] if grad_hidden is None else grad_queries[:, step + 1] + grad_hidden
                gate_in, gate_forget, cell_input, gate_out = activations[:, step].chunk(4, dim=-1)
                cell_tanh = cell_tanhs[:, step]
                grad_c = grad_hidden * gate_out * (1 - cell_tanh * cell_tanh)
                if grad_cell is not None:
                    grad_c = grad_c + grad_cell
                grad = torch.cat([grad_c * cell_input * gate_in * (1 - gate_in),
                                  grad_c * cells[:, step] * gate_forget * (1 - gate_forget),
                                  grad_c * gate_in * (1 - cell_input * cell_input),
                                  grad_hidden * cell_tanh * gate_out * (1 - gate_out)], dim=-1)
                grad_gates[:, step] = grad
                grad_cell = grad_c * gate_forget
                grad_hidden = grad @ weight_hh if step > 0 else None
                grad_context = grad @ weight_ih
                grad_contexts[:, step] = grad_context
                grad_alphas[:, step] += torch.bmm(keys, grad_context[:, :, None])[:, :, 0]
            alpha = alphas[:, step]
            grad_scores = alpha * (grad_alphas[:, step] - (alpha * grad_alphas[:, step]).sum(-1, keepdim=True))
            grad_alphas[:, step] = grad_scores
            grad_queries[:, step] += torch.bmm(grad_scores[:, None], keys)[:, 0]
        # grad_alphas now holds the gradient of the scores: keys get it through the queries and through the contexts
        grad_keys = torch.bmm(grad_alphas.transpose(1, 2), queries)
        grad_weight_ih = grad_bias = grad_weight_hh = None  # one step reads no cell
        if steps > 1:
            grad_keys += torch.bmm(alphas[:, :-1].transpose(1, 2), grad_contexts)
            flat = grad_gates.reshape(-1, grad_gates.size(-1))
            grad_weight_ih = flat.t() @ contexts.reshape(-1, contexts.size(-1))
            grad_bias = flat.sum(0)
            # h_0 is zero: the hidden product starts at step 1
            later = grad_gates[:, 1:].reshape(-1, grad_gates.size(-1))
            grad_weight_hh = later.t() @ queries[:, 1:-1].reshape(-1, hidden)
        return grad_keys, None, grad_queries[:, 0], grad_weight_ih, grad_bias, grad_weight_hh, grad_bias, None
