"""The recurrent layers written out (benchbuild.zoo.recurrent) compute what torch's LSTM and the step-by-step autograd
loop compute: values and gradients, on padded batches whose rows differ in length."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from benchbuild.zoo.recurrent import AttentionLoop, dot_attention, unrolled_lstm

LENGTHS = [6, 2, 4, 1]


def padded_batch(width: int, generator: torch.Generator, lengths: list[int] = LENGTHS) -> tuple[torch.Tensor,
                                                                                                torch.Tensor]:
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    inputs = torch.randn(len(lengths), max(lengths), width, generator=generator, dtype=torch.float64)
    return inputs * mask[:, :, None], mask


@pytest.mark.parametrize("lengths", [LENGTHS, [5]], ids=["padded", "one-row"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_unrolled_lstm_equals_torch_packed_lstm_values_and_gradients(bidirectional, lengths, loops):
    generator = torch.Generator().manual_seed(0)
    lstm = nn.LSTM(5, 7, batch_first=True, bidirectional=bidirectional).double()
    inputs, mask = padded_batch(5, generator, lengths)
    inputs.requires_grad_(True)
    packed = pack_padded_sequence(inputs, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    expected, (expected_h, expected_c) = lstm(packed)
    expected, _ = pad_packed_sequence(expected, batch_first=True, total_length=inputs.size(1))
    output, (final, cell) = unrolled_lstm(lstm, inputs, mask)
    for got, want in ((output, expected), (final, expected_h), (cell, expected_c)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    weights = torch.randn(output.shape, generator=generator, dtype=torch.float64)
    expected_grads = torch.autograd.grad((expected * weights).sum() + expected_h.sum() + 2 * expected_c.sum(),
                                         [inputs, *lstm.parameters()])
    grads = torch.autograd.grad((output * weights).sum() + final.sum() + 2 * cell.sum(), [inputs, *lstm.parameters()])
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def step_by_step(keys, mask, query, lstm: nn.LSTM, steps: int) -> torch.Tensor:
    """The loop AttentionLoop replaces, in plain autograd over torch's LSTM."""
    state, weights = None, []
    for step in range(steps):
        alpha = dot_attention(query, keys, mask)
        weights.append(alpha)
        if step + 1 < steps:
            output, state = lstm(torch.einsum("bl,bld->bd", alpha, keys)[:, None], state)
            query = output[:, 0]
    return torch.stack(weights, dim=1)


@pytest.mark.parametrize("steps", [1, 2, 9])
def test_attention_loop_equals_the_step_by_step_loop_values_and_gradients(steps, loops):
    generator = torch.Generator().manual_seed(1)
    lstm = nn.LSTM(6, 6, batch_first=True).double()
    keys, mask = padded_batch(6, generator)
    query = torch.randn(len(LENGTHS), 6, generator=generator, dtype=torch.float64)
    keys.requires_grad_(True)
    query.requires_grad_(True)
    parameters = [lstm.weight_ih_l0, lstm.bias_ih_l0, lstm.weight_hh_l0, lstm.bias_hh_l0]
    expected = step_by_step(keys, mask, query, lstm, steps)
    got = AttentionLoop.apply(keys, mask, query, *parameters, steps)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    assert torch.all(got[mask[:, None, :].expand_as(got) == 0] == 0)
    weights = torch.randn(got.shape, generator=generator, dtype=torch.float64)
    inputs = [keys, query, *parameters]
    expected_grads = torch.autograd.grad((expected * weights).sum(), inputs, allow_unused=True)
    grads = torch.autograd.grad((got * weights).sum(), inputs, allow_unused=True)
    for got_grad, want in zip(grads, expected_grads):
        if want is None:  # one step reads no cell
            assert got_grad is None or not got_grad.any()
        else:
            torch.testing.assert_close(got_grad, want, rtol=0, atol=1e-10)
    assert torch.autograd.gradcheck(lambda k, q: AttentionLoop.apply(k, mask, q, *parameters, steps), (keys, query))


@pytest.mark.parametrize("name,layers", [("syntactic_attention", 1), ("lstm_attention", 2)])
def test_a_training_step_under_bf16_autocast_runs_in_float32_inside(name, layers):
    """Under autocast (a GPU's `precision = "auto"`, or bf16 asked for on the CPU) the hand-written Functions get
    float32 inputs: the step runs, and its loss is the float32 step's to bf16 rounding of the other layers
    (tests/gpu/test_gpu_recurrent.py repeats it on CUDA)."""
    from tiny_zoo import zoo_network

    from benchbuild.zoo import load_entry

    sources = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    labels = torch.tensor([[11, 12, 13, 2], [14, 2, -100, -100]])
    losses = []
    for autocast in (False, True):
        model = zoo_network(load_entry(name), 24, num_layers=layers, dropout=0.0).train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=sources, labels=labels).loss
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=0.01)
