"""The step loops of `benchbuild.zoo.recurrent`'s one-node recurrences as compiled loops (numba), for the CPU.

At the batch of one row that 002's protocol trains with, the loops' arithmetic is a few matrix-vector products a step;
run as torch operators, each step costs some twenty dispatches forward and thirty backward, which is most of an
update's time. Here a step is a plain loop with the products in BLAS (`np.dot`), the same arithmetic in the same
order of operations but for the summation order inside the products, so the values are torch's to float rounding
(tests/zoo/test_recurrent_kernels.py; the 002 reference tests run through them). The products over all steps (the
weights' gradients) stay in torch, as one product each.

The kernels take and return numpy views of contiguous CPU tensors (float32 or float64); `recurrent` decides when to
use them (`uses_kernels`).
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

KERNEL_DTYPES = (torch.float32, torch.float64)
MAX_KERNEL_ROWS = 4  # beyond a few rows torch's batched products win over a row-by-row loop


def uses_kernels(*tensors: torch.Tensor) -> bool:
    """Whether the compiled loops run these inputs: all on the CPU, one float dtype, a batch of a few rows, and no
    autograd machinery in the way (no grad mode on the inputs themselves: the Functions call them inside forward)."""
    first = tensors[0]
    return (first.device.type == "cpu" and first.dtype in KERNEL_DTYPES and first.size(0) <= MAX_KERNEL_ROWS
            and all(tensor.device.type == "cpu" and tensor.dtype == first.dtype for tensor in tensors))


def as_array(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous numpy view of a CPU tensor (a copy only where it is not contiguous)."""
    return tensor.detach().contiguous().numpy()


@njit(cache=True, nogil=True, inline="always")
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@njit(cache=True, nogil=True, inline="always")
def _masked_softmax(scores, masked, out):
    """out = softmax(scores) over the positions `masked` does not mark (0 at those), as torch's masked_fill(-inf) and
    softmax compute it: the largest unmasked score subtracted first."""
    top = -np.inf
    for j in range(scores.shape[0]):
        if not masked[j] and scores[j] > top:
            top = scores[j]
    total = scores[0] - scores[0]
    for j in range(scores.shape[0]):
        out[j] = 0 if masked[j] else np.exp(scores[j] - top)
        total += out[j]
    for j in range(scores.shape[0]):
        out[j] /= total


@njit(cache=True, nogil=True)
def attention_loop_forward(keys, masked, initial_query, weight_ih, bias, weight_hh, steps, queries, alphas, contexts,
                           cells, activations, cell_tanhs):
    """`AttentionLoop.forward`'s steps for each row: fills queries (B, steps, H; [:, 0] the initial query), alphas
    (B, steps, L) and, for the steps a cell follows, contexts (B, steps-1, D), cells (the memory cell before the step),
    activations ([σ(i), σ(f), tanh(g), σ(o)], B, steps-1, 4H) and cell_tanhs. `bias` is bias_ih + bias_hh."""
    batch = masked.shape[0]
    hidden = weight_hh.shape[1]
    for b in range(batch):
        queries[b, 0] = initial_query[b]
        cell = np.zeros(hidden, dtype=keys.dtype)
        for step in range(steps):
            _masked_softmax(np.dot(keys[b], queries[b, step]), masked[b], alphas[b, step])
            if step + 1 == steps:
                break
            context = np.dot(alphas[b, step], keys[b])
            contexts[b, step] = context
            gates = np.dot(weight_ih, context) + bias
            if step > 0:
                gates += np.dot(weight_hh, queries[b, step])
            cells[b, step] = cell
            for k in range(hidden):
                gate_in = _sigmoid(gates[k])
                gate_forget = _sigmoid(gates[hidden + k])
                cell_input = np.tanh(gates[2 * hidden + k])
                gate_out = _sigmoid(gates[3 * hidden + k])
                new_cell = gate_forget * cell[k] + gate_in * cell_input
                cell_tanh = np.tanh(new_cell)
                cell[k] = new_cell
                activations[b, step, k] = gate_in
                activations[b, step, hidden + k] = gate_forget
                activations[b, step, 2 * hidden + k] = cell_input
                activations[b, step, 3 * hidden + k] = gate_out
                cell_tanhs[b, step, k] = cell_tanh
                queries[b, step + 1, k] = gate_out * cell_tanh


