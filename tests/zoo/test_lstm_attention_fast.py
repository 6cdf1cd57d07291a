"""`lstm_attention`'s update written out (benchbuild.zoo.recurrent) computes what it computed step by step: the decoder
loop in one autograd node (`AttentiveDecoder`) equals the `nn.LSTMCell` loop under plain autograd, values and
gradients, on padded batches whose rows differ in length; the stacked encoder run layer by layer (`stacked_lstm`)
equals `nn.LSTM` with its dropout between layers, the same masks from the same seed; and a tiny model trains through
200 updates to the same losses either way."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from benchbuild.zoo import lstm_attention, load_entry, recurrent
from benchbuild.zoo.recurrent import AttentiveDecoder, attentive_decoder, dot_attention, stacked_lstm
from tiny_zoo import zoo_network

KEY_LENGTHS = [6, 2, 4, 1]


def step_by_step_decoder(cell: nn.LSTMCell, embedded: torch.Tensor, keys: torch.Tensor,
                         mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The loop `AttentiveDecoder` replaces, as `lstm_attention` ran it: one `nn.LSTMCell` call per step under plain
    autograd, the contexts recomputed from the weights after the loop."""
    batch, width = keys.size(0), keys.size(-1)
    state, memory_cell, context = (keys.new_zeros(batch, width) for _ in range(3))
    states, weights = [], []
    for step in range(embedded.size(1)):
        state, memory_cell = cell(torch.cat([embedded[:, step], context], dim=-1), (state, memory_cell))
        alpha = dot_attention(state, keys, mask)
        context = torch.einsum("bl,bld->bd", alpha, keys)
        states.append(state)
        weights.append(alpha)
    states, weights = torch.stack(states, dim=1), torch.stack(weights, dim=1)
    return torch.cat([states, torch.einsum("btl,bld->btd", weights, keys)], dim=-1), weights


