"""Recurrent pieces shared by the LSTM models: a bidirectional LSTM over right-padded batches, dot attention, and the
attentive LSTM decoders' loops.

An `nn.LSTM` is run here as its cell written out in matrix products (`lstm_cell`, `LSTMLayer`): torch's LSTM on the CPU
goes through oneDNN, whose fixed cost per call (about 1.8 ms forward and 2.8 ms backward for a one-step call of a
400-unit cell, measured 2026-12-05) dwarfs the arithmetic at the batch sizes of 002's protocol (one row). The
parameters are the `nn.LSTM`'s own, so checkpoints and the authors' code read the same weights; the arithmetic is
PyTorch's LSTM cell (gates i, f, g, o), equal to oneDNN's to float rounding (tests/zoo/test_unrolled_lstm.py). Stacked
layers run one by one, with the dropout between them drawn exactly as `nn.LSTM` draws it (`stacked_lstm`), so that a
seed gives the masks it gave before. The decoder loops (`AttentionLoop`, `AttentiveDecoder`) are one autograd node
each, backward written out, so that a weight's gradient is one product over all steps. On the CPU, at a batch of a
few rows (002's protocol trains with one), the steps of these nodes run as compiled loops
(`benchbuild.zoo.recurrent_kernels`: the same arithmetic, no operator dispatch per step); elsewhere as the torch
operators written here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from transformers import initialization as init

from benchbuild.zoo import recurrent_kernels as kernels



def _float32_under_autocast(forward):
    """The recurrent Functions below run in float32 under autocast, on a GPU or the CPU (their inputs cast): their
    hand-written products mix activations with the float32 weights, which autocast would not reconcile."""
    for device in ("cpu", "cuda"):
        forward = torch.amp.custom_fwd(device_type=device, cast_inputs=torch.float32)(forward)
    return forward


def _as_forward_under_autocast(backward):
    """A backward under the autocast state its forward ran in (`_float32_under_autocast`: none)."""
    for device in ("cpu", "cuda"):
        backward = torch.amp.custom_bwd(device_type=device)(backward)
    return backward


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


def unrolled_lstm(lstm: nn.LSTM, inputs: torch.Tensor, mask: torch.Tensor,
                  layer: int = 0) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Layer `layer` of a batch-first `lstm` over right-padded `inputs` (B, L, ·), its cell written out: the outputs
    (B, L, directions·H) and the final (h, c) (directions, B, H), as `packed_lstm` returns them for a one-layer LSTM.
    Each direction projects every position's input in one product, then runs its steps in one autograd node
    (`LSTMLayer`); a row's state stays put at its padding (so the forward direction ends at the row's last word and
    the backward one starts there, from zero), and the outputs are zero at padded positions."""
    keep = None if bool(mask.all()) else mask.to(inputs.dtype)[:, :, None]
    outputs, finals, cells = [], [], []
    for suffix in ("", "_reverse")[:2 if lstm.bidirectional else 1]:
        name = f"l{layer}{suffix}"
        projected = F.linear(inputs, getattr(lstm, f"weight_ih_{name}"), getattr(lstm, f"bias_ih_{name}"))
        output, final, cell = LSTMLayer.apply(projected, getattr(lstm, f"weight_hh_{name}"),
                                              getattr(lstm, f"bias_hh_{name}"), keep, bool(suffix))
        outputs.append(output)
        finals.append(final)
        cells.append(cell)
    return torch.cat(outputs, dim=-1), (torch.stack(finals), torch.stack(cells))