@njit(cache=True, nogil=True)
def attention_loop_backward(keys, weight_ih, weight_hh, alphas, cells, activations, cell_tanhs, grad_alphas,
                            grad_queries, grad_contexts, grad_gates):
    """`AttentionLoop.backward`'s steps for each row, last to first: `grad_alphas` (B, steps, L) in, overwritten with
    the gradient of the scores; fills grad_queries (B, steps, H; zeros in), grad_contexts and grad_gates
    (B, steps-1, ·)."""
    batch, steps = alphas.shape[0], alphas.shape[1]
    hidden = weight_hh.shape[1]
    for b in range(batch):
        grad_hidden = np.zeros(hidden, dtype=keys.dtype)
        grad_cell = np.zeros(hidden, dtype=keys.dtype)
        for step in range(steps - 1, -1, -1):
            if step + 1 < steps:
                for k in range(hidden):
                    grad_h = grad_queries[b, step + 1, k] + grad_hidden[k]
                    gate_in = activations[b, step, k]
                    gate_forget = activations[b, step, hidden + k]
                    cell_input = activations[b, step, 2 * hidden + k]
                    gate_out = activations[b, step, 3 * hidden + k]
                    cell_tanh = cell_tanhs[b, step, k]
                    grad_c = grad_h * gate_out * (1 - cell_tanh * cell_tanh) + grad_cell[k]
                    grad_gates[b, step, k] = grad_c * cell_input * gate_in * (1 - gate_in)
                    grad_gates[b, step, hidden + k] = grad_c * cells[b, step, k] * gate_forget * (1 - gate_forget)
                    grad_gates[b, step, 2 * hidden + k] = grad_c * gate_in * (1 - cell_input * cell_input)
                    grad_gates[b, step, 3 * hidden + k] = grad_h * cell_tanh * gate_out * (1 - gate_out)
                    grad_cell[k] = grad_c * gate_forget
                if step > 0:
                    grad_hidden = np.dot(grad_gates[b, step], weight_hh)
                grad_context = np.dot(grad_gates[b, step], weight_ih)
                grad_contexts[b, step] = grad_context
                grad_alphas[b, step] += np.dot(keys[b], grad_context)
            alpha, grad_alpha = alphas[b, step], grad_alphas[b, step]
            weighted = np.dot(alpha, grad_alpha)
            for j in range(alpha.shape[0]):
                grad_alpha[j] = alpha[j] * (grad_alpha[j] - weighted)
            grad_queries[b, step] += np.dot(grad_alpha, keys[b])


@njit(cache=True, nogil=True)
def lstm_layer_forward(biased, weight_hh, keep, has_keep, reverse, outputs, previous_states, previous_cells,
                       activations, cell_tanhs, final_state, final_cell):
    """`LSTMLayer.forward`'s positions for each row: `biased` (B, L, 4H) is the projected input plus bias_hh; `keep`
    (B, L), 1 at real positions, read where `has_keep` (any (B, L) array where not); fills outputs (B, L, H; zero at padding), the state and memory
    cell before each position, the activations [σ(i), σ(f), tanh(g), σ(o)], tanh of each new cell, and the final
    state and cell (B, H)."""
    batch, length = biased.shape[0], biased.shape[1]
    hidden = weight_hh.shape[1]
    for b in range(batch):
        state = np.zeros(hidden, dtype=biased.dtype)
        cell = np.zeros(hidden, dtype=biased.dtype)
        for index in range(length):
            position = length - 1 - index if reverse else index
            previous_states[b, position] = state
            previous_cells[b, position] = cell
            gates = biased[b, position] + np.dot(weight_hh, state)
            here = keep[b, position]  # read where has_keep
            for k in range(hidden):
                gate_in = _sigmoid(gates[k])
                gate_forget = _sigmoid(gates[hidden + k])
                cell_input = np.tanh(gates[2 * hidden + k])
                gate_out = _sigmoid(gates[3 * hidden + k])
                new_cell = gate_forget * cell[k] + gate_in * cell_input
                cell_tanh = np.tanh(new_cell)
                activations[b, position, k] = gate_in
                activations[b, position, hidden + k] = gate_forget
                activations[b, position, 2 * hidden + k] = cell_input
                activations[b, position, 3 * hidden + k] = gate_out
                cell_tanhs[b, position, k] = cell_tanh
                new_state = gate_out * cell_tanh
                if has_keep:
                    state[k] = state[k] + here * (new_state - state[k])
                    cell[k] = cell[k] + here * (new_cell - cell[k])
                    outputs[b, position, k] = new_state * here
                else:
                    state[k], cell[k] = new_state, new_cell
                    outputs[b, position, k] = new_state
        final_state[b] = state
        final_cell[b] = cell


@njit(cache=True, nogil=True)
def lstm_layer_backward(weight_hh, keep, has_keep, reverse, factors, through, gate_forget, grad_outputs, grad_state,
                        grad_cell, grad_gates):
    """`LSTMLayer.backward`'s positions for each row, last run first: `factors` (B, L, 4H) and `through` (B, L, H) as
    the backward computes them, `gate_forget` (B, L, H); `grad_state` and `grad_cell` (B, H) the final state's and
    cell's gradients in (updated in place); fills grad_gates (B, L, 4H)."""
    batch, length = factors.shape[0], factors.shape[1]
    hidden = weight_hh.shape[1]
    for b in range(batch):
        for index in range(length):
            position = index if reverse else length - 1 - index
            here = keep[b, position]  # read where has_keep
            grad_c = np.empty(hidden, dtype=factors.dtype)
            for k in range(hidden):
                grad_new_state = grad_state[b, k] + grad_outputs[b, position, k]
                grad_new_cell = grad_cell[b, k]
                if has_keep:
                    grad_new_state, grad_new_cell = grad_new_state * here, grad_new_cell * here
                grad_c[k] = grad_new_cell + grad_new_state * through[b, position, k]
                grad_gates[b, position, k] = grad_c[k] * factors[b, position, k]
                grad_gates[b, position, hidden + k] = grad_c[k] * factors[b, position, hidden + k]
                grad_gates[b, position, 2 * hidden + k] = grad_c[k] * factors[b, position, 2 * hidden + k]
                grad_gates[b, position, 3 * hidden + k] = grad_new_state * factors[b, position, 3 * hidden + k]
            back = np.dot(grad_gates[b, position], weight_hh)
            for k in range(hidden):
                if has_keep:
                    grad_state[b, k] = back[k] + grad_state[b, k] * (1 - here)
                    grad_cell[b, k] = grad_c[k] * gate_forget[b, position, k] + grad_cell[b, k] * (1 - here)
                else:
                    grad_state[b, k] = back[k]
                    grad_cell[b, k] = grad_c[k] * gate_forget[b, position, k]


