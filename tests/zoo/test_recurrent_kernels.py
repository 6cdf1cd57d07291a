"""The compiled step loops (benchbuild.zoo.recurrent_kernels), which the recurrent models run on the CPU at a batch of a
few rows, train as the torch operators they replace: 200 float32 updates of one real SCAN row each (002's batch)
give the same losses to 1e-5, for each model whose layers use them. (tests/zoo/test_unrolled_lstm.py compares the
layers themselves, both ways, with the step-by-step loops in float64; tests/reference/test_syntactic_attention_002.py
runs 002's code beside them.)"""

from __future__ import annotations

import pytest
import torch
from tiny_zoo import zoo_network

from benchbuild.zoo import load_entry, recurrent_kernels


def one_row_losses(rows, name: str, updates: int) -> list[float]:
    """`updates` Adam updates of the tiny `name`, one real row each (cycling through them), dropout on."""
    model = zoo_network(load_entry(name), len(rows.vocabulary), dropout=0.1).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    input_ids, attention_mask, labels = rows.batch()
    losses = []
    torch.manual_seed(5)
    for update in range(updates):
        row = update % input_ids.size(0)
        length, target_length = int(attention_mask[row].sum()), int((labels[row] != -100).sum())
        loss = model(input_ids=input_ids[row:row + 1, :length], attention_mask=attention_mask[row:row + 1, :length],
                     labels=labels[row:row + 1, :target_length]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", ["syntactic_attention", "lstm_attention"])
def test_two_hundred_one_row_updates_give_the_losses_of_the_torch_loops(scan_rows, monkeypatch, name):
    used = []
    real = recurrent_kernels.uses_kernels
    monkeypatch.setattr(recurrent_kernels, "uses_kernels", lambda *tensors: used.append(real(*tensors)) or used[-1])
    compiled = one_row_losses(scan_rows, name, 200)
    assert used and all(used)
    monkeypatch.setattr(recurrent_kernels, "uses_kernels", lambda *tensors: False)
    torch_loops = one_row_losses(scan_rows, name, 200)
    assert sum(compiled[-30:]) < 0.5 * sum(compiled[:30])  # it learns
    difference = max(abs(a - b) for a, b in zip(compiled, torch_loops))
    assert difference < 1e-5, difference