def stacked_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                 mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A batch-first `lstm` of several layers over right-padded `inputs` (B, L, ·), layer by layer in
    `unrolled_lstm`: what `packed_lstm` returns, with the same dropout masks between layers.

    `nn.LSTM` in training drops its layers' outputs (but the last's) with `torch.dropout` on the packed data of the
    sequence: positions in time-major order, rows sorted by length, padding absent (and oneDNN's path, which it takes
    for one row, holds the same elements in the same order). The same call on the same data here draws the same
    Bernoulli numbers from torch's generator, in the same order, so a seed gives the masks it gave `nn.LSTM`
    (tests/zoo/test_lstm_attention_fast.py)."""
    finals, cells = [], []
    for layer in range(lstm.num_layers):
        inputs, (final, cell) = unrolled_lstm(lstm, inputs, mask, layer)
        finals.append(final)
        cells.append(cell)
        if lstm.training and lstm.dropout > 0 and layer + 1 < lstm.num_layers:
            inputs = packed_dropout(inputs, mask, lstm.dropout)
    return inputs, (torch.cat(finals), torch.cat(cells))


def packed_dropout(inputs: torch.Tensor, mask: torch.Tensor, p: float) -> torch.Tensor:
    """`torch.dropout` of right-padded `inputs` (B, L, ·) applied to their packed data, as `nn.LSTM` applies it
    between layers; one unpadded row is its own packed data."""
    if inputs.size(0) == 1 and bool(mask.all()):
        return torch.dropout(inputs, p, True)
    packed = pack_padded_sequence(inputs, mask.sum(1).clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    dropped = PackedSequence(torch.dropout(packed.data, p, True), packed.batch_sizes, packed.sorted_indices,
                             packed.unsorted_indices)
    return pad_packed_sequence(dropped, batch_first=True, total_length=inputs.size(1))[0]


class LSTMLayer(torch.autograd.Function):
    """The steps of one LSTM direction over projected inputs (B, L, 4H) in one autograd node, backward written out:
    (outputs (B, L, H), final h, final c). `keep` (B, L, 1), 1 at real positions, or None when no row is padded;
    `reverse` runs from the last position to the first. The recurrent weight's gradient is one product over all steps
    (plain autograd writes a weight-sized gradient per step)."""

    @staticmethod
    @_float32_under_autocast
    def forward(ctx, projected, weight_hh, bias_hh, keep, reverse: bool):
        batch, length = projected.shape[:2]
        hidden = weight_hh.size(1)
        order = range(length - 1, -1, -1) if reverse else range(length)
        biased = projected + bias_hh
        state = projected.new_zeros(batch, hidden)
        cell = projected.new_zeros(batch, hidden)
        outputs = projected.new_zeros(batch, length, hidden)
        previous_states, previous_cells = torch.empty_like(outputs), torch.empty_like(outputs)
        activations, cell_tanhs = torch.empty_like(projected), torch.empty_like(outputs)
        if kernels.uses_kernels(biased, weight_hh) and (keep is None or keep.dtype == biased.dtype):
            rows = (biased if keep is None else keep)[:, :, 0]
            kernels.lstm_layer_forward(
                kernels.as_array(biased), kernels.as_array(weight_hh), kernels.as_array(rows), keep is not None,
                reverse, *(kernels.as_array(tensor) for tensor in (outputs, previous_states, previous_cells,
                                                                   activations, cell_tanhs, state, cell)))
            order = ()  # the loop below has nothing left to do
        for position in order:
            previous_states[:, position], previous_cells[:, position] = state, cell
            gates = torch.addmm(biased[:, position], state, weight_hh.t())
            activation = activations[:, position]
            torch.sigmoid(gates, out=activation)
            torch.tanh(gates[:, 2 * hidden:3 * hidden], out=activation[:, 2 * hidden:3 * hidden])
            gate_in, gate_forget, cell_input, gate_out = activation.chunk(4, dim=-1)
            new_cell = torch.addcmul(gate_forget * cell, gate_in, cell_input)
            cell_tanh = torch.tanh(new_cell, out=cell_tanhs[:, position])
            if keep is None:
                state, cell = torch.mul(gate_out, cell_tanh, out=outputs[:, position]), new_cell
            else:
                here = keep[:, position]
                new_state = gate_out * cell_tanh
                state = torch.lerp(state, new_state, here)
                cell = torch.lerp(cell, new_cell, here)
                torch.mul(new_state, here, out=outputs[:, position])
        ctx.reverse = reverse
        ctx.save_for_backward(weight_hh, keep, previous_states, previous_cells, activations, cell_tanhs)
        return outputs, state.clone() if keep is None else state, cell  # the final state apart from `outputs`

    @staticmethod
    @_as_forward_under_autocast
    @once_differentiable
    def backward(ctx, grad_outputs, grad_state, grad_cell):
        weight_hh, keep, previous_states, previous_cells, activations, cell_tanhs = ctx.saved_tensors
        length, hidden = activations.size(1), weight_hh.size(1)
        order = range(length) if ctx.reverse else range(length - 1, -1, -1)
        gate_in, gate_forget, cell_input, gate_out = activations.chunk(4, dim=-1)
        # dgates = [dc; dc; dc; dh] * factors, and dc = dh * through + the next step's dc * f
        slopes = activations * (1 - activations)
        slopes[..., 2 * hidden:3 * hidden] = 1 - cell_input * cell_input
        factors = torch.cat([cell_input, previous_cells, gate_in, cell_tanhs], dim=-1).mul_(slopes)
        through = gate_out * (1 - cell_tanhs * cell_tanhs)
        grad_gates = torch.empty_like(activations)
        grad_state = torch.zeros_like(previous_states[:, 0]) if grad_state is None else grad_state
        grad_cell = torch.zeros_like(previous_cells[:, 0]) if grad_cell is None else grad_cell
        if kernels.uses_kernels(grad_gates, weight_hh, grad_outputs, grad_state, grad_cell) \
                and (keep is None or keep.dtype == grad_gates.dtype):
            grad_state, grad_cell = grad_state.clone(memory_format=torch.contiguous_format), \
                grad_cell.clone(memory_format=torch.contiguous_format)
            rows = (factors if keep is None else keep)[:, :, 0]
            kernels.lstm_layer_backward(
                kernels.as_array(weight_hh), kernels.as_array(rows), keep is not None, ctx.reverse,
                *(kernels.as_array(tensor) for tensor in (factors, through, gate_forget, grad_outputs, grad_state,
                                                          grad_cell, grad_gates)))
            order = ()  # the loop below has nothing left to do
        for position in order:
            grad_new_state = grad_state + grad_outputs[:, position]
            grad_new_cell = grad_cell
            if keep is not None:
                here = keep[:, position]
                grad_new_state, grad_new_cell = grad_new_state * here, grad_new_cell * here
                passed_state, passed_cell = grad_state * (1 - here), grad_cell * (1 - here)
            grad_c = torch.addcmul(grad_new_cell, grad_new_state, through[:, position])
            grad = torch.mul(torch.cat([grad_c, grad_c, grad_c, grad_new_state], dim=-1), factors[:, position],
                             out=grad_gates[:, position])
            grad_state = grad @ weight_hh
            grad_cell = grad_c * gate_forget[:, position]
            if keep is not None:
                grad_state, grad_cell = grad_state + passed_state, grad_cell + passed_cell
        flat = grad_gates.reshape(-1, grad_gates.size(-1))
        grad_weight_hh = flat.t() @ previous_states.reshape(-1, previous_states.size(-1))
        return grad_gates, grad_weight_hh, flat.sum(0), None, None


def packed_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run a batch-first `lstm` over right-padded `inputs` (B, L, ·) as `nn.LSTM` runs packed sequences, so that no
    row reads its padding: the outputs (B, L, directions·H), zero at padded positions, and the final (h_n, c_n) of
    each row's real end (layers·directions, B, H). A one-layer LSTM runs in `unrolled_lstm`, a stacked one in
    `stacked_lstm`: the same computation."""
    if lstm.num_layers == 1:
        return unrolled_lstm(lstm, inputs, mask)
    return stacked_lstm(lstm, inputs, mask)


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


