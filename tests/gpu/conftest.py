"""Fixtures of the `gpu` tests: IEEE float32 arithmetic for comparisons across devices, and the zoo tests' helpers
(`tiny_zoo`, the incremental-decoding helpers), whose CPU tests these tests repeat on CUDA; their SCAN benchmark is
`tiny_scan` of tests/conftest.py.

Every module here skips itself when torch sees no CUDA device; `benchmarks/gpu/run.sh` runs them on a GPU machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# The zoo's tiny sizes and its incremental-decoding helpers live beside the CPU tests in tests/zoo, which pytest puts
# on sys.path only when it collects that folder; `pytest tests/gpu` alone needs it here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "zoo"))


@pytest.fixture
def ieee_float32():
    """float32 matrix products, convolutions and LSTMs in full precision (no TF32), so logits computed on CUDA and on
    CPU from the same weights agree to float32 rounding; restored afterwards."""
    backends = [torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn]
    before = [backend.fp32_precision for backend in backends]
    for backend in backends:
        backend.fp32_precision = "ieee"
    yield
    for backend, precision in zip(backends, before):
        backend.fp32_precision = precision