@njit(cache=True, nogil=True)
def attentive_decoder_forward(projected, keys, masked, weight_context, weight_hh, outputs, cells, activations,
                              cell_tanhs, alphas):
    """`AttentiveDecoder.forward`'s steps for each row, time-major as it keeps them: `projected` (T, B, 4W) the
    embeddings' share of the gates with both biases; fills outputs (T + 1, B, 2W; [s_t; c_t], zeros in), cells
    (T + 1, B, W; zeros in), activations [σ(i), σ(f), tanh(g), σ(o)] (T, B, 4W), cell_tanhs (T, B, W) and alphas
    (T, B, L)."""
    steps, batch = projected.shape[0], projected.shape[1]
    width = weight_hh.shape[1]
    for b in range(batch):
        for step in range(steps):
            gates = projected[step, b] + np.dot(weight_context, outputs[step, b, width:])
            gates += np.dot(weight_hh, outputs[step, b, :width])
            for k in range(width):
                gate_in = _sigmoid(gates[k])
                gate_forget = _sigmoid(gates[width + k])
                cell_input = np.tanh(gates[2 * width + k])
                gate_out = _sigmoid(gates[3 * width + k])
                cell = gate_forget * cells[step, b, k] + gate_in * cell_input
                cell_tanh = np.tanh(cell)
                activations[step, b, k] = gate_in
                activations[step, b, width + k] = gate_forget
                activations[step, b, 2 * width + k] = cell_input
                activations[step, b, 3 * width + k] = gate_out
                cells[step + 1, b, k] = cell
                cell_tanhs[step, b, k] = cell_tanh
                outputs[step + 1, b, k] = gate_out * cell_tanh
            _masked_softmax(np.dot(keys[b], outputs[step + 1, b, :width]), masked[b], alphas[step, b])
            outputs[step + 1, b, width:] = np.dot(alphas[step, b], keys[b])


@njit(cache=True, nogil=True)
def attentive_decoder_backward(keys, weight_context, weight_hh, alphas, factors, through, gate_forget, grad_read,
                               grad_alphas, has_grad_alphas, grad_gates, grad_scores):
    """`AttentiveDecoder.backward`'s steps for each row, last to first, time-major: `grad_read` (T, B, 2W), the
    gradient of each [s_t; c_t] from the outputs, gains in place what step t + 1's gates send back (its context half
    is then the contexts' whole gradient, which the keys' gradient reads); `grad_alphas` (T, B, L) is read where
    `has_grad_alphas`; fills grad_gates (T, B, 4W) and the scores' gradient grad_scores (T, B, L)."""
    steps, batch = alphas.shape[0], alphas.shape[1]
    width = weight_hh.shape[1]
    for b in range(batch):
        grad_cell = np.zeros(width, dtype=keys.dtype)
        for step in range(steps - 1, -1, -1):
            if step + 1 < steps:
                grad_read[step, b, :width] += np.dot(grad_gates[step + 1, b], weight_hh)
                grad_read[step, b, width:] += np.dot(grad_gates[step + 1, b], weight_context)
            grad_alpha = np.dot(keys[b], grad_read[step, b, width:])
            if has_grad_alphas:
                grad_alpha += grad_alphas[step, b]
            alpha = alphas[step, b]
            weighted = np.dot(alpha, grad_alpha)
            for j in range(alpha.shape[0]):
                grad_scores[step, b, j] = alpha[j] * (grad_alpha[j] - weighted)
            grad_state = grad_read[step, b, :width] + np.dot(grad_scores[step, b], keys[b])
            for k in range(width):
                grad_cell[k] = grad_state[k] * through[step, b, k] + (grad_cell[k] if step + 1 < steps else 0)
                grad_gates[step, b, k] = grad_cell[k] * factors[step, b, k]
                grad_gates[step, b, width + k] = grad_cell[k] * factors[step, b, width + k]
                grad_gates[step, b, 2 * width + k] = grad_cell[k] * factors[step, b, 2 * width + k]
                grad_gates[step, b, 3 * width + k] = grad_state[k] * factors[step, b, 3 * width + k]
                grad_cell[k] = grad_cell[k] * gate_forget[step, b, k]