def packed_nn_lstm(lstm: nn.LSTM, inputs: torch.Tensor,
                   mask: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A stacked LSTM as `packed_lstm` ran it before `stacked_lstm`: one `nn.LSTM` call on the packed sequences."""
    lengths = mask.sum(1).clamp(min=1).cpu()
    output, final = lstm(pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False))
    output, _ = pad_packed_sequence(output, batch_first=True, total_length=inputs.size(1))
    return output, final


def padded_keys(width: int, generator: torch.Generator, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    mask = (torch.arange(max(KEY_LENGTHS))[None, :] < torch.tensor(KEY_LENGTHS)[:, None]).long()
    keys = torch.randn(len(KEY_LENGTHS), max(KEY_LENGTHS), width, generator=generator, dtype=dtype)
    return keys * mask[:, :, None], mask


def decoder_case(steps: int, embedding: int = 5, width: int = 6, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    cell = nn.LSTMCell(embedding + width, width).double()
    with torch.no_grad():  # away from the default's small weights, so that saturation and attention both matter
        for parameter in cell.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.6)
    keys, mask = padded_keys(width, generator)
    embedded = torch.randn(len(KEY_LENGTHS), steps, embedding, generator=generator, dtype=torch.float64)
    return cell, embedded.requires_grad_(True), keys.requires_grad_(True), mask, generator


@pytest.mark.parametrize("steps", [1, 2, 7])
def test_attentive_decoder_equals_the_step_by_step_loop_values_and_gradients(steps, loops):
    cell, embedded, keys, mask, generator = decoder_case(steps)
    expected = step_by_step_decoder(cell, embedded, keys, mask)
    got = attentive_decoder(cell, embedded, keys, mask)
    for value, want in zip(got, expected):
        torch.testing.assert_close(value, want, rtol=0, atol=1e-10)
    assert torch.all(got[1][mask[:, None, :].expand_as(got[1]) == 0] == 0)
    inputs = [embedded, keys, *cell.parameters()]
    output_weights = torch.randn(got[0].shape, generator=generator, dtype=torch.float64)
    alpha_weights = torch.randn(got[1].shape, generator=generator, dtype=torch.float64)
    # through both outputs, and through [s; c] alone (what the model reads: α gets no gradient)
    for use_alphas in (True, False):
        def loss(outputs, alphas):
            return (outputs * output_weights).sum() + use_alphas * (alphas * alpha_weights).sum()

        expected_grads = torch.autograd.grad(loss(*expected), inputs, retain_graph=True)
        grads = torch.autograd.grad(loss(*got), inputs, retain_graph=True)
        for name, grad, want in zip(("embedded", "keys", "weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                                    grads, expected_grads):
            assert grad.shape == want.shape, name
            torch.testing.assert_close(grad, want, rtol=0, atol=1e-10, msg=lambda message: f"{name}: {message}")


def test_attentive_decoder_passes_gradcheck(loops):
    cell, embedded, keys, mask, _ = decoder_case(steps=3, embedding=3, width=4, seed=1)
    parameters = [cell.weight_ih, cell.bias_ih, cell.weight_hh, cell.bias_hh]
    assert torch.autograd.gradcheck(lambda e, k, *p: AttentiveDecoder.apply(e, k, mask, *p),
                                    (embedded, keys, *parameters))


def test_attentive_decoder_without_padding_and_under_no_grad(loops):
    cell, embedded, keys, _, _ = decoder_case(steps=4)
    mask = torch.ones(keys.shape[:2], dtype=torch.long)
    expected = step_by_step_decoder(cell, embedded, keys, mask)
    with torch.no_grad():
        got = attentive_decoder(cell, embedded, keys, mask)
    for value, want in zip(got, expected):
        torch.testing.assert_close(value, want, rtol=0, atol=1e-10)


def encoder_case(lengths: list[int], dtype, dropout: float = 0.5):
    generator = torch.Generator().manual_seed(2)
    lstm = nn.LSTM(5, 4, num_layers=3, bidirectional=True, batch_first=True, dropout=dropout).to(dtype)
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    inputs = torch.randn(len(lengths), max(lengths), 5, generator=generator, dtype=dtype) * mask[:, :, None]
    return lstm, inputs.requires_grad_(True), mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lengths", [[7], [4, 7, 2, 7], [5, 5]], ids=["one-row", "padded", "equal"])
@pytest.mark.parametrize("training", [True, False])
def test_stacked_lstm_draws_the_masks_nn_lstm_draws(lengths, dtype, training):
    """Same seed, same dropout masks between layers (one row goes through oneDNN in `nn.LSTM`, several rows through
    its packed path), the generator left in the same state, and the same values and gradients to float rounding."""
    lstm, inputs, mask = encoder_case(lengths, dtype)
    lstm.train(training)
    results = []
    for run in (packed_nn_lstm, stacked_lstm):
        torch.manual_seed(7)
        output, (final, cell) = run(lstm, inputs, mask)
        after = torch.rand(4, dtype=torch.float64)
        grads = torch.autograd.grad(output.square().sum() + final.sum() + 2 * cell.sum(), [inputs, *lstm.parameters()])
        results.append((output, final, cell, after, grads))
    (expected, expected_h, expected_c, expected_after, expected_grads), (got, h, c, after, grads) = results
    assert torch.equal(after, expected_after)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    for value, want in ((got, expected), (h, expected_h), (c, expected_c), *zip(grads, expected_grads)):
        torch.testing.assert_close(value, want, rtol=0, atol=tolerance)
    if training:  # the masks drop something: without them the outputs differ by far more than rounding
        lstm.eval()
        undropped, _ = stacked_lstm(lstm, inputs, mask)
        assert (undropped - got).abs().max() > 1e-2


def train_losses(rows, updates: int, **architecture) -> list[float]:
    model = zoo_network(load_entry("lstm_attention"), len(rows.vocabulary), **architecture).train()
    input_ids, attention_mask, labels = rows.batch()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    torch.manual_seed(3)
    for _ in range(updates):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def step_by_step(monkeypatch) -> None:
    monkeypatch.setattr(lstm_attention, "attentive_decoder", step_by_step_decoder)
    monkeypatch.setattr(recurrent, "stacked_lstm", packed_nn_lstm)


def test_two_hundred_updates_give_the_losses_of_the_step_by_step_model(scan_rows, monkeypatch):
    """The tiny sizes (one encoder layer, no dropout) on 30 real SCAN rows."""
    now = train_losses(scan_rows, 200)
    step_by_step(monkeypatch)
    before = train_losses(scan_rows, 200)
    assert now[-1] < 0.01 * now[0]
    difference = max(abs(a - b) for a, b in zip(now, before))
    assert difference < 1e-5, difference


def test_two_encoder_layers_with_dropout_train_alike(scan_rows, monkeypatch):
    """Two encoder layers with dropout 0.5 (the masks between `nn.LSTM`'s layers and the model's own): the losses
    agree to float rounding at first and stay within 1e-3 over 200 updates (rounding grows under dropout at this
    learning rate: at most 5e-7 over the first 25 updates, 2e-6 over 50, 2e-5 over 100, 4e-4 over 200, measured
    2026-12-05), while masks drawn otherwise move the very first loss by 3e-2."""
    architecture = {"num_layers": 2, "dropout": 0.5}
    now = train_losses(scan_rows, 200, **architecture)
    step_by_step(monkeypatch)
    before = train_losses(scan_rows, 200, **architecture)
    assert max(abs(a - b) for a, b in zip(now[:50], before[:50])) < 1e-5
    assert max(abs(a - b) for a, b in zip(now, before)) < 1e-3

    def other_masks(lstm, inputs, mask):
        torch.rand(1)
        return packed_nn_lstm(lstm, inputs, mask)

    monkeypatch.setattr(recurrent, "stacked_lstm", other_masks)
    otherwise = train_losses(scan_rows, 3, **architecture)
    assert abs(now[0] - otherwise[0]) > 1e-2