def attentive_decoder(cell: nn.LSTMCell, embedded: torch.Tensor, keys: torch.Tensor,
                      mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run an LSTM decoder that reads [previous target word; previous context] (B, T, ·) and attends over `keys`.

    Step i: s_i = LSTM(s_{i-1}, [y_{i-1}; c_{i-1}]), α_i = softmax(s_i · keys), c_i = Σ_j α_ij keys_j, from zero
    s_0, memory cell and c_0. Returns [s_i; c_i] (B, T, 2W), what the output layer reads, and the attention weights α
    (B, T, L). The loop is one autograd node (`AttentiveDecoder`)."""
    return AttentiveDecoder.apply(embedded, keys, mask, cell.weight_ih, cell.bias_ih, cell.weight_hh, cell.bias_hh)


class AttentiveDecoder(torch.autograd.Function):
    """The decoder loop of the attentive LSTM (`attentive_decoder`) in one autograd node, backward written out
    (backpropagation through the cell, the dot attention and the context fed back): (outputs [s_i; c_i] (B, T, 2W),
    α (B, T, L)) from the target embeddings `embedded` (B, T, E), `keys` (B, L, W), `mask` (B, L) and the
    `nn.LSTMCell`'s parameters, whose input is [y; c] (E + W).

    Plain autograd writes a weight-sized gradient for each product of each step (two per step, 6.4 MB at 002's 400
    units) and adds them up; here the embeddings' share of the gates is one product over all steps and each weight's
    gradient is one product over all steps. Nothing weight-sized is allocated but the two gradients themselves: on
    the CPU a fresh weight-sized tensor costs about as much as a product with the weight (its pages are faulted in),
    so the cell's two weights are read side by side rather than concatenated. The values are those of the
    step-by-step loop to float rounding (tests/zoo/test_lstm_attention_fast.py)."""

    @staticmethod
    @_float32_under_autocast
    def forward(ctx, embedded, keys, mask, weight_ih, bias_ih, weight_hh, bias_hh):
        batch, steps, split = embedded.shape
        width = weight_hh.size(1)
        masked = None if bool(mask.all()) else ~mask.bool()
        weight_context = weight_ih[:, split:]
        projected = torch.addmm(bias_ih + bias_hh, embedded.transpose(0, 1).reshape(steps * batch, split),
                                weight_ih[:, :split].t()).view(steps, batch, 4 * width)
        # time-major: outputs[t] = [s_t; c_t], what step t reads; cells[t] the memory cell before step t
        outputs = embedded.new_zeros(steps + 1, batch, 2 * width)
        cells = embedded.new_zeros(steps + 1, batch, width)
        activations = embedded.new_empty(steps, batch, 4 * width)
        cell_tanhs = embedded.new_empty(steps, batch, width)
        alphas = []
        if kernels.uses_kernels(embedded, keys, weight_ih, weight_hh):
            alphas = embedded.new_empty(steps, batch, keys.size(1))
            kernels.attentive_decoder_forward(
                *(kernels.as_array(tensor) for tensor in (projected, keys, ~mask.bool(), weight_context, weight_hh,
                                                          outputs, cells, activations, cell_tanhs, alphas)))
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(embedded, keys, weight_ih, weight_hh, outputs, cells, activations, cell_tanhs,
                                  alphas)
            return outputs[1:].transpose(0, 1), alphas.transpose(0, 1)
        for step in range(steps):
            gates = torch.addmm(projected[step], outputs[step, :, width:], weight_context.t())
            gates.addmm_(outputs[step, :, :width], weight_hh.t())
            activation = activations[step]
            torch.sigmoid(gates, out=activation)
            torch.tanh(gates[:, 2 * width:3 * width], out=activation[:, 2 * width:3 * width])
            gate_in, gate_forget, cell_input, gate_out = activation.chunk(4, dim=-1)
            torch.addcmul(gate_forget * cells[step], gate_in, cell_input, out=cells[step + 1])
            torch.tanh(cells[step + 1], out=cell_tanhs[step])
            state, context = outputs[step + 1].split(width, dim=-1)
            torch.mul(gate_out, cell_tanhs[step], out=state)
            scores = torch.bmm(keys, state[:, :, None])[:, :, 0]
            if masked is not None:
                scores.masked_fill_(masked, float("-inf"))
            alpha = scores.softmax(-1)
            context.copy_(torch.bmm(alpha[:, None], keys)[:, 0])
            alphas.append(alpha)
        alphas = torch.stack(alphas)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(embedded, keys, weight_ih, weight_hh, outputs, cells, activations, cell_tanhs, alphas)
        return outputs[1:].transpose(0, 1), alphas.transpose(0, 1)

    @staticmethod
    @_as_forward_under_autocast
    @once_differentiable
    def backward(ctx, grad_outputs, grad_alphas):
        embedded, keys, weight_ih, weight_hh, outputs, cells, activations, cell_tanhs, alphas = ctx.saved_tensors
        steps, batch, split = alphas.size(0), alphas.size(1), embedded.size(-1)
        width = weight_hh.size(1)
        weight_context = weight_ih[:, split:]
        gate_in, gate_forget, cell_input, gate_out = activations.chunk(4, dim=-1)
        # dgates = [dm; dm; dm; ds] * factors, and dm = ds * through + the next step's dm * f
        slopes = activations * (1 - activations)
        slopes[..., 2 * width:3 * width] = 1 - cell_input * cell_input
        factors = torch.cat([cell_input, cells[:-1], gate_in, cell_tanhs], dim=-1).mul_(slopes)
        through = gate_out * (1 - cell_tanhs * cell_tanhs)
        # of [s_i; c_i], i = 1..T: from the outputs and from step i + 1's gates
        if grad_outputs is None:
            grad_read = keys.new_zeros(steps, batch, 2 * width)
        else:
            grad_read = grad_outputs.transpose(0, 1).clone(memory_format=torch.contiguous_format)
        grad_alphas = None if grad_alphas is None else grad_alphas.transpose(0, 1)
        grad_gates = torch.empty_like(activations)
        grad_scores = torch.empty_like(alphas)
        grad_cell = None
        if kernels.uses_kernels(keys, weight_ih, weight_hh, grad_read):
            given = grad_alphas is not None
            kernels.attentive_decoder_backward(
                *(kernels.as_array(tensor) for tensor in (keys, weight_context, weight_hh, alphas, factors, through,
                                                          gate_forget, grad_read)),
                kernels.as_array(grad_alphas if given else alphas), given, kernels.as_array(grad_gates),
                kernels.as_array(grad_scores))
            steps_left = 0  # the loop below has nothing left to do
        else:
            steps_left = steps
        for step in range(steps_left - 1, -1, -1):
            grad_state, grad_context = grad_read[step].split(width, dim=-1)
            if step + 1 < steps:
                grad_state.addmm_(grad_gates[step + 1], weight_hh)
                grad_context.addmm_(grad_gates[step + 1], weight_context)
            grad_alpha = torch.bmm(keys, grad_context[:, :, None])[:, :, 0]
            if grad_alphas is not None:
                grad_alpha += grad_alphas[step]
            alpha = alphas[step]
            torch.mul(alpha, grad_alpha - (alpha * grad_alpha).sum(-1, keepdim=True), out=grad_scores[step])
            grad_state = torch.baddbmm(grad_state[:, None], grad_scores[step, :, None], keys)[:, 0]
            if grad_cell is None:
                grad_cell = grad_state * through[step]
            else:
                grad_cell.addcmul_(grad_state, through[step])
            torch.mul(torch.cat([grad_cell, grad_cell, grad_cell, grad_state], dim=-1), factors[step],
                      out=grad_gates[step])
            grad_cell = grad_cell * gate_forget[step]
        flat = grad_gates.view(steps * batch, -1).t()
        read = outputs[:-1].reshape(steps * batch, 2 * width)
        inputs = torch.cat([embedded.transpose(0, 1).reshape(steps * batch, split), read[:, width:]], dim=-1)
        grad_bias = flat.sum(1)
        grad_embedded = (flat.t() @ weight_ih[:, :split]).view(steps, batch, split).transpose(0, 1)
        # keys: read by every context (through α) and every score (through s_i)
        grad_keys = torch.bmm(torch.cat([alphas, grad_scores]).permute(1, 2, 0),
                              torch.cat([grad_read[:, :, width:], outputs[1:, :, :width]]).transpose(0, 1))
        return grad_embedded, grad_keys, None, flat @ inputs, grad_bias, flat @ read[:, :width], grad_bias


class AttentionLoop(torch.autograd.Function):
    """The decoder loop of Syntactic Attention in one autograd node, backward written out (backpropagation through
    time): α_t = softmax_j(q_t · k_j) over the unmasked j, with q_0 = `initial_query` and q_t = h_t after; while a
    step follows, c_t = Σ_j α_tj k_j and (h_{t+1}, c_{t+1}) = LSTM cell(c_t, (h_t, c_t)) from a zero (h_0, c_0).

    What plain autograd does per step, writing a whole weight-sized gradient for each of the 2(T-1) products of a row
    of one (2.6 MB each at 002's 400 units), is done once here: dW = dG^T X over all steps in one product. The values
    are those of the step-by-step loop to float rounding (tests/zoo/test_unrolled_lstm.py)."""

    @staticmethod
    @_float32_under_autocast
    def forward(ctx, keys, mask, initial_query, weight_ih, bias_ih, weight_hh, bias_hh, steps: int):
        batch, hidden = keys.size(0), weight_hh.size(1)
        masked = ~mask.bool()
        ctx.steps = steps
        if kernels.uses_kernels(keys, initial_query, weight_ih, weight_hh):
            keys = keys.contiguous()
            queries = keys.new_empty(batch, steps, hidden)
            alphas = keys.new_empty(batch, steps, keys.size(1))
            cells_before = max(steps - 1, 0)
            contexts, cells, cell_tanhs = (keys.new_empty(batch, cells_before, width)
                                           for width in (keys.size(2), hidden, hidden))
            activations = keys.new_empty(batch, cells_before, 4 * hidden)
            arrays = [kernels.as_array(tensor) for tensor in (queries, alphas, contexts, cells, activations, cell_tanhs)]
            kernels.attention_loop_forward(kernels.as_array(keys), kernels.as_array(masked),
                                           kernels.as_array(initial_query), kernels.as_array(weight_ih),
                                           kernels.as_array(bias_ih + bias_hh), kernels.as_array(weight_hh), steps,
                                           *arrays)
            if steps == 1:
                contexts = cells = activations = cell_tanhs = keys.new_zeros(batch, 0, 1)
            ctx.save_for_backward(keys, weight_ih, weight_hh, queries, alphas, contexts, cells, activations,
                                  cell_tanhs)
            return alphas.clone()
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
        ctx.save_for_backward(keys, weight_ih, weight_hh, torch.stack(queries, 1), torch.stack(alphas, 1),
                              *(torch.stack(saved, 1) if saved else keys.new_zeros(batch, 0, 1)
                                for saved in (contexts, cells, activations, cell_tanhs)))
        return torch.stack(alphas, dim=1)

    @staticmethod
    @_as_forward_under_autocast
    def backward(ctx, grad_alphas):
        keys, weight_ih, weight_hh, queries, alphas, contexts, cells, activations, cell_tanhs = ctx.saved_tensors
        steps, hidden = ctx.steps, weight_hh.size(1)
        grad_queries = torch.zeros_like(queries)
        grad_contexts = torch.zeros_like(contexts) if steps > 1 else None
        grad_gates = torch.zeros_like(activations) if steps > 1 else None
        grad_alphas = grad_alphas.contiguous().clone()
        grad_hidden = grad_cell = None
        if kernels.uses_kernels(keys, grad_alphas, weight_ih, weight_hh):
            empty = keys.new_zeros(keys.size(0), 0, 1)
            kernels.attention_loop_backward(
                *(kernels.as_array(tensor) for tensor in (keys, weight_ih, weight_hh, alphas, cells, activations,
                                                          cell_tanhs, grad_alphas, grad_queries)),
                *(kernels.as_array(tensor if tensor is not None else empty) for tensor in (grad_contexts, grad_gates)))
            steps = 0  # the loop below has nothing left to do
        for step in range(steps - 1, -1, -1):
            if step + 1 < steps:
                # the cell that made h_{step+1}: its gradient from the next query and from the gates that read it
                grad_hidden = (grad_queries[:, step + 1] if grad_hidden is None
                               else grad_queries[:, step + 1] + grad_hidden)
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
        steps = ctx.steps
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
