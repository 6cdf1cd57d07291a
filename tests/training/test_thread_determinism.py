"""A training run gives the same checkpoint bytes on one CPU thread and on two (`benchbuild train` keeps the thread
count it starts with, and `zoo.layer_norm.LayerNorm` sums its gradients in an order no thread count changes)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import torch
from commands import BENCHBUILD
from small_inputs import tiny_transformer_entry

from benchbuild.zoo.layer_norm import LayerNorm


def _train(tiny_scan: Path, model: Path, out: Path, threads: int) -> str:
    # OMP_NUM_THREADS only, as a user sets it: numba's own count stays the machine's, and its OpenMP layer, started
    # at the first dropout kernel, would put torch on that many threads unless `train` holds its count.
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_NUM_THREADS"}
    environment["OMP_NUM_THREADS"] = str(threads)
    done = subprocess.run([BENCHBUILD, "train", "--model", model, "--data", tiny_scan, "--out", out, "--device", "cpu"],
                          capture_output=True, text=True, env=environment, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    if threads == 1:  # held to the end: without the hold, numba's start puts the run on every core
        assert json.loads((out / "run.json").read_text(encoding="utf-8"))["cpu_threads"] == 1
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def test_a_run_on_one_thread_and_on_two_ends_in_the_same_checkpoint_bytes(tiny_scan, tmp_path):
    model = tmp_path / "tiny.toml"
    # Dropout on, so the numba kernels run (their first one used to reset torch's thread count), and LayerNorm in
    # every sublayer: on torch's own LayerNorm these two runs end in different bytes.
    entry = tiny_transformer_entry("tiny", "scan", steps=12, batch_size=32, learning_rate=1e-3, eval_every=6)
    model.write_text(entry.replace("dropout = 0.0", "dropout = 0.1"), encoding="utf-8")
    one, two = (_train(tiny_scan, model, tmp_path / f"threads{count}", count) for count in (1, 2))
    assert one == two


def test_layer_norm_gives_torchs_values_and_gradients_to_rounding():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(37, 5, 24, generator=generator, requires_grad=True)
    ours, reference = LayerNorm(24), torch.nn.LayerNorm(24)
    with torch.no_grad():
        for module in (ours, reference):
            module.weight.copy_(torch.linspace(0.5, 1.5, 24))
            module.bias.copy_(torch.linspace(-0.2, 0.2, 24))
    upstream = torch.randn(37, 5, 24, generator=generator)
    gradients = []
    for module in (ours, reference):
        x.grad = None
        output = module(x)
        output.backward(upstream)
        gradients.append((output.detach(), x.grad.clone(), module.weight.grad.clone(), module.bias.grad.clone()))
    for mine, theirs in zip(*gradients):
        assert torch.allclose(mine, theirs, atol=1e-5, rtol=1e-5)


def test_layer_norm_weight_sums_are_float64_sums_in_row_order_bit_for_bit():
    """The kernel's sums are each column's float64 sum over the rows in order (what makes them thread-independent) of
    the normalized input as torch's two float32 operators round it, bit for bit, for widths below, at and past its
    block of columns."""
    import numpy as np

    from benchbuild.zoo.layer_norm import COLUMN_BLOCK, _column_sums

    generator = np.random.default_rng(0)
    for columns in (24, COLUMN_BLOCK, 2 * COLUMN_BLOCK + 3):
        # magnitudes from 1e-8 to 1e8, so that a float64 sum in another order rounds differently
        grad = (generator.standard_normal((301, columns)) * 10.0 ** generator.uniform(-8, 8, (301, columns)))
        grad = grad.astype(np.float32)
        x = (generator.standard_normal((301, columns)) * 7 + 3).astype(np.float32)
        mean, rstd = x.mean(axis=1).astype(np.float32), (1 / x.std(axis=1)).astype(np.float32)
        normalized = torch.from_numpy(x).sub(torch.from_numpy(mean)[:, None]).mul(torch.from_numpy(rstd)[:, None])
        expected_weight, expected_bias = np.zeros(columns), np.zeros(columns)
        for row in range(grad.shape[0]):  # one row after another: each column's sum in row order
            expected_weight += grad[row].astype(np.float64) * normalized[row].numpy().astype(np.float64)
            expected_bias += grad[row].astype(np.float64)
        grad_weight, grad_bias = np.empty(columns), np.empty(columns)
        _column_sums(grad, x, mean, rstd, grad_weight, grad_bias)
        assert np.array_equal(grad_weight, expected_weight) and np.array_equal(grad_bias, expected_bias)
        assert not np.array_equal(expected_bias, grad.astype(np.float64)[::-1].cumsum(axis=0)[-1])  # order shows


def test_layer_norm_is_torchs_own_without_gradients_and_loads_its_state():
    reference = torch.nn.LayerNorm(8)
    ours = LayerNorm(8)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(3, 8)
    with torch.no_grad():
        assert torch.equal(ours(x), reference(x))
