"""The recurrent zoo models' hand-written autograd Functions (benchbuild.zoo.recurrent) under a GPU's bf16 autocast,
as `train` runs them with `precision = "auto"`: they run in float32 inside (their inputs cast), the update is finite,
and the loss is close to the same step's without autocast. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from tiny_zoo import zoo_network

from benchbuild.zoo import load_entry

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("name,layers", [("syntactic_attention", 1), ("lstm_attention", 2)])
def test_a_training_step_under_bf16_autocast_runs_and_agrees_with_float32(name, layers):
    sources = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]], device="cuda")
    labels = torch.tensor([[11, 12, 13, 2], [14, 2, -100, -100]], device="cuda")
    losses = []
    for autocast in (False, True):
        torch.manual_seed(0)
        model = zoo_network(load_entry(name), 24, num_layers=layers, dropout=0.0).cuda().train()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=sources, labels=labels).loss
        loss.backward()
        assert all(torch.isfinite(parameter.grad).all() for parameter in model.parameters() if parameter.grad is not None)
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=0.05)
